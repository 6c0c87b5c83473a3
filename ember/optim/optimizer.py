"""The Optimizer base class: PyTorch's ``param_groups``/``state``/``state_dict`` outside.

Each optimizer (one small file each) adds a constructor that checks its hyperparameters
and fills ``defaults``, an ``_init_state`` that lays out a parameter's state before its
first update, and a ``_step_group(group)`` that updates the parameters of one group in
place. ``step`` is defined once, here; ``_step_group`` loops over ``_grads(group)``,
which skips parameters without a gradient, initializes their state, applies
``maximize`` and weight decay in PyTorch's order, and afterwards bumps the version
counters of the parameter and its state. The update works on the parameters' NumPy
(or CuPy) arrays directly, with in-place ufuncs; it runs under ``no_grad``.

State tensors follow PyTorch's layout so that ``state_dict()`` looks the same: for
example Adam keeps ``step`` as a 0-d float32 tensor (float64 when that is the default
dtype) and ``exp_avg``/``exp_avg_sq`` shaped like the parameter.

The ``foreach``, ``fused`` and ``capturable`` flags select PyTorch kernels that compute
the same update; ember accepts them, stores them in the param groups (so state dicts
match) and runs its single implementation. As in PyTorch, ``capturable=True`` is refused
at the step (an AssertionError) for parameters that are not on an accelerator.
``differentiable=True`` (autograd through the step) is not supported and raises
NotImplementedError.
"""
import functools
import warnings
from collections import OrderedDict, defaultdict
from copy import deepcopy
from itertools import chain

import numpy as np

from ember._tensor import Tensor, _make
from ember.autograd.grad_mode import state as _grad_state
from ember.backend import axpy as _blas_axpy
from ember.backend import blas_hold as _blas_hold
from ember.backend import dtypes as _dt
from ember.backend import threads as _threads
from ember.backend.threads import parallel_rows
from ember.utils.hooks import RemovableHandle

__all__ = ["Optimizer", "register_optimizer_step_pre_hook", "register_optimizer_step_post_hook",
           "required"]


class _RequiredParameter:
    """Singleton for a hyperparameter that every param group must give."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()

_global_optimizer_pre_hooks = OrderedDict()
_global_optimizer_post_hooks = OrderedDict()


def register_optimizer_step_pre_hook(hook):
    """Register ``hook(optimizer, args, kwargs)`` to run before every optimizer's ``step``.

    The hook may return ``(new_args, new_kwargs)``. Returns a handle with ``remove()``.
    """
    handle = RemovableHandle(_global_optimizer_pre_hooks)
    _global_optimizer_pre_hooks[handle.id] = hook
    return handle


def register_optimizer_step_post_hook(hook):
    """Register ``hook(optimizer, args, kwargs)`` to run after every optimizer's ``step``."""
    handle = RemovableHandle(_global_optimizer_post_hooks)
    _global_optimizer_post_hooks[handle.id] = hook
    return handle


def _with_step_hooks(step):
    """Wrap a ``step`` method so registered step pre/post hooks run around it."""
    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        if "_optimizer_step_pre_hooks" not in self.__dict__:
            # A subclass that wraps another optimizer without calling
            # ``Optimizer.__init__`` (accelerate's) has no hook tables of its own;
            # as in PyTorch, its ``step`` runs unhooked and the inner one's hooks fire.
            return step(self, *args, **kwargs)
        if _global_optimizer_pre_hooks or self._optimizer_step_pre_hooks:
            for pre_hook in chain(_global_optimizer_pre_hooks.values(),
                                  self._optimizer_step_pre_hooks.values()):
                result = pre_hook(self, args, kwargs)
                if result is not None:
                    if isinstance(result, tuple) and len(result) == 2:
                        args, kwargs = result
                    else:
                        raise RuntimeError(f"{step} must return None or a tuple of "
                                           f"(new_args, new_kwargs), but got {result}.")
        out = step(self, *args, **kwargs)
        if self._optimizer_step_post_hooks or _global_optimizer_post_hooks:
            for post_hook in chain(self._optimizer_step_post_hooks.values(),
                                   _global_optimizer_post_hooks.values()):
                post_hook(self, args, kwargs)
        return out
    wrapper.hooked = True
    return wrapper


# ----- helpers shared by the optimizers --------------------------------------------------
def _to_scalar(x):
    """A 1-element hyperparameter tensor as a 0-d tensor; anything else unchanged."""
    if isinstance(x, Tensor) and x.dim() != 0:
        return x.squeeze()
    return x


def _value(x):
    """A hyperparameter (float or 1-element tensor) as a Python number."""
    return x.item() if isinstance(x, Tensor) else x


def _decay_factor(lr, weight_decay):
    """``1 - lr * weight_decay``, in a tensor lr's own precision (as PyTorch computes it)."""
    if isinstance(lr, Tensor):
        return (1 - _to_scalar(lr) * weight_decay).item()
    return 1 - lr * weight_decay


def _scalar_dtype():
    """The dtype PyTorch gives ``step`` counters: float64 if that is the default, else float32."""
    return np.float64 if _dt.get_default_dtype() is _dt.float64 else np.float32


def _scalar_tensor(value):
    """A 0-d cpu tensor of the scalar dtype (the ``step``/``mu_product`` counters)."""
    return _make(np.array(value, dtype=_scalar_dtype()))


def _real_pairs(a):
    """A complex array's memory as its real dtype with a trailing axis of 2 (a view)."""
    return a[..., None].view(a.real.dtype)


def _complex_of(a):
    """The complex array whose real pairs ``a`` is (a view): ``_real_pairs``'s inverse."""
    return a.view(np.result_type(a.dtype, np.complex64))[..., 0]


def _real_pairs_of(t):
    r = _make(_real_pairs(t._data))
    r._vc = t._vc
    return r


def _zeros_like(p):
    """A zero state tensor shaped (and strided) like parameter ``p``."""
    return _make(np.zeros_like(p._data))


def _check_lr(lr):
    """PyTorch's check of ``lr``: a number or 1-element tensor, not negative."""
    if isinstance(lr, Tensor) and lr.numel() != 1:
        raise ValueError("Tensor lr must be 1-element")
    if not 0.0 <= _value(lr):
        raise ValueError(f"Invalid learning rate: {lr}")


def _check_nonnegative(**values):
    """Raise PyTorch's ValueError for the first of ``values`` (checked in order) below 0."""
    for name, value in values.items():
        if not 0.0 <= value:
            raise ValueError(f"Invalid {'epsilon' if name == 'eps' else name} value: {value}")


def _check_betas(betas, eps, weight_decay):
    """The Adam family's checks, in PyTorch's order: eps, betas in [0, 1), weight_decay."""
    _check_nonnegative(eps=eps)
    for i in (0, 1):
        if not 0.0 <= _value(betas[i]) < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {betas[i]}")
    _check_nonnegative(weight_decay=weight_decay)


def _check_flags(defaults):
    """Reject the options ember cannot honour: ``differentiable``, ``fused`` with ``foreach``."""
    if defaults.get("differentiable"):
        raise NotImplementedError(
            "differentiable=True (autograd through the optimizer step) is not supported by "
            "ember.optim; the step always runs under no_grad")
    if defaults.get("fused") and defaults.get("foreach"):
        raise RuntimeError("`fused` and `foreach` cannot be `True` together.")


def _split_update(fn, cost, *arrays):
    """``fn(*arrays)`` (an elementwise in-place update), over blocks of the flattened
    arrays on the intra-op threads when they are large NumPy arrays of one layout, else
    once. Each element's arithmetic is the same either way."""
    a0 = arrays[0]
    if type(a0) is not np.ndarray or a0.size < _SPLIT_MIN or not all(
            type(a) is np.ndarray and a.shape == a0.shape and a.flags.c_contiguous
            for a in arrays):
        fn(*arrays)
        return
    flat = [a.reshape(-1) for a in arrays]
    parallel_rows(lambda lo, hi: fn(*[f[lo:hi] for f in flat]), a0.size, cost * a0.size)


_SPLIT_MIN = 1 << 15


def _mul_addcmul_(v, g, beta, out=None):
    """``v.mul_(beta).addcmul_(g, g, value=1 - beta)`` on arrays (a running average of
    squares); returns the scratch array, ``out`` or a new one, holding ``(1 - beta) * g * g``."""
    v *= beta
    gg = np.multiply(g, g, out=out)
    gg *= 1 - beta
    v += gg
    return gg


def _lerp_(a, b, w, out=None):
    """``a.lerp_(b, w)`` on arrays, with PyTorch's two-sided formula; ``out`` (a scratch
    array shaped like ``a``, or None for a new one) holds the difference."""
    d = np.subtract(b, a, out=out)
    if w < 0.5:
        d *= w
        a += d
    else:
        d *= 1 - w
        np.subtract(b, d, out=a)


_AXPY_CHUNK = 1 << 14  # elements: the float64 scratch (128 KiB) stays in cache


def _axpy(a, alpha, b, out=None):
    """``a + alpha * b`` rounded once, as PyTorch's ``add(b, alpha=alpha)`` computes it on
    the CPU (a fused multiply-add in float32 arithmetic): the product of two float32
    values is exact in float64, so one float64 add and one rounding back match it.

    Large contiguous arrays go through a small float64 scratch piece by piece instead of
    a whole-array float64 temporary (the same values, less memory traffic). ``out``
    (which may be ``a`` itself) receives the result."""
    if a.dtype == np.float64 or a.dtype.kind == "c":
        # (complex: NumPy's complex product, as PyTorch's, NaN from 0 * inf included)
        r = a + alpha * b
        if out is None:
            return r
        out[...] = r
        return out
    if a.dtype == np.float16:
        alpha = float(np.float32(alpha))
    else:
        alpha = float(a.dtype.type(alpha))
    if out is a and _blas_axpy.saxpy(a, alpha, b):  # the same values from BLAS's FMA
        return out
    if out is None and a.dtype == np.float32 and type(a) is np.ndarray and \
            a.size >= 256 and a.shape == b.shape:
        res = np.empty_like(a, order="C")
        np.copyto(res, a)
        if _blas_axpy.saxpy(res, alpha, b):
            return res
    n = a.size
    if n <= 2 * _AXPY_CHUNK or a.shape != b.shape or type(a) is not np.ndarray or not (
            a.flags.c_contiguous and b.flags.c_contiguous and
            (out is None or out.flags.c_contiguous and out.shape == a.shape)):
        # the casts happen inside the ufunc loops: no float64 copies of a and b
        t = np.multiply(b, alpha, dtype=np.float64)
        if isinstance(t, np.generic):  # (a 0-d product is a NumPy scalar: no ``out=``)
            t = np.asarray(t)
        np.add(t, a, out=t)
        if out is None:
            return t.astype(a.dtype)
        out[...] = t
        return out
    res = np.empty_like(a) if out is None else out
    af, bf, rf = a.reshape(-1), b.reshape(-1), res.reshape(-1)
    scratch = np.empty(_AXPY_CHUNK, np.float64)
    for i in range(0, n, _AXPY_CHUNK):
        j = min(i + _AXPY_CHUNK, n)
        t = scratch[:j - i]
        np.multiply(bf[i:j], alpha, out=t, dtype=np.float64)  # the product exact
        np.add(t, af[i:j], out=t)
        rf[i:j] = t  # one rounding to a's dtype
    return res


class Optimizer:
    r"""Base class for all optimizers.

    Args:
        params (iterable): an iterable of :class:`Tensor` s, of ``(name, Tensor)`` pairs
            (``named_parameters()``), or of :class:`dict` s defining parameter groups
            (``{'params': [...], 'lr': 0.1}``) whose options override ``defaults``.
        defaults (dict): default values of the optimization options.

    Example::

        >>> opt = ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        >>> opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step()
    """

    # per-parameter state entries kept as 0-d tensors; a "step" among them is the step
    # counter that _grads creates at 0 and advances before each update
    _scalar_state = ()
    # the tensors PyTorch's refusal of ``capturable`` on the CPU names, and whether its
    # list of devices that can capture includes "xla" (each optimizer's own wording)
    _capturable_tensors = "params and state_steps"
    _capturable_xla = True
    # whether a complex parameter is updated as real pairs (PyTorch's view_as_real); SGD
    # keeps complex arithmetic, where a product with an infinite part makes a NaN
    _complex_as_real = True
    # True while ``_grads`` yields a complex parameter as real pairs (``_complex_of``
    # gives back its complex array where PyTorch's update returns to complex arithmetic)
    _complex_step = False
    # whether PyTorch decays a complex parameter's weights as real pairs (NAdam, RAdam,
    # ASGD: a NaN part stays in its part) or in complex arithmetic (the others)
    _decay_as_real = False
    # with ``fused=True``, whether PyTorch checks the dtype of each parameter whose state
    # is new (Adam, Adagrad) or only of the first parameter with a gradient (SGD)
    _fused_checks_new_state = True
    # options that param groups saved by older PyTorch versions lack, with the values
    # __setstate__ (and so load_state_dict) fills in, as each PyTorch optimizer does
    _setstate_defaults = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is not None and not getattr(step, "hooked", False):
            cls.step = _with_step_hooks(step)

    def __init__(self, params, defaults):
        self.defaults = defaults
        self._optimizer_step_pre_hooks = OrderedDict()
        self._optimizer_step_post_hooks = OrderedDict()
        self._optimizer_state_dict_pre_hooks = OrderedDict()
        self._optimizer_state_dict_post_hooks = OrderedDict()
        self._optimizer_load_state_dict_pre_hooks = OrderedDict()
        self._optimizer_load_state_dict_post_hooks = OrderedDict()
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            "Tensors or dicts, but got " + params._type_name())
        self.state = defaultdict(dict)
        self.param_groups = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for param_group in param_groups:
            self.add_param_group(param_group)

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state,
                "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)
        for name in ("_optimizer_step_pre_hooks", "_optimizer_step_post_hooks",
                     "_optimizer_state_dict_pre_hooks", "_optimizer_state_dict_post_hooks",
                     "_optimizer_load_state_dict_pre_hooks",
                     "_optimizer_load_state_dict_post_hooks"):
            if name not in self.__dict__:
                setattr(self, name, OrderedDict())
        self.defaults.setdefault("differentiable", False)
        # state saved with Python-number counters becomes 0-d tensors, as in PyTorch
        for s in self.state.values():
            if isinstance(s, dict):
                for key in self._scalar_state:
                    if key in s and not isinstance(s[key], Tensor):
                        s[key] = _scalar_tensor(float(s[key]))
        for group in self.param_groups:
            for key, default in self._setstate_defaults.items():
                group.setdefault(key, default)

    def __repr__(self):
        s = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            s += f"\nParameter Group {i}\n"
            for key in sorted(group.keys()):
                if key != "params":
                    s += f"    {key}: {group[key]}\n"
        return s + ")"

    # ----- parameter groups -----------------------------------------------------------
    def add_param_group(self, param_group):
        """Add a parameter group (a dict with ``'params'`` and optional options).

        Useful when fine-tuning: frozen layers can be made trainable and added to the
        optimizer as training progresses. Missing options take the ``defaults``.
        """
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group)}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs. "
                            "Please use a list instead.")
        else:
            params = list(params)
        tensors, names = [], []
        for param in params:
            if isinstance(param, tuple):
                names.append(param[0])
                tensors.append(param[1])
            else:
                tensors.append(param)
        param_group["params"] = tensors
        if names:
            if len(names) != len(tensors):
                raise ValueError("all optimizer params should be with/without names. Some param "
                                 "names are missing")
            param_group["param_names"] = names
        for param in tensors:
            if not isinstance(param, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is "
                                + type(param).__module__ + "." + type(param).__name__)
            if not self.defaults.get("differentiable", None) and not (
                    param.is_leaf or param.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError("parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            param_group.setdefault(name, default)
        if len(tensors) != len({id(p) for p in tensors}):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in "
                          "future, this will cause an error; see "
                          "github.com/pytorch/pytorch/issues/40967 for more information",
                          stacklevel=3)
        seen = set()
        for group in self.param_groups:
            seen.update(id(p) for p in group["params"])
            if ("param_names" in param_group) != ("param_names" in group):
                which = "with names" if "param_names" in param_group else "without names"
                raise ValueError("all optimizer param groups should be with/without names. "
                                 f"cannot add param group {which} to the optimizer")
        if any(id(p) in seen for p in tensors):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    # ----- gradients and steps --------------------------------------------------------
    def zero_grad(self, set_to_none=True):
        """Reset the gradients of all optimized tensors.

        Args:
            set_to_none (bool): set ``.grad`` to None instead of filling it with zeros
                (default: True). Optimizers skip parameters whose grad is None.
        """
        for group in self.param_groups:
            for p in group["params"]:
                g = p._grad
                if g is None:
                    continue
                if set_to_none:
                    p._grad = None
                else:
                    if g.grad_fn is not None:
                        g.detach_()
                    else:
                        g._requires_grad = False
                    g._data.fill(0)
                    g._vc[0] += 1

    @_with_step_hooks
    def step(self, closure=None):
        """Perform a single optimization step (update the parameters).

        Args:
            closure (Callable, optional): a closure that re-evaluates the model and
                returns the loss; required by some optimizers (LBFGS).

        Returns:
            The closure's loss, or None without a closure.
        """
        loss = None
        if closure is not None:
            prev = _grad_state.grad_enabled
            _grad_state.grad_enabled = True
            try:
                loss = closure()
            finally:
                _grad_state.grad_enabled = prev
        prev = _grad_state.grad_enabled
        _grad_state.grad_enabled = False
        # at more than one thread, NumPy's BLAS at one thread for the updates (its
        # level-1 calls: see blas_hold)
        held = _blas_hold.hold_blas() if _threads.MANY else None
        try:
            for group in self.param_groups:
                if group.get("capturable"):
                    self._check_capturable(group)
                if group.get("fused"):
                    self._check_fused(group)
                self._step_group(group)
        finally:
            _grad_state.grad_enabled = prev
            _blas_hold.release_blas(held)
        return loss

    def _step_group(self, group):
        """Update the parameters of one param group in place (each optimizer's own)."""
        raise NotImplementedError

    def _check_capturable(self, group):
        """PyTorch's refusal of ``capturable=True`` for parameters (with a gradient) on a
        device that cannot capture, such as the CPU: it would run the same update."""
        devices = ["cuda", "xpu", "hpu", "privateuseone"] + ["xla"] * self._capturable_xla
        if any(p._grad is not None and p.device.type not in devices
               for p in group["params"]):
            raise AssertionError(f"If capturable=True, {self._capturable_tensors} must be on "
                                 f"supported devices: {devices}.")

    # an instance's True (a compiled training step sets it while it runs ``step``) or
    # False (kept NumPy update) overrides the default of ``_one_pass.wanted``: the
    # one-pass loops wherever numba is importable (:mod:`ember.optim._one_pass`; the
    # same values)
    _one_pass = False

    def _check_fused(self, group):
        """PyTorch's refusal of ``fused=True`` for a parameter that is not floating point
        (complex): the first one with a gradient, and each whose state is new."""
        first = not getattr(self, "_fused_checked", False)
        for p in group["params"]:
            if p._grad is None or not (first or self._fused_checks_new_state and
                                       not self.state.get(p)):
                continue
            if not p.is_floating_point():
                devices = ["mps", "cuda", "xpu", "hpu", "cpu", "mtia", "privateuseone"]
                raise RuntimeError("`fused=True` requires all the params to be floating point "
                                   f"Tensors of supported devices: {devices} but {p.dtype} "
                                   f"and {p.device.type}")
            first = False
            self._fused_checked = True

    def _init_state(self, p, state, group):
        """Lay out the state of parameter ``p`` before its first update.

        Each optimizer with state adds its entries here; the ``step`` counter, if the
        optimizer keeps one, is already there.
        """

    def _new_state(self, p, state, group):
        """Fill the empty ``state`` of ``p``: the ``step`` counter at 0, then ``_init_state``."""
        if "step" in self._scalar_state:
            state["step"] = _scalar_tensor(0.0)
        self._init_state(p, state, group)

    def _grads(self, group, with_state=True):
        """Yield ``(p, g, state)`` for each parameter of ``group`` that has a gradient.

        As in PyTorch: ``state`` is the parameter's state dict, filled by ``_new_state``
        when empty, with its ``step`` counter (if the optimizer keeps one) advanced by
        one; ``g`` is the gradient's array, negated (a new array) for ``maximize``; with
        a nonzero ``weight_decay`` it becomes ``g + weight_decay * p`` (a new array) or,
        for groups with ``decoupled_weight_decay``, ``p`` is first multiplied by
        ``1 - lr * weight_decay`` and ``g`` kept. Once the caller has updated ``p`` in
        place, the version counters of ``p`` and of the tensors in its state are bumped.
        Without ``with_state``, ``state`` is None and ``self.state`` is left untouched.
        """
        maximize = group["maximize"]
        wd = _value(group.get("weight_decay", 0))
        decoupled = group.get("decoupled_weight_decay", False)
        all_state = self.state if with_state else None
        counts_steps = "step" in self._scalar_state
        for p in group["params"]:
            grad = p._grad
            if grad is None:
                continue
            state = None
            if with_state:
                state = all_state[p]
                if not state:
                    self._new_state(p, state, group)
                if counts_steps:
                    state["step"]._data += 1
            g = grad._data
            if maximize:
                g = -g
            if wd != 0:
                pa = p._data
                as_real = self._decay_as_real and g.dtype.kind == "c"
                if as_real:
                    g, pa = _real_pairs(g), _real_pairs(pa)
                if decoupled:
                    pa *= _decay_factor(group["lr"], wd)
                else:
                    g = _axpy(g, wd, pa)
                if as_real:
                    g = _complex_of(g)
            pairs = g.dtype.kind == "c" and self._complex_as_real
            self._complex_step = pairs
            if g.ndim == 0 or pairs:
                yield from self._yield_views(p, g, state)
            else:
                yield p, g, state
            p._vc[0] += 1
            if with_state:
                for t in state.values():
                    if isinstance(t, Tensor):
                        t._vc[0] += 1

    def _yield_views(self, p, g, state):
        """Yield ``(p, g, state)`` as views the in-place array updates can work on.

        A 0-d parameter is seen as one element of shape ``(1,)``: a ufunc on 0-d arrays
        returns a NumPy scalar, not an array, so scratch results could not be updated in
        place or passed as ``out``. A complex parameter is updated as real pairs, as in
        PyTorch (Adam's second moment then sums the squares of both parts, not z * z).
        The state tensors shaped like the parameter are viewed the same way and so
        updated in place; state the step creates (a momentum buffer) is stored back in
        the parameter's own shape and dtype.
        """
        def view(a):
            if a.ndim == 0:
                a = a.reshape(1)
            return _real_pairs(a) if a.dtype.kind == "c" and self._complex_as_real else a

        def like_param(key, t):
            return (isinstance(t, Tensor) and key not in self._scalar_state
                    and t._data.shape == p._data.shape and t._data.dtype == p._data.dtype)

        pv = _make(view(p._data))
        pv._vc = p._vc
        views, converted = None, {}
        if state is not None:
            views = dict(state)
            for k, t in state.items():
                if like_param(k, t):
                    v = converted[k] = _make(view(t._data))
                    v._vc = t._vc
                    views[k] = v
        yield pv, view(g), views
        for k, t in (views or {}).items():
            if converted.get(k) is t:
                continue  # a view of the stored tensor, updated in place
            if (isinstance(t, Tensor) and k not in self._scalar_state
                    and t._data.shape == pv._data.shape):
                # state the step created (a momentum buffer), stored like the parameter
                a = t._data
                if p._data.dtype.kind == "c" and a.dtype.kind != "c":
                    a = np.ascontiguousarray(a).view(p._data.dtype)[..., 0]
                t = _make(a.reshape(p._data.shape))
            state[k] = t

    # ----- hooks ----------------------------------------------------------------------
    def register_step_pre_hook(self, hook):
        """Register ``hook(optimizer, args, kwargs)`` to run before ``step``.

        It may return ``(new_args, new_kwargs)``. Returns a handle with ``remove()``.
        """
        handle = RemovableHandle(self._optimizer_step_pre_hooks)
        self._optimizer_step_pre_hooks[handle.id] = hook
        return handle

    def register_step_post_hook(self, hook):
        """Register ``hook(optimizer, args, kwargs)`` to run after ``step``."""
        handle = RemovableHandle(self._optimizer_step_post_hooks)
        self._optimizer_step_post_hooks[handle.id] = hook
        return handle

    @staticmethod
    def _register(hooks, hook, prepend):
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        return handle

    def register_state_dict_pre_hook(self, hook, prepend=False):
        """Register ``hook(optimizer)`` to run before ``state_dict()``."""
        return self._register(self._optimizer_state_dict_pre_hooks, hook, prepend)

    def register_state_dict_post_hook(self, hook, prepend=False):
        """Register ``hook(optimizer, state_dict) -> state_dict or None`` after ``state_dict()``."""
        return self._register(self._optimizer_state_dict_post_hooks, hook, prepend)

    def register_load_state_dict_pre_hook(self, hook, prepend=False):
        """Register ``hook(optimizer, state_dict) -> state_dict or None`` before loading."""
        return self._register(self._optimizer_load_state_dict_pre_hooks, hook, prepend)

    def register_load_state_dict_post_hook(self, hook, prepend=False):
        """Register ``hook(optimizer)`` to run after ``load_state_dict()``."""
        return self._register(self._optimizer_load_state_dict_post_hooks, hook, prepend)

    # ----- state dict -----------------------------------------------------------------
    def state_dict(self):
        """The optimizer's state as a dict with ``'state'`` and ``'param_groups'``.

        Parameters are replaced by integer ids (their position over all groups, in
        order); ``state`` maps those ids to each parameter's state dict and every param
        group lists the ids of its parameters, as in PyTorch. The state tensors are the
        optimizer's own (not copies).
        """
        for pre_hook in self._optimizer_state_dict_pre_hooks.values():
            pre_hook(self)
        mapping = {}
        start = 0

        def pack_group(group):
            nonlocal start
            packed = {k: v for k, v in group.items() if k != "params"}
            for i, p in enumerate(group["params"], start):
                mapping.setdefault(id(p), i)
            packed["params"] = [mapping[id(p)] for p in group["params"]]
            start += len(packed["params"])
            return packed

        param_groups = [pack_group(g) for g in self.param_groups]
        packed_state = {(mapping[id(k)] if isinstance(k, Tensor) else k): v
                        for k, v in self.state.items()}
        state_dict = {"state": packed_state, "param_groups": param_groups}
        for post_hook in self._optimizer_state_dict_post_hooks.values():
            result = post_hook(self, state_dict)
            if result is not None:
                state_dict = result
        return state_dict

    def load_state_dict(self, state_dict):
        """Load optimizer state from a dict returned by :meth:`state_dict`.

        Groups are matched in order and must have the same sizes; state tensors are
        cast to their parameter's dtype (except ``step``). Create LR schedulers before
        loading, since they overwrite the learning rates when constructed.
        """
        state_dict = state_dict.copy()
        for pre_hook in self._optimizer_load_state_dict_pre_hooks.values():
            result = pre_hook(self, state_dict)
            if result is not None:
                state_dict = result
        groups = self.param_groups
        saved_groups = deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match "
                             "the size of optimizer's group")
        id_map = dict(zip(chain.from_iterable(g["params"] for g in saved_groups),
                          chain.from_iterable(g["params"] for g in groups)))

        def cast(param, value, key=None):
            if isinstance(value, Tensor):
                if key == "step" or not param.is_floating_point():
                    return value
                if value.dtype is not param.dtype or value.device != param.device:
                    return value.to(dtype=param.dtype, device=param.device)
                return value
            if isinstance(value, dict):
                return {k: cast(param, v, k) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return type(value)(cast(param, v) for v in value)
            return value

        state = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                param = id_map[k]
                state[param] = cast(param, v)
            else:
                state[k] = v

        def update_group(group, new_group):
            new_group["params"] = group["params"]
            if "param_names" in group and "param_names" not in new_group:
                new_group["param_names"] = group["param_names"]
            return new_group

        param_groups = [update_group(g, ng) for g, ng in zip(groups, saved_groups)]
        self.__setstate__({"state": state, "param_groups": param_groups})
        for post_hook in self._optimizer_load_state_dict_post_hooks.values():
            post_hook(self)
