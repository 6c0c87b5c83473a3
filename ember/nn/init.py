"""Parameter initialisation (PyTorch's ``torch.nn.init``).

Every function fills its tensor in place under ``no_grad`` and returns it; random
ones draw from ember's generator exactly as PyTorch draws from its own
(``tensor.uniform_`` / ``tensor.normal_``), and accept ``generator=``.
"""
import math
import warnings

from ember import _core as ember
from ember._random_layout import empty_like_layout
from ember._tensor import _mode_active
from ember.autograd.grad_mode import no_grad
from ember.backend import lapack as _lapack
from ember.backend.dtypes import through_float32

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_",
           "zeros_", "eye_", "dirac_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
           "kaiming_normal_", "orthogonal_", "sparse_", "uniform", "normal", "constant", "eye",
           "dirac", "xavier_uniform", "xavier_normal", "kaiming_uniform", "kaiming_normal",
           "orthogonal", "sparse"]


def _write(tensor, array):
    """Write ``array`` (broadcast) into ``tensor``'s memory and bump its version; refused,
    as torch's copy refuses it, where elements of ``tensor`` share memory."""
    from ember.ops._inplace import refuse_overlap
    refuse_overlap(tensor)
    tensor._data[...] = through_float32(array, tensor._data.dtype)  # PyTorch's rounding
    tensor._vc[0] += 1
    if _mode_active[0]:  # inside a trace the values become a constant, said loudly
        from ember._graph.capture import written_as_constant
        written_as_constant(tensor, "nn.init")
    return tensor


def _no_grad_uniform_(tensor, a, b, generator=None):
    with no_grad():
        return tensor.uniform_(a, b, generator=generator)


def _no_grad_normal_(tensor, mean, std, generator=None):
    with no_grad():
        return tensor.normal_(mean, std, generator=generator)


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (``'relu'``: sqrt(2), ``'tanh'``: 5/3, ...)."""
    linear_fns = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                  "conv_transpose2d", "conv_transpose3d"]
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            negative_slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, int) or isinstance(param, float):
            negative_slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + negative_slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fill with values drawn from U(a, b)."""
    return _no_grad_uniform_(tensor, a, b, generator)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fill with values drawn from N(mean, std**2)."""
    return _no_grad_normal_(tensor, mean, std, generator)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Fill with N(mean, std**2) values restricted to ``[a, b]`` (redrawn until inside).

    PyTorch's algorithm: plain rejection from the normal when ``[a, b]`` holds more
    than 30% of the mass, else rejection from U(a, b) against the normal's density.
    """
    if tensor.is_meta:  # no values, nothing drawn (PyTorch's no-op)
        return tensor

    def norm_cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The "
                      "distribution of values may be incorrect.", stacklevel=2)
    # every redraw goes into a buffer laid out as PyTorch's empty_like(tensor) (the
    # results of its where() keep that layout too): a sampler fills memory in order, so
    # a transposed weight's redraws land where PyTorch's do
    with no_grad():
        p = norm_cdf((b - mean) / std) - norm_cdf((a - mean) / std)
        if p > 0.3:
            lo = ember.tensor(a, dtype=tensor.dtype).item()
            hi = ember.tensor(b, dtype=tensor.dtype).item()
            result = tensor.normal_(mean, std, generator=generator)
            while True:
                mask = (result < lo) | (result > hi)
                if not mask.any():
                    break
                redraw = empty_like_layout(tensor).normal_(mean, std, generator=generator)
                result = ember.where(mask, redraw, result)
            if tensor is not result:
                _write(tensor, result._data)
        else:
            mode = max(a, min(mean, b))
            log_peak = -0.5 * ((mode - mean) / std) ** 2
            accept_buf = empty_like_layout(tensor)
            tensor.uniform_(a, b, generator=generator)

            def log_density(c):
                return ((c - mean) / std).pow(2) * -0.5 - log_peak

            candidates = log_density(tensor)
            pending = accept_buf.uniform_(generator=generator).log().gt(candidates)
            if pending.any():
                result = tensor
                cand = empty_like_layout(tensor)
                while True:
                    cand.uniform_(a, b, generator=generator)
                    result = ember.where(pending, cand, result)
                    candidates = log_density(cand)
                    pending = ember.where(pending, accept_buf.uniform_(
                        generator=generator).log().gt(candidates), pending)
                    if not pending.any():
                        break
                _write(tensor, result._data)
        return tensor


def constant_(tensor, val):
    """Fill with the value ``val``."""
    with no_grad():
        return tensor.fill_(val)  # an op: a trace records it, as PyTorch's records fill_


def ones_(tensor):
    """Fill with ones."""
    return constant_(tensor, 1.0)


def zeros_(tensor):
    """Fill with zeros."""
    return constant_(tensor, 0.0)


def eye_(tensor):
    """Fill a 2-D tensor with the identity matrix."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    with no_grad():
        from ember.ops._inplace import overlaps_itself, writable
        if overlaps_itself(tensor._data):
            # torch zeros the tensor, then writes each diagonal element, into memory its
            # elements share too
            a = writable(tensor._data)
            a[...] = 0
            a[range(min(a.shape)), range(min(a.shape))] = 1
            tensor._vc[0] += 1
            return tensor
        return _write(tensor, ember.eye(*tensor.shape, dtype=tensor.dtype,
                                        device=tensor.device)._data)


def dirac_(tensor, groups=1):
    """Fill a {3,4,5}-D conv weight with the Dirac delta (identity convolution)."""
    dims = tensor.ndim
    if dims not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tensor.shape
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    per_group = sizes[0] // groups
    min_dim = min(per_group, sizes[1])
    with no_grad():
        d = tensor._data
        d[...] = 0
        centre = tuple(s // 2 for s in sizes[2:])
        for g in range(groups):
            for i in range(min_dim):
                d[(g * per_group + i, i) + centre] = 1
        tensor._vc[0] += 1
    if _mode_active[0]:
        from ember._graph.capture import written_as_constant
        written_as_constant(tensor, "nn.init.dirac_")
    return tensor


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 "
                         "dimensions")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """Glorot uniform: U(-a, a) with ``a = gain * sqrt(6 / (fan_in + fan_out))``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    a = math.sqrt(3.0) * std
    return _no_grad_uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """Glorot normal: N(0, std**2) with ``std = gain * sqrt(2 / (fan_in + fan_out))``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return _no_grad_normal_(tensor, 0.0, std, generator)


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    valid = ["fan_in", "fan_out"]
    if mode not in valid:
        raise ValueError(f"Mode {mode} not supported, please use one of {valid}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He uniform: U(-bound, bound) with ``bound = gain * sqrt(3 / fan_mode)``."""
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    bound = math.sqrt(3.0) * std
    return _no_grad_uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He normal: N(0, std**2) with ``std = gain / sqrt(fan_mode)``."""
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return _no_grad_normal_(tensor, 0, std, generator)


_HALF_NAMES = {"float16": "Half", "bfloat16": "BFloat16"}


def orthogonal_(tensor, gain=1, generator=None):
    """Fill with a (semi-)orthogonal matrix (trailing dims flattened), scaled by ``gain``."""
    import numpy as np
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0 or tensor.is_meta:  # nothing to fill, nothing drawn
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    with no_grad():
        flat = ember.empty((rows, cols), dtype=tensor.dtype, device=tensor.device).normal_(
            0, 1, generator=generator)
        a = flat._host()
        if a.dtype.itemsize == 2:  # drawn first, as PyTorch draws before its QR refuses
            raise NotImplementedError(f"\"geqrf_cpu\" not implemented for "
                                      f"'{_HALF_NAMES[a.dtype.name]}'")
        if a.dtype.kind == "c":  # PyTorch's sign of the diagonal refuses complex values
            raise NotImplementedError("Unlike NumPy, torch.sign is not intended to support "
                                      "complex numbers. Please use torch.sgn instead.")
        if rows < cols:
            a = a.T
        q, r = _lapack.linalg.qr(a)
        q = q * np.sign(np.diag(r))
        if rows < cols:
            q = q.T
        q = ember.tensor(q, dtype=tensor.dtype, device=tensor.device)
        _write(tensor, (q * gain)._data.reshape(tensor.shape))
    return tensor


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """Fill a 2-D tensor from N(0, std**2), then zero ``ceil(sparsity * rows)`` random
    entries in each column."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    if tensor.is_meta:  # nothing drawn, not even the permutations
        return tensor
    rows, cols = tensor.shape
    num_zeros = math.ceil(sparsity * rows)
    with no_grad():
        tensor.normal_(0, std, generator=generator)
        for col in range(cols):
            zero_rows = ember.randperm(rows)[:num_zeros]
            tensor._data[zero_rows._data, col] = 0
        tensor._vc[0] += 1
    if _mode_active[0]:
        from ember._graph.capture import written_as_constant
        written_as_constant(tensor, "nn.init.sparse_")
    return tensor


def _make_deprecate(meth):
    new_name = meth.__name__
    old_name = new_name[:-1]

    def deprecated_init(*args, **kwargs):
        warnings.warn(f"`nn.init.{old_name}` is now deprecated in favor of "
                      f"`nn.init.{new_name}`.", FutureWarning, stacklevel=2)
        return meth(*args, **kwargs)
    deprecated_init.__doc__ = f"Deprecated: use :func:`ember.nn.init.{new_name}`."
    deprecated_init.__name__ = old_name
    return deprecated_init


uniform = _make_deprecate(uniform_)
normal = _make_deprecate(normal_)
constant = _make_deprecate(constant_)
eye = _make_deprecate(eye_)
dirac = _make_deprecate(dirac_)
xavier_uniform = _make_deprecate(xavier_uniform_)
xavier_normal = _make_deprecate(xavier_normal_)
kaiming_uniform = _make_deprecate(kaiming_uniform_)
kaiming_normal = _make_deprecate(kaiming_normal_)
orthogonal = _make_deprecate(orthogonal_)
sparse = _make_deprecate(sparse_)
