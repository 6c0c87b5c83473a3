"""Complex numbers: the real/imaginary views, ``complex``/``polar``, ``angle``, the
conjugate (and its bit, as far as PyTorch lets a program observe it), ``isreal``.

Gradients follow PyTorch's convention for a real loss ``L`` of a complex ``z = x + iy``:
the gradient is ``dL/dx + i dL/dy`` (the conjugate Wirtinger derivative times two), so
a holomorphic ``f`` passes ``grad * conj(f'(z))`` back.
"""
import numpy as np

from ember._factory import ones_like, zeros_like
from ember._tensor import Tensor, _Extra, _make
from ember.autograd.node import Primitive
from ember.backend import complex32 as _c32
from ember.backend import dtypes as _dt
from ember.ops import _batch, _jvp
from ember.ops._util import (
    mark_conj_copy,
    refuse_dtype,
    tensor_method,
    tensor_operands,
    to_float,
    type_name,
    with_out,
    write_out,
)
from ember.ops._views import ViewPrimitive

__all__ = ["view_as_real", "view_as_complex", "real", "imag", "angle", "polar", "complex",
           "conj", "conj_physical", "is_conj", "resolve_conj", "isreal", "is_complex"]

_REAL_NP = {np.dtype(np.complex64): np.dtype(np.float32),
            np.dtype(np.complex128): np.dtype(np.float64), _c32.NP: np.dtype(np.float16)}
_COMPLEX_NP = {v: k for k, v in _REAL_NP.items()}


class ViewAsReal(ViewPrimitive):
    """A complex tensor's memory as floats with a trailing dimension of 2 (a view)."""
    batch = _batch.passthrough
    torchscript = "view_as_real"

    def forward(self, z):
        if z.dtype.kind != "c" and not z.dtype.names:
            raise RuntimeError("view_as_real is only supported for complex tensors")
        rd = _REAL_NP[z.dtype]
        # a zero-copy view for any strides: the real parts sit where the complex numbers
        # start, the imaginary parts one real item later
        out = _part(z, "real")[..., None]
        return np.lib.stride_tricks.as_strided(out, z.shape + (2,),
                                               z.strides + (rd.itemsize,))

    def backward(self, gy):
        return view_as_complex(gy.contiguous())


class ViewAsComplex(ViewPrimitive):
    """Floats with a trailing dimension of 2 as complex numbers (a view)."""
    batch = _batch.passthrough
    torchscript = "view_as_complex"

    def forward(self, x):
        if x.dtype not in _COMPLEX_NP:
            raise RuntimeError("view_as_complex is only supported for float and double "
                               f"tensors, but got a tensor of scalar type: "
                               f"{_dt.FROM_NP[x.dtype].name}")
        if x.ndim == 0 or x.shape[-1] != 2:
            raise RuntimeError("Tensor must have a last dimension of size 2")
        if x.strides[-1] != x.itemsize and x.size:  # an empty tensor has no layout to check
            raise RuntimeError("Tensor must have a last dimension with stride 1")
        if any(s % (2 * x.itemsize) for s in x.strides[:-1]):
            raise RuntimeError("Tensor must have a stride divisible by 2 for all but last "
                               "dimension")
        return x.view(_COMPLEX_NP[x.dtype])[..., 0]

    def backward(self, gy):
        return view_as_real(gy)


def view_as_real(input):
    """A view of a complex tensor as floats with a trailing dimension of size 2."""
    if is_conj(input):  # (torch's view would show the unconjugated memory)
        raise RuntimeError("view_as_real doesn't work on unresolved conjugated tensors.  To "
                           "resolve the conjugate tensor so you can view it as real, use "
                           "self.resolve_conj()")
    return ViewAsReal.apply(input)


def view_as_complex(input):
    """A view of a float tensor whose last dimension has size 2 as complex numbers."""
    return ViewAsComplex.apply(input)


def _part(z, name):
    """The real or imaginary parts of complex ``z`` as a view (complex32 too)."""
    return z[name] if z.dtype.names else getattr(z, name)


class Real(ViewPrimitive):
    batch = _batch.elementwise
    torchscript = "real"

    def forward(self, z):
        return _part(z, "real")

    def backward(self, gy):
        return gy.to(_dt.FROM_NP[_COMPLEX_NP[gy._data.dtype]])


class Imag(ViewPrimitive):
    batch = _batch.elementwise
    torchscript = "imag"

    def forward(self, z):
        return _part(z, "imag")

    def backward(self, gy):
        return Complex.apply(gy * 0, gy)


def real(input):
    """The real part: a view for complex tensors, ``input`` itself for real ones."""
    if not input.is_complex():
        return input
    return Real.apply(input)


def imag(input):
    """The imaginary part of a complex tensor, as a view (writable)."""
    if not input.is_complex():
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return Imag.apply(input)


def _set_part(part):
    def setter(self, value):
        view = real(self) if part == "real" else imag(self)
        view.copy_(value if isinstance(value, Tensor) else _make(np.asarray(value)))
    return setter


Tensor.real = property(real, _set_part("real"))
Tensor.imag = property(imag, _set_part("imag"))


class Angle(Primitive):
    save_inputs = (0,)

    def forward(self, x):
        if x.dtype.kind == "c":
            return np.angle(x)
        x = to_float(x)
        # real inputs: 0 or pi, and nan stays nan (np.angle gives 0 for -0.0 as PyTorch)
        out = np.where(x < 0, np.pi, 0).astype(x.dtype)
        return np.where(np.isnan(x), x, out)

    def backward(self, gy):
        x, = self.saved_tensors
        if x._data.dtype.kind != "c":
            return zeros_like(gy)
        # d angle = (-y dx + x dy) / |z|^2, as one complex number i z / |z|^2
        a2 = (x.real * x.real + x.imag * x.imag)
        g = (gy / a2).masked_fill(a2 == 0, 0.0)
        return Complex.apply(-g * x.imag, g * x.real)

    jvp = _jvp.diagonal
    batch = _batch.elementwise
    torchscript = "angle"


@tensor_method()
def angle(input, *, out=None):
    """The argument of each element (radians); 0 or pi for real inputs."""
    return write_out(Angle.apply(input), out, "angle", (input,))


def _check_parts(a, b):
    """PyTorch's checks of the two real parts of ``complex``/``polar``, in its order."""
    if a.dtype not in _COMPLEX_NP or b.dtype not in _COMPLEX_NP:
        raise RuntimeError(f"Expected both inputs to be Half, Float or Double tensors but "
                           f"got {type_name(a.dtype)} and {type_name(b.dtype)}")
    if a.dtype != b.dtype:
        raise RuntimeError(f"Expected object of scalar type {type_name(a.dtype)} but got "
                           f"scalar type {type_name(b.dtype)} for second argument")


class Complex(Primitive):
    def forward(self, re, im):
        _check_parts(re, im)
        shape = np.broadcast_shapes(re.shape, im.shape)
        out = np.empty(shape, _COMPLEX_NP[re.dtype])
        if out.dtype.names:
            out["real"], out["imag"] = re, im
        else:
            out.real = re
            out.imag = im
        return out

    broadcasts = True

    def backward(self, gz):
        return gz.real, gz.imag

    jvp = _jvp.linear(0, 1)
    batch = _batch.elementwise
    torchscript = "complex"
    complex32_math = True


def complex(real, imag, *, out=None):
    """The complex tensor ``real + i imag`` (both float32 or both float64)."""
    if not (isinstance(real, Tensor) and isinstance(imag, Tensor)):
        tensor_operands("complex", real, imag, names=("real", "imag"))
    return write_out(Complex.apply(real, imag), out, "complex")


class Polar(Primitive):
    save_output = True
    broadcasts = True
    batch = _batch.elementwise
    torchscript = "polar"
    kernel, refuses = "polar_cpu", "h"  # (no ComplexHalf loop)

    def forward(self, r, theta):
        _check_parts(r, theta)
        refuse_dtype(self, r)
        return Complex.forward(self, r * np.cos(theta), r * np.sin(theta))

    def backward(self, gz):
        z, = self.saved_tensors
        # PyTorch's formula: the modulus's gradient runs along sgn(z), so a negative
        # ``abs`` (outside polar's domain) gets the sign PyTorch gives it
        a = z.abs()
        sgn = (z / a).masked_fill(a == 0, 0)
        gc = gz.conj_physical()
        return (gc * sgn).real, (gc * z * 1j).real


def polar(abs, angle, *, out=None):
    """The complex tensor ``abs * (cos(angle) + i sin(angle))``."""
    if not (isinstance(abs, Tensor) and isinstance(angle, Tensor)):
        tensor_operands("polar", abs, angle, names=("abs", "angle"))
    return write_out(Polar.apply(abs, angle), out, "polar")


class ConjPhysical(Primitive):
    def forward(self, z):
        # real tensors keep their values and dtype (NumPy's conj turns bool into int8);
        # complex32's structured arrays make np.conj raise, which takes apply's complex32 route
        return z.copy() if z.dtype.kind in "biuf" else np.conj(z)

    def backward(self, gy):
        return conj_physical(gy)

    jvp = _jvp.linear(0)
    batch = _batch.elementwise
    torchscript = "conj_physical"
    complex32_math = True


class Conj(ConjPhysical):
    complex32_math = True
    torchscript = "conj"


class ConjPhysicalInplace(ConjPhysical):
    """``conj_physical_``: the same op, PyTorch's in-place node."""
    _node_name = "ConjPhysicalBackward1"
    _op_name = "ConjPhysical"


@tensor_method()
@with_out
def conj_physical(input):
    """The complex conjugate, computed (``input`` itself's values for real tensors)."""
    return ConjPhysical.apply(input)


@tensor_method()
def conj(input):
    """The complex conjugate; ``input`` itself for real tensors.

    PyTorch returns a lazy view with the conjugate bit set; ember computes the values
    (so a later write to ``input`` does not show through) and keeps the bit, so that
    ``is_conj()`` answers as PyTorch's.
    """
    if not input.is_complex():
        return input
    out = Conj.apply(input)
    # torch's is a view: a write into it must not go astray, nor as_strided read elsewhere
    mark_conj_copy(out._data, _partial_view(input._data))
    if not is_conj(input):
        if out._extra is None:  # it may already hold a forward-mode tangent: keep that
            out._extra = _Extra()
        out._extra.conj = True
    return out


def _partial_view(d):
    """Whether array ``d`` is not the whole of the storage under it."""
    from ember.ops._views import _storage_of
    found = _storage_of(d) if isinstance(d, np.ndarray) else None
    return found is None or found[1] != 0 or found[0].size != d.size or \
        not d.flags.c_contiguous


@tensor_method()
def is_conj(input):
    """Whether ``input`` carries PyTorch's conjugate bit (made by ``conj()``)."""
    e = input._extra
    return e is not None and e.conj


@tensor_method()
def resolve_conj(input):
    """A tensor without the conjugate bit: ``input`` itself if it has none."""
    if not is_conj(input):
        return input
    return ConjPhysical.apply(ConjPhysical.apply(input))


@tensor_method()
def isreal(input):
    """True where the element is real (its imaginary part is zero)."""
    if not input.is_complex():
        # a recorded factory (as PyTorch's ones_like): a trace keeps the input's shape
        return ones_like(input, dtype=_dt.bool)
    return _make(_part(input._data, "imag") == 0)


@tensor_method()
def is_complex(input):
    """True for complex32/64/128 tensors."""
    return input.dtype.is_complex


Tensor.view_as_real = view_as_real
