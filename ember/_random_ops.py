"""Sampling factories (``rand``, ``randn``, ...) and in-place Tensor methods (``uniform_``, ...).

Values come from :mod:`ember._random_kernels` in the order PyTorch's TensorIterator
walks memory, so non-contiguous tensors get what PyTorch puts there. No gradient
flows through a sample (PyTorch gives zeros); the nodes carry PyTorch's names.
"""
import math
import operator
import warnings

import numpy as np

from ember import _factory, backend
from ember import _random_kernels as K
from ember import _random_samplers as _samplers
from ember._random import _gen
from ember._random_layout import _arrange, _like_perm, _perm
from ember._tensor import Tensor, _make, _mode_active, _mode_recorder
from ember.autograd._modes import routed
from ember.autograd.grad_mode import state as _grad_state
from ember.backend import complex32 as _c32
from ember.backend import dtypes as _dt
from ember.backend.meta import MetaArray as _MetaArray
from ember.ops._inplace import check_inplace, commit, refuse_overlap
from ember.ops._util import can_cast, scalar_type_name, with_out, write_out
from ember.ops.sampling import (  # the nodes of sampled tensors
    _Bernoulli0,
    _Bernoulli1,
    _Bernoulli2,
    _BernoulliP,
    _Cauchy,
    _Exponential,
    _Geometric,
    _LogNormal,
    _Normal0,
    _Normal1,
    _Normal2,
    _Normal3,
    _Poisson,
    _Random0,
    _Random1,
    _Random2,
    _Uniform,
)

__all__ = ["rand", "randn", "randint", "randperm", "normal", "bernoulli", "multinomial",
           "poisson", "rand_like", "randn_like", "randint_like"]

_TYPE = {"float16": "Half", "bfloat16": "BFloat16", "float32": "Float", "float64": "Double",
         "int8": "Char", "int16": "Short", "int32": "Int", "int64": "Long", "uint8": "Byte",
         "bool": "Bool"}
_CTYPE = {"float16": "c10::Half", "bfloat16": "c10::BFloat16", "float32": "float",
          "float64": "double", "int8": "signed char",
          "int16": "short int", "int32": "int", "int64": "long int", "uint8": "unsigned char",
          "bool": "bool"}


def _fill_(t, node, draw, *extra):
    """Write ``draw(n, contiguous)`` (a flat array in memory order) into ``t``."""
    check_inplace(t)
    d = t._data
    if type(d) is _MetaArray:
        return t  # a meta tensor holds no values: nothing is drawn (as in PyTorch)
    refuse_overlap(t)  # before anything is drawn, as torch
    arr = _arrange(draw(d.size, bool(d.flags.c_contiguous)), d.shape, _perm(d))
    if type(d) is not np.ndarray:
        arr = backend.to_device(arr, t.device)
    if _grad_state.grad_enabled and (t._requires_grad or any(e._requires_grad for e in extra)):
        return commit(t, node.apply(t, *extra, value=arr))
    d[...] = arr
    t._vc[0] += 1
    return t


def _to_meta(device, out):
    """True when a factory's result goes to the meta device (then nothing is drawn)."""
    if out is not None:
        return out.is_meta
    dev = backend.as_device(device) or _factory._default_device[0]
    return dev is not None and dev.type == "meta"


def _new(arr, device, requires_grad, out=None):
    if out is not None:
        if out._data.shape == arr.shape:
            out._data[...] = arr
        else:
            out._data = backend.to_device(arr.astype(out._data.dtype), out.device)
        out._vc[0] += 1
        return out
    return _factory._finish(arr, backend.as_device(device) or _factory._default_device[0],
                            requires_grad)


def _result(node, inputs, arr):
    """A new tensor holding a sample computed from ``inputs`` (which get zero gradients)."""
    d = inputs[0]._data
    if type(d) is not np.ndarray:
        arr = backend.to_device(arr, inputs[0].device)
    if _grad_state.grad_enabled and any(i._requires_grad for i in inputs):
        return node.apply(*inputs, value=arr)
    return _make(arr, False)


def _complex_part(npd):
    """The NumPy dtype of each part of a complex dtype (complex32's two float16 parts
    included); None for a real one. PyTorch samples a complex tensor as its real view."""
    if npd.kind == "c":
        return np.dtype(np.float64 if npd == np.complex128 else np.float32)
    if npd == _c32.NP:
        return np.dtype(np.float16)
    return None


def _is_float(npd):
    """A floating dtype PyTorch's samplers take: NumPy's floats and bfloat16 (ml_dtypes',
    NumPy kind "V"), which is sampled as PyTorch samples it, in float and rounded once
    (ember/_random_kernels.py)."""
    return npd.kind == "f" or npd.name == "bfloat16"


def _float_digits(npd):
    """The mantissa digits of a float dtype (``std::numeric_limits<T>::digits``)."""
    return 8 if npd.name == "bfloat16" else {2: 11, 4: 24, 8: 53}[npd.itemsize]


def _need_float(npd, kernel):
    if not _is_float(npd):
        from ember.ops._util import type_name
        raise NotImplementedError(f"\"{kernel}\" not implemented for "
                                  f"'{_TYPE.get(npd.name) or type_name(npd)}'")


def _g(x):
    return f"{float(x):g}"


# ----- in-place Tensor methods -----------------------------------------------------------------
def uniform_(self, from_=0, to=1, *, generator=None, **kw):
    """Fill with samples from the uniform distribution on ``[from, to)``."""
    if _mode_active[0] and (m := _mode_recorder()) is not None:
        return m.random_inplace_locals("uniform_", uniform_, locals())
    from_ = kw.pop("from", from_)
    if kw:
        raise TypeError(f"uniform_() got an unexpected keyword argument '{next(iter(kw))}'")
    if _complex_part(self._data.dtype) is not None:
        # PyTorch fills the real view (both parts, in memory order) from the same range
        from ember.ops.complex_numbers import view_as_real
        uniform_(view_as_real(self), from_, to, generator=generator)
        return self
    _need_float(self._data.dtype, "check_uniform_bounds")
    if not from_ <= to:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found "
                           f"from={_g(from_)} > to={_g(to)}")
    if to - from_ > float(np.finfo(self._data.dtype).max):
        raise RuntimeError(f"uniform_ expects to-from <= std::numeric_limits<"
                           f"{_CTYPE[self._data.dtype.name]}>::max(), but found to={_g(to)} "
                           f"and from={_g(from_)} which result in to-from to exceed the limit")
    g, npd = _gen(generator), self._data.dtype
    return _fill_(self, _Uniform, lambda n, c: K.uniform(g, n, from_, to, npd))


def normal_(self, mean=0, std=1, *, generator=None):
    """Fill with samples from the normal distribution ``N(mean, std**2)``."""
    if _mode_active[0] and (m := _mode_recorder()) is not None:
        return m.random_inplace_locals("normal_", normal_, locals())
    if not std >= 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {_g(std)}")
    if _complex_part(self._data.dtype) is not None:
        # PyTorch fills the real view (both parts, in memory order) with std / sqrt(2)
        from ember.ops.complex_numbers import view_as_real
        normal_(view_as_real(self), mean, std / math.sqrt(2.0), generator=generator)
        return self
    _need_float(self._data.dtype, "normal_kernel_cpu")
    g, npd = _gen(generator), self._data.dtype
    return _fill_(self, _Normal0, lambda n, c: K.normal(g, n, mean, std, npd, c))


def bernoulli_(self, p=0.5, *, generator=None):
    """Fill with 0/1 draws that are 1 with probability ``p`` (a float or a tensor)."""
    if _mode_active[0] and (m := _mode_recorder()) is not None:
        return m.random_inplace_locals("bernoulli_", bernoulli_, locals())
    g, npd = _gen(generator), self._data.dtype
    if isinstance(p, Tensor):
        pd = p._host()
        _need_float(pd.dtype, "bernoulli_tensor_cpu_p_")
        _check_p_tensor(pd)
        try:
            pd = np.broadcast_to(pd, self._data.shape)
        except ValueError:
            raise RuntimeError(f"expand: the shape of p {list(pd.shape)} cannot be expanded "
                               f"to the size of self {list(self.shape)}") from None

        def draw(n, c):
            perm = _perm(self._data)
            order = pd if perm is None else pd.transpose(perm)
            return K.bernoulli_tensor(g, np.ascontiguousarray(order), npd)
        return _fill_(self, _Bernoulli1, draw, p)
    if not 0 <= p <= 1:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={_g(p)}")
    return _fill_(self, _Bernoulli2, lambda n, c: K.bernoulli_scalar(g, n, float(p), npd))


def _check_p_tensor(pd):
    if pd.size and not ((pd >= 0) & (pd <= 1)).all():
        raise RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could "
                           "this error message be improved?  If so, please report an enhancement "
                           "request to PyTorch.)")


def random_(self, *args, generator=None, **kw):
    """Fill with integers from ``[from, to - 1]``; ``random_(to)`` draws from ``[0, to - 1]``
    and ``random_()`` from ``[0, 2**mantissa]`` (floats) or ``[0, max]`` (integers)."""
    if _mode_active[0] and (m := _mode_recorder()) is not None:
        return m.random_inplace_locals("random_", random_, locals())
    args = list(args)
    if "from" in kw:
        args.insert(0, kw.pop("from"))
    if "to" in kw:
        args.append(kw.pop("to"))
    if kw:
        raise TypeError(f"random_() got an unexpected keyword argument '{next(iter(kw))}'")
    g, npd = _gen(generator), self._data.dtype
    if not args:
        return _fill_(self, _Random2, lambda n, c: K.random_default(g, n, npd))
    if len(args) == 1:
        node, frm, to = _Random1, 0, operator.index(args[0])
    elif len(args) == 2:
        node, frm, to = _Random0, operator.index(args[0]), args[1]
        to = None if to is None else operator.index(to)
    else:
        raise TypeError(f"random_() takes at most 2 arguments ({len(args)} given)")
    draw = _random_from_to(npd, frm, to, g)
    return _fill_(self, node, draw)


def _random_from_to(npd, frm, to, g):
    """Check ``random_(from, to)``'s bounds as PyTorch does; returns the drawing function."""
    fl = _is_float(npd)
    digits = _float_digits(npd) if fl else None
    if to is not None:
        if not frm < to:
            raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got "
                               f"from={frm} >= to={to}")
        if fl:
            frm, to = _update_from(frm, digits, npd), _update_to(to, digits, npd)
            if not frm < to:
                raise RuntimeError(f"random_ expects 'from' casted to dtype to be less than "
                                   f"'to' casted to dtype, but got from={frm} >= to={to}")
        _check_from_to(frm, to - 1, npd, digits)
        rng, base = to - frm, frm
    elif frm != -(1 << 63):
        if fl:
            to_inc = 1 << digits
            frm = _update_from(frm, digits, npd)
            if not frm < to_inc:
                raise RuntimeError(f"random_ expects 'from' casted to dtype to be less than or "
                                   f"equal to 'to_inc' casted to dtype, but got from={frm} > "
                                   f"to_inc={to_inc}")
        else:
            to_inc = 1 if npd.kind == "b" else int(np.iinfo(npd).max)
        _check_from_to(frm, to_inc, npd, digits)
        rng, base = to_inc - frm + 1, frm
    else:
        if npd.name in ("float16", "bool"):  # outside the kernel's dispatch list
            raise NotImplementedError(f"\"random_full_64_bits_range_kernel_cpu\" not "
                                      f"implemented for '{_TYPE[npd.name]}'")
        if npd.name not in ("int64", "float32", "float64", "bfloat16"):
            raise RuntimeError("random_full_64_bits_range_kernel_cpu handles only int64, double, "
                               "float and bfloat16")
        return lambda n, c: K.cast(g._u64(n).view(np.int64), npd)
    return lambda n, c: K.random_from_to(g, n, rng, base, npd)


def _as_int64(npd, v):
    """``static_cast<int64_t>(static_cast<T>(v))`` as x86-64 does it: a value out of range
    (an infinity from a narrow float) becomes the most negative int64."""
    with np.errstate(over="ignore"):
        x = float(npd.type(v))
    return int(x) if -2.0 ** 63 <= x < 2.0 ** 63 else -(1 << 63)


def _update_from(frm, digits, npd):
    plus1 = _as_int64(npd, frm + 1)
    if plus1 < frm:
        frm = plus1 + (1 << (max(abs(frm + 1).bit_length() - 1, 0) - digits + 1))
    return frm


def _update_to(to, digits, npd):
    minus1 = _as_int64(npd, to - 1)
    if minus1 >= to:
        to = minus1 - (1 << (max(abs(to - 1).bit_length() - 1, 0) - digits + 1))
    return to


def _check_from_to(frm, to_inc, npd, digits):
    name = _CTYPE[npd.name]
    info = np.finfo(npd) if digits else (None if npd.kind == "b" else np.iinfo(npd))
    lo, hi = (0, 1) if info is None else (info.min, info.max)
    for var, what in ((frm, "from"), (to_inc, "to - 1")):
        if not lo <= var <= hi:
            raise RuntimeError(f"{what} is out of bounds for {name}")
    if digits:
        for var, what in ((frm, "from"), (to_inc, "to - 1")):
            if var < -(1 << digits) or var > 1 << digits:
                warnings.warn(f"{what} is out of bounds [-(2^{digits}), 2^{digits}]. Due to "
                              f"precision limitations {name} can support discrete uniform "
                              "distribution only within this range. This warning will become an "
                              "error in version 1.7 release, please fix the code in advance",
                              UserWarning, stacklevel=4)


def exponential_(self, lambd=1, *, generator=None):
    """Fill with samples from the exponential distribution with rate ``lambd``."""
    if _mode_active[0] and (m := _mode_recorder()) is not None:
        return m.random_inplace_locals("exponential_", exponential_, locals())
    npd = self._data.dtype
    if not _is_float(npd):
        raise RuntimeError("Exponential distribution is a continuous probability distribution. "
                           f"dtype must be a floating point but you specified {_TYPE[npd.name]}")
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={_g(lambd)}")
    g = _gen(generator)
    return _fill_(self, _Exponential, lambda n, c: K.exponential(g, n, float(lambd), npd))


def geometric_(self, p, *, generator=None):
    """Fill with the number of Bernoulli(``p``) trials up to the first success."""
    if _mode_active[0] and (m := _mode_recorder()) is not None:
        return m.random_inplace_locals("geometric_", geometric_, locals())
    npd = self._data.dtype
    if npd.kind == "b":
        raise NotImplementedError("\"geometric_cpu\" not implemented for 'Bool'")
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={_g(p)}")
    g = _gen(generator)
    return _fill_(self, _Geometric, lambda n, c: K.geometric(g, n, float(p), npd))


def cauchy_(self, median=0, sigma=1, *, generator=None):
    """Fill with samples from the Cauchy distribution."""
    if _mode_active[0] and (m := _mode_recorder()) is not None:
        return m.random_inplace_locals("cauchy_", cauchy_, locals())
    npd = self._data.dtype
    if not _is_float(npd):
        raise RuntimeError("Cauchy distribution is a continuous probability distribution. "
                           f"dtype must be a floating point but you specified {_CTYPE[npd.name]}")
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={_g(sigma)}")
    g = _gen(generator)
    return _fill_(self, _Cauchy, lambda n, c: K.cauchy(g, n, median, sigma, npd))


def log_normal_(self, mean=1, std=2, *, generator=None):
    """Fill with ``exp`` of samples from ``N(mean, std**2)``."""
    if _mode_active[0] and (m := _mode_recorder()) is not None:
        return m.random_inplace_locals("log_normal_", log_normal_, locals())
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={_g(std)}")
    _need_float(self._data.dtype, "log_normal_cpu")
    g, npd = _gen(generator), self._data.dtype
    return _fill_(self, _LogNormal, lambda n, c: K.log_normal(g, n, mean, std, npd))


for _f in (uniform_, normal_, bernoulli_, random_, exponential_, geometric_, cauchy_,
           log_normal_):
    setattr(Tensor, _f.__name__, _f)


# ----- factories ---------------------------------------------------------------------------------
def _dtype(dtype, default=None):
    return (_dt.to_dtype(dtype) or default or _dt.get_default_dtype()).np


@routed  # vmap has a function-level rule for it (ember.func._function_rules)
def rand(*size, generator=None, out=None, dtype=None, layout=None, device=None,
         requires_grad=False, pin_memory=False, **kw):
    """A tensor of samples from the uniform distribution on ``[0, 1)``.

        >>> ember.manual_seed(0); ember.rand(2)
        tensor([0.4963, 0.7682])
    """
    if _mode_active[0] and (m := _mode_recorder()) is not None:
        return m.composite_locals("rand", rand, locals())
    shape = _factory._shape(_factory._sized(size, kw, "rand"))
    npd = _dtype(dtype, out.dtype if out is not None else None)
    part = _complex_part(npd)
    if part is None:
        _need_float(npd, "check_uniform_bounds")
    if _to_meta(device, out):
        return _new(np.zeros(shape, npd), device, requires_grad, out)
    n = int(np.prod(shape))
    if part is not None:
        # PyTorch draws the real view (both parts, in memory order) from [0, 1)
        arr = K.uniform(_gen(generator), 2 * n, 0.0, 1.0, part).view(npd).reshape(shape)
        return _new(arr, device, requires_grad, out)
    arr = K.uniform(_gen(generator), n, 0.0, 1.0, npd).reshape(shape)
    return _new(arr, device, requires_grad, out)


@routed  # vmap has a function-level rule for it (ember.func._function_rules)
def randn(*size, generator=None, out=None, dtype=None, layout=None, device=None,
          requires_grad=False, pin_memory=False, **kw):
    """A tensor of samples from the standard normal distribution.

        >>> ember.manual_seed(0); ember.randn(2)
        tensor([ 1.5410, -0.2934])
    """
    if _mode_active[0] and (m := _mode_recorder()) is not None:
        return m.composite_locals("randn", randn, locals())
    shape = _factory._shape(_factory._sized(size, kw, "randn"))
    npd = _dtype(dtype, out.dtype if out is not None else None)
    part = _complex_part(npd)
    if part is None:
        _need_float(npd, "normal_kernel_cpu")
    if _to_meta(device, out):
        return _new(np.zeros(shape, npd), device, requires_grad, out)
    n = int(np.prod(shape))
    if part is not None:
        # PyTorch draws the real view (both parts, in memory order) with std 1/sqrt(2)
        arr = K.normal(_gen(generator), 2 * n, 0.0, 1.0 / math.sqrt(2.0), part)
        return _new(arr.view(npd).reshape(shape), device, requires_grad, out)
    arr = K.normal(_gen(generator), n, 0.0, 1.0, npd).reshape(shape)
    return _new(arr, device, requires_grad, out)


def randint(*args, size=None, generator=None, out=None, dtype=None, layout=None, device=None,
            requires_grad=False, pin_memory=False, low=None, high=None):
    """A tensor of integers drawn uniformly from ``[low, high)`` (``low`` defaults to 0):
    ``randint(high, size)`` or ``randint(low, high, size)``; int64 unless ``dtype`` says."""
    if _mode_active[0] and (m := _mode_recorder()) is not None:
        return m.composite_locals("randint", randint, locals())
    args = list(args)
    if size is None:
        if not args:
            raise TypeError("randint() missing required argument 'size'")
        size = args.pop()
    if high is None:
        if not args:
            raise TypeError("randint() missing required argument 'high'")
        high = args.pop()
    if low is None:
        low = args.pop() if args else 0
    if args:
        raise TypeError("randint() takes at most 3 positional arguments")
    if not isinstance(size, (tuple, list)):
        raise TypeError(f"randint(): argument 'size' must be tuple of ints, not "
                        f"{type(size).__name__}")
    shape = _factory._shape((size,))
    npd = _dtype(dtype, out.dtype if out is not None else _dt.int64)
    if _to_meta(device, out):
        return _new(np.zeros(shape, npd), device, requires_grad, out)
    draw = _random_from_to(npd, operator.index(low), operator.index(high), _gen(generator))
    arr = draw(int(np.prod(shape)), True).reshape(shape)
    return _new(arr, device, requires_grad, out)


_PERM_MAX = {"uint8": "uint8_t", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t"}


def randperm(n, *, generator=None, out=None, dtype=None, layout=None, device=None,
             requires_grad=False, pin_memory=False):
    """A random permutation of ``0 .. n-1`` (int64 unless ``dtype`` says)."""
    if _mode_active[0] and (m := _mode_recorder()) is not None:
        return m.composite_locals("randperm", randperm, locals())
    n = operator.index(n)
    if n < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {n}: [{n}]")
    npd = _dtype(dtype, out.dtype if out is not None else _dt.int64)
    if npd.kind == "b":
        raise NotImplementedError("\"randperm\" not implemented for 'Bool'")
    if npd.name in _PERM_MAX and n - 1 > np.iinfo(npd).max:
        raise RuntimeError(f"value cannot be converted to type {_PERM_MAX[npd.name]} without "
                           "overflow")
    limits = {"float16": (2049, "2049"), "float32": ((1 << 24) + 1, "2^24+1"),
              "float64": ((1 << 53) + 1, "2^53+1")}
    if npd.name in limits and n > limits[npd.name][0]:
        raise RuntimeError(f"n cannot be greater than {limits[npd.name][1]} for "
                           f"{_TYPE[npd.name]} type.")
    if n >= 0xFFFFFFFF // 20:
        raise NotImplementedError("randperm for n >= 2**32 / 20 (PyTorch's 64-bit "
                                  "Fisher-Yates branch)")
    if _to_meta(device, out):
        return _new(np.zeros(n, npd), device, requires_grad, out)
    arr = K.randperm(_gen(generator), n).astype(npd)
    return _new(arr, device, requires_grad, out)


def normal(mean, std=1.0, size=None, *, generator=None, out=None, dtype=None, layout=None,
           device=None, requires_grad=False, pin_memory=False):
    """Samples from ``N(mean, std**2)``; ``mean`` and ``std`` are numbers (then ``size`` is
    required) or tensors (broadcast together).

        >>> ember.normal(ember.zeros(3), 1.0).shape
        ember.Size([3])
    """
    if _mode_active[0] and (m := _mode_recorder()) is not None:
        return m.composite_locals("normal", normal, locals())
    g = _gen(generator)
    mt, st = isinstance(mean, Tensor), isinstance(std, Tensor)
    if not mt and not st:
        if size is None:
            raise TypeError("normal() received an invalid combination of arguments: with a "
                            "number mean and std, 'size' is required")
        shape = _factory._shape((size,))
        npd = _dtype(dtype, out.dtype if out is not None else None)
        if not std >= 0:
            raise RuntimeError(f"normal expects std >= 0.0, but found std {_g(std)}")
        part = _complex_part(npd)
        if part is None:
            _need_float(npd, "normal_kernel_cpu")
        if _to_meta(device, out):
            return _new(np.zeros(shape, npd), device, requires_grad, out)
        n = int(np.prod(shape))
        if part is not None:
            # normal_ on the real view: mean in both parts, std / sqrt(2)
            arr = K.normal(g, 2 * n, mean, std / math.sqrt(2.0), part).view(npd)
            return _new(arr.reshape(shape), device, requires_grad, out)
        arr = K.normal(g, n, mean, std, npd).reshape(shape)
        return _new(arr, device, requires_grad, out)
    return _normal_tensors(g, mean, std, out)


def _normal_draw(g, shape, npd, std, perm):
    """``normal_(0, std)`` on a fresh tensor of ``shape`` and ``npd`` laid out in ``perm``
    (None: C order); a complex one is drawn as its real view with std / sqrt(2), as
    PyTorch does."""
    n = int(np.prod(shape))
    part = _complex_part(npd)
    if part is None:
        return _arrange(K.normal(g, n, 0.0, std, npd, perm is None), shape, perm)
    flat = K.normal(g, 2 * n, 0.0, std / math.sqrt(2.0), part, perm is None).view(npd)
    return _arrange(flat, shape, perm)


def _math(arr):
    """``arr`` as NumPy can compute with it (complex32 as complex64)."""
    return _c32.to_c64(arr) if _c32.is_c32(arr) else arr


def _rounded(arr, npd):
    """``arr`` rounded to ``npd`` once, as an in-place op writes its result."""
    if npd == _c32.NP:
        return _c32.from_complex(arr)
    return arr.astype(npd, copy=False)


def _normal_tensors(g, mean, std, out):
    """``normal`` with a tensor ``mean`` or ``std`` (or both), PyTorch's way: the result
    (``out``, else a tensor of mean's dtype, or std's when only std is a tensor) is
    filled by ``normal_(0, std)`` (a number std) or ``normal_(0, 1)``, then multiplied
    in place by a tensor std and ``mean`` added in place, each step rounded to the
    result's dtype. A complex result is drawn through its real view."""
    mt, st = isinstance(mean, Tensor), isinstance(std, Tensor)
    m = mean._host() if mt else None
    s = std._host() if st else None
    if st:
        if s.dtype.kind == "c" or _c32.is_c32(s):
            raise RuntimeError("normal expects standard deviation to be non-complex")
        if s.size and not (s >= 0).all():
            raise RuntimeError("normal expects all elements of std >= 0.0")
    elif not std >= 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {_g(std)}")
    ref = m if mt else s
    npd = out._data.dtype if out is not None else ref.dtype
    _need_float(npd if _complex_part(npd) is None else np.dtype(np.float32),
                "normal_kernel_cpu")
    if mt and st:
        try:
            shape = np.broadcast_shapes(m.shape, s.shape)
        except ValueError:
            raise RuntimeError(_broadcast_msg(m.shape, s.shape)) from None
    else:
        shape = ref.shape
    if out is not None and mt and not st:
        # PyTorch draws into ``out`` and adds mean in place: ``out`` keeps a shape mean
        # broadcasts to
        try:
            shape = np.broadcast_shapes(m.shape, out._data.shape)
        except ValueError:
            raise RuntimeError(_broadcast_msg(m.shape, out._data.shape)) from None
    inputs = [t for t in (mean, std) if isinstance(t, Tensor)]
    grad = _grad_state.grad_enabled and any(t._requires_grad for t in inputs)
    if grad and out is not None:
        raise RuntimeError("normal(): functions with out=... arguments don't support "
                           "automatic differentiation, but one of the arguments requires "
                           "grad.")
    if grad and _complex_part(npd) is not None:
        raise RuntimeError("normal does not support automatic differentiation for outputs "
                           "with complex dtype.")
    for operand in (m, s):
        if operand is not None and not can_cast(operand.dtype, npd):
            # the in-place step's result type (out's dtype with the operand's)
            promoted = np.promote_types(_math(np.empty(0, operand.dtype)).dtype,
                                        _math(np.empty(0, npd)).dtype)
            raise RuntimeError(f"result type {scalar_type_name(_dt.from_numpy_dtype(promoted))} "
                               f"can't be cast to the desired output type "
                               f"{scalar_type_name(_dt.from_numpy_dtype(npd))}")
    # PyTorch's result is C-contiguous whatever mean's or std's layout; an ``out`` of the
    # right shape is filled in its own memory order
    perm = _perm(out._data) if out is not None and \
        tuple(out._data.shape) == tuple(shape) else None
    arr = _normal_draw(g, shape, npd, std if not st else 1.0, perm)
    if st:
        arr = _rounded(_math(arr) * _math(s), npd)
    if mt:
        arr = _rounded(_math(arr) + _math(m), npd)
    elif st:
        arr = _rounded(_math(arr) + np.asarray(mean, dtype=_math(arr).dtype), npd)
    if out is not None:
        if type(out._data) is not np.ndarray:
            arr = backend.to_device(arr, out.device)
        return write_out(_make(arr, False), out, "normal")
    node = _Normal3 if mt and st else _Normal1 if mt else _Normal2
    return _result(node, inputs, arr)


def _broadcast_msg(a, b):
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and x != 1 and y != 1:
            return (f"The size of tensor a ({x}) must match the size of tensor b ({y}) at "
                    f"non-singleton dimension {max(len(a), len(b)) - i}")
    return "shapes cannot be broadcast"


@with_out
def bernoulli(input, p=None, *, generator=None, out=None):
    """0/1 draws: 1 with probability ``input`` (elementwise), or with probability ``p``
    when it is given (then ``input`` only gives the shape and dtype)."""
    if _mode_active[0] and (m := _mode_recorder()) is not None:
        return m.composite_locals("bernoulli", bernoulli, locals())
    g = _gen(generator)
    d = input._host()
    if p is None:  # the result is allocated contiguous (LEGACY_CONTIGUOUS_MEMORY_FORMAT)
        _need_float(d.dtype, "bernoulli_tensor_cpu_p_")
        _check_p_tensor(d)
        flat = K.bernoulli_tensor(g, np.ascontiguousarray(d), d.dtype)
        return _result(_Bernoulli0, [input], flat.reshape(d.shape))
    if not 0 <= p <= 1:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={_g(p)}")
    flat = K.bernoulli_scalar(g, d.size, float(p), d.dtype)
    return _result(_BernoulliP, [input], flat.reshape(d.shape))


def multinomial(input, num_samples, replacement=False, *, generator=None, out=None):
    """Indices drawn from the categories of each row of ``input`` (unnormalised weights)."""
    if _mode_active[0] and (m := _mode_recorder()) is not None:
        return m.composite_locals("multinomial", multinomial, locals())
    p = input._host()
    if not 1 <= p.ndim <= 2:
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if not _is_float(p.dtype):
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: "
                           f"{_TYPE[p.dtype.name]}")
    n = operator.index(num_samples)
    if n <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    k = p.shape[-1]
    if not replacement and n > k:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without "
                           "replacement")
    if k > 1 << 24:
        raise RuntimeError("number of categories cannot exceed 2^24")
    g = _gen(generator)
    p2 = p.reshape(-1, k)
    if not replacement or n == 1:
        if p.size and not (p.max() < np.inf and p.min() >= 0):
            raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
        if p.size and (p2.sum(-1) == 0).any():
            raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
        perm = _like_perm(p)
        q = _arrange(K.exponential(g, p.size, 1.0, p.dtype), p.shape, perm).reshape(p2.shape)
        r = p2 / q
        idx = np.argmax(r, -1)[:, None] if n == 1 else np.argsort(-r, -1, kind="stable")[:, :n]
    else:
        bad = ~(p2 >= 0) | ~np.isfinite(p2)
        if bad.any():
            first = p2.ravel()[np.argmax(bad.ravel())]
            what = "< 0" if not first >= 0 else "= infinity or NaN"
            raise RuntimeError(f"invalid multinomial distribution (encountering probability "
                               f"entry {what})")
        if p.size and (p2.sum(-1, dtype=np.float64) <= 0).any():
            raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
        idx = K.multinomial_with_replacement(g, np.ascontiguousarray(p2), n)
    arr = idx.astype(np.int64).reshape(p.shape[:-1] + (n,))
    if type(input._data) is not np.ndarray:
        arr = backend.to_device(arr, input.device)
    if out is not None:
        return _new(arr, None, False, out)
    return _make(arr, False)


def poisson(input, generator=None):
    """Samples from Poisson distributions with rates ``input``: PyTorch's sampler
    (transformed rejection for rates of 10 or more, else products of uniforms),
    element by element in C order, so the values and the generator's state after the
    call are torch's."""
    if _mode_active[0] and (m := _mode_recorder()) is not None:
        return m.composite_locals("poisson", poisson, locals())
    lam = input._host()
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"poisson_cpu\" not implemented for "
                                  f"'{scalar_type_name(input.dtype)}'")
    if lam.size and not (lam >= 0).all():
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    flat = np.ascontiguousarray(lam, dtype=np.float64).reshape(-1)
    arr = _samplers.poisson(_gen(generator), flat).astype(lam.dtype).reshape(lam.shape)
    return _result(_Poisson, [input], arr)


@routed  # vmap has a function-level rule for it (ember.func._function_rules)
def rand_like(input, *, dtype=None, layout=None, device=None, requires_grad=False,
              memory_format=None, generator=None):
    """``rand`` with the shape (and, by default, dtype and device) of ``input``."""
    if _mode_active[0] and (m := _mode_recorder()) is not None:
        return m.composite_locals("rand_like", rand_like, locals())
    return _like(input, dtype, device, requires_grad, "uniform_", (), generator)


@routed  # vmap has a function-level rule for it (ember.func._function_rules)
def randn_like(input, *, dtype=None, layout=None, device=None, requires_grad=False,
               memory_format=None, generator=None):
    """``randn`` with the shape (and, by default, dtype and device) of ``input``."""
    if _mode_active[0] and (m := _mode_recorder()) is not None:
        return m.composite_locals("randn_like", randn_like, locals())
    return _like(input, dtype, device, requires_grad, "normal_", (), generator)


@routed  # vmap has a function-level rule for it (ember.func._function_rules)
def randint_like(input, *args, low=None, high=None, dtype=None, layout=None, device=None,
                 requires_grad=False, memory_format=None, generator=None):
    """``randint`` with the shape (and, by default, dtype and device) of ``input``:
    ``randint_like(input, high)`` or ``randint_like(input, low, high)``."""
    if _mode_active[0] and (m := _mode_recorder()) is not None:
        return m.composite_locals("randint_like", randint_like, locals())
    args = list(args)
    if high is None:
        if not args:
            raise TypeError("randint_like() missing required argument 'high'")
        high = args.pop()
    if low is None:
        low = args.pop() if args else 0
    return _like(input, dtype, device, requires_grad, "random_", (low, high), generator)


def _like(input, dtype, device, requires_grad, method, args, generator):
    d = input._data
    npd = _dtype(dtype, input.dtype)
    if _to_meta(device if device is not None else input.device, None):
        return _new(np.zeros(d.shape, npd), device if device is not None else input.device,
                    requires_grad)
    perm = _like_perm(d)
    buf = np.empty(d.shape if perm is None else [d.shape[i] for i in perm], npd)
    t = _make(buf if perm is None else buf.transpose(np.argsort(perm)), False)
    getattr(t, method)(*args, generator=generator)
    arr = np.ascontiguousarray(t._data) if perm is not None else t._data
    return _new(arr, device if device is not None else input.device, requires_grad)


def _tensor_bernoulli(self, p=None, *, generator=None):
    """Draw 0/1 with probabilities ``self`` (or ``p``); see :func:`bernoulli`."""
    return bernoulli(self, p, generator=generator)


def _tensor_multinomial(self, num_samples, replacement=False, *, generator=None):
    """See :func:`multinomial`."""
    return multinomial(self, num_samples, replacement, generator=generator)


Tensor.bernoulli = _tensor_bernoulli
Tensor.multinomial = _tensor_multinomial
