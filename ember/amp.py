"""``torch.amp`` (and ``torch.cuda.amp``): ``GradScaler`` with PyTorch's dynamic loss
scaling, and ``autocast`` as far as ember can follow it.

ember has no bfloat16 and no per-op autocast dispatch, so an *enabled* autocast
region raises ``NotImplementedError`` (running it in float32 would print numbers
PyTorch would not); ``autocast(..., enabled=False)`` is the no-op it is in PyTorch.
A ``GradScaler`` for ``'cuda'`` without a GPU disables itself with PyTorch's warning.
"""
import functools
import types
import warnings

from ember.backend import dtypes as _dt

__all__ = ["GradScaler", "autocast", "is_autocast_available", "custom_fwd", "custom_bwd"]


def is_autocast_available(device_type):
    """False: ember runs every op in the dtype of its inputs."""
    return False


class autocast:
    """``torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None)``: a
    context manager and decorator. Only ``enabled=False`` is supported."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        self.device_type, self.fast_dtype, self._enabled = device_type, dtype, bool(enabled)
        if self._enabled:
            raise NotImplementedError(
                f"autocast(device_type={device_type!r}, dtype={dtype}) is not implemented in "
                "ember (no mixed-precision dispatch); use enabled=False or cast explicitly")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)
        return wrapper


def custom_fwd(fwd=None, *, device_type="cuda", cast_inputs=None):
    """``torch.amp.custom_fwd``: without autocast it returns ``fwd`` unchanged."""
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)
    return fwd


def custom_bwd(bwd=None, *, device_type="cuda"):
    """``torch.amp.custom_bwd``: returns ``bwd`` unchanged."""
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)
    return bwd


class GradScaler:
    """``torch.amp.GradScaler(device='cuda', init_scale=2.**16, growth_factor=2.0,
    backoff_factor=0.5, growth_interval=2000, enabled=True)``: multiply the loss by a
    scale, unscale the gradients before the step, skip steps whose gradients hold inf or
    NaN and shrink the scale, grow it after ``growth_interval`` clean steps.

    Example::

        scaler = torch.amp.GradScaler("cpu")
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    """

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0,
                 backoff_factor=0.5, growth_interval=2000, enabled=True):
        self._device = str(device)
        if enabled and self._device.startswith("cuda"):
            from ember import cuda
            if not cuda.is_available():
                warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not "
                              "available.  Disabling.", stacklevel=2)
                enabled = False
        self._enabled = bool(enabled)
        if growth_factor <= 1.0:
            raise ValueError("The growth factor must be > 1.0.")
        if backoff_factor >= 1.0:
            raise ValueError("The backoff factor must be < 1.0.")
        self._init_scale, self._scale = float(init_scale), None
        self._growth_factor, self._backoff_factor = float(growth_factor), float(backoff_factor)
        self._growth_interval, self._growth_tracker = int(growth_interval), 0
        self._per_optimizer = {}

    def is_enabled(self):
        return self._enabled

    def get_scale(self):
        """The current scale as a Python float (1.0 when disabled)."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else self._scale

    def _state(self, optimizer):
        return self._per_optimizer.setdefault(id(optimizer), {"unscaled": False,
                                                              "found_inf": False})

    def scale(self, outputs):
        """``outputs`` times the scale (a tensor, or tensors in lists/tuples/dicts)."""
        if not self._enabled:
            return outputs
        if self._scale is None:
            self._scale = self._init_scale
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        if isinstance(outputs, dict):
            return {k: self.scale(v) for k, v in outputs.items()}
        return outputs * _scalar_like(outputs, self._scale)

    def unscale_(self, optimizer):
        """Divide ``optimizer``'s gradients by the scale, in place, and note inf/NaN."""
        if not self._enabled:
            return
        st = self._state(optimizer)
        if st["unscaled"]:
            raise RuntimeError("unscale_() has already been called on this optimizer since "
                               "the last update().")
        from ember.autograd.grad_mode import no_grad
        inv = 1.0 / self.get_scale()
        found = False
        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    p.grad.mul_(_scalar_like(p.grad, inv))
                    if not bool(p.grad.isfinite().all()):
                        found = True
        st["unscaled"], st["found_inf"] = True, found

    def step(self, optimizer, *args, **kwargs):
        """``optimizer.step()`` unless the unscaled gradients hold inf or NaN."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is "
                               "enabled.")
        st = self._state(optimizer)
        if not st["unscaled"]:
            self.unscale_(optimizer)
        if not st["found_inf"]:
            return optimizer.step(*args, **kwargs)
        return None

    def update(self, new_scale=None):
        """Shrink the scale after a skipped step, grow it after enough clean steps."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale.item() if hasattr(new_scale, "item") else new_scale)
        else:
            found = any(st["found_inf"] for st in self._per_optimizer.values())
            if found:
                self._scale = self.get_scale() * self._backoff_factor
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    self._scale = self.get_scale() * self._growth_factor
                    self._growth_tracker = 0
        self._per_optimizer = {}

    def get_growth_factor(self):
        return self._growth_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def get_growth_interval(self):
        return self._growth_interval

    def state_dict(self):
        """PyTorch's keys: scale, growth_factor, backoff_factor, growth_interval,
        _growth_tracker (empty when disabled)."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._init_scale = self._scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])


def _scalar_like(t, value):
    """``value`` as a 0-d tensor of ``t``'s dtype (a float32 scale stays float32)."""
    from ember import _factory
    return _factory.tensor(value, dtype=t.dtype if t.dtype.is_floating_point else _dt.float32,
                           device=t.device)


# torch.cuda.amp: the same pieces with device "cuda" (deprecated spellings in PyTorch)
class _CudaGradScaler(GradScaler):
    """``torch.cuda.amp.GradScaler(init_scale=2.**16, ..., enabled=True)``."""

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        warnings.warn("`torch.cuda.amp.GradScaler(args...)` is deprecated. Please use "
                      "`torch.amp.GradScaler('cuda', args...)` instead.", FutureWarning,
                      stacklevel=2)
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval,
                         enabled)


class _CudaAutocast(autocast):
    """``torch.cuda.amp.autocast(enabled=True, dtype=torch.float16, cache_enabled=True)``."""

    def __init__(self, enabled=True, dtype=_dt.float16, cache_enabled=True):
        warnings.warn("`torch.cuda.amp.autocast(args...)` is deprecated. Please use "
                      "`torch.amp.autocast('cuda', args...)` instead.", FutureWarning,
                      stacklevel=2)
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


_CudaGradScaler.__name__ = _CudaGradScaler.__qualname__ = "GradScaler"
_CudaAutocast.__name__ = _CudaAutocast.__qualname__ = "autocast"
cuda_amp = types.ModuleType("ember.cuda.amp", "torch.cuda.amp: GradScaler and autocast "
                                              "for device 'cuda'.")
cuda_amp.GradScaler, cuda_amp.autocast = _CudaGradScaler, _CudaAutocast
cuda_amp.custom_fwd, cuda_amp.custom_bwd = custom_fwd, custom_bwd
