"""Grad modes: whether ops record the graph. Thread-local, as in PyTorch."""
import functools
import inspect
import threading

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "inference_mode", "is_grad_enabled",
           "is_inference_mode_enabled"]


class _State(threading.local):
    grad_enabled = True
    inference = False


state = _State()


def is_grad_enabled():
    """True when new ops record the autograd graph in this thread."""
    return state.grad_enabled


def is_inference_mode_enabled():
    """True inside ``inference_mode()`` in this thread."""
    return state.inference


class _Mode:
    """Context manager that also works as a decorator (on functions and generators)."""

    def __call__(self, fn):
        if inspect.isclass(fn):
            raise TypeError(f"{type(self).__name__} cannot decorate a class")
        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def gen_wrapper(*args, **kwargs):
                gen = fn(*args, **kwargs)
                try:
                    with self._clone():
                        response = gen.send(None)
                    while True:
                        try:
                            request = yield response
                        except GeneratorExit:
                            with self._clone():
                                gen.close()
                            raise
                        except BaseException as e:
                            with self._clone():
                                response = gen.throw(e)
                        else:
                            with self._clone():
                                response = gen.send(request)
                except StopIteration as e:
                    return e.value
            return gen_wrapper

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self._clone():
                return fn(*args, **kwargs)
        return wrapper

    def _clone(self):
        return type(self)()


class _NoParamMode(_Mode):
    """A mode that also decorates without parentheses: ``@no_grad`` as ``@no_grad()``."""

    def __new__(cls, orig_func=None):
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)


class no_grad(_NoParamMode):
    """Disable gradient recording: ``with ember.no_grad():``, ``@ember.no_grad()`` or
    ``@ember.no_grad``."""

    def __enter__(self):
        self._prev = state.grad_enabled
        state.grad_enabled = False

    def __exit__(self, *exc):
        state.grad_enabled = self._prev
        return False


class enable_grad(_NoParamMode):
    """Enable gradient recording inside a ``no_grad`` block (also ``@enable_grad``)."""

    def __enter__(self):
        self._prev = state.grad_enabled
        state.grad_enabled = True

    def __exit__(self, *exc):
        state.grad_enabled = self._prev
        return False


class set_grad_enabled(_Mode):
    """Set grad mode on (True) or off (False); acts at once, or as a context manager."""

    def __init__(self, mode):
        if not isinstance(mode, bool):
            raise TypeError(f"set_grad_enabled() expects a bool, got {type(mode).__name__}")
        self._prev = state.grad_enabled
        self.mode = mode
        state.grad_enabled = mode

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        state.grad_enabled = self._prev
        return False

    def _clone(self):
        return set_grad_enabled(self.mode)

    def __call__(self, fn):
        state.grad_enabled = self._prev
        return super().__call__(fn)


class inference_mode(_Mode):
    """Like ``no_grad``, for pure inference; ``inference_mode(False)`` is a no-op block.

    Also a decorator, with or without parentheses: ``@inference_mode``,
    ``@inference_mode()``, ``@inference_mode(False)``.
    """

    def __new__(cls, mode=True):
        if isinstance(mode, bool):
            return super().__new__(cls)
        return cls()(mode)

    def __init__(self, mode=True):
        self.mode = mode

    def __enter__(self):
        self._prev = (state.grad_enabled, state.inference)
        if self.mode:
            state.grad_enabled = False
            state.inference = True

    def __exit__(self, *exc):
        state.grad_enabled, state.inference = self._prev
        return False

    def _clone(self):
        return inference_mode(self.mode)

    def __call__(self, fn):
        if isinstance(fn, bool):
            return inference_mode(fn)
        return super().__call__(fn)
