"""Image transforms, as ``torchvision.transforms``, on NumPy arrays and ember tensors.

Two layouts, as in torchvision, where the NumPy array stands in for the PIL image:

- a NumPy array is an image as a dataset returns it: ``(H, W)`` or ``(H, W, C)``,
  usually ``uint8``; ``ToTensor`` turns it into a tensor;
- a tensor is ``(..., C, H, W)`` (or ``(H, W)``), usually float after ``ToTensor``.

Each transform returns the kind it was given. The random ones draw from ember's
global generator exactly as torchvision draws from torch's (``RandomHorizontalFlip``
flips when ``rand(1) < p``; ``RandomCrop`` takes ``randint`` for the top, then the
left), so the same seed gives the same augmentation as torchvision, and DataLoader
worker processes, which each get their own seed, augment differently.

Example::

    from ember import transforms
    t = transforms.Compose([transforms.RandomCrop(28, padding=2), transforms.ToTensor(),
                            transforms.Normalize((0.1307,), (0.3081,))])
"""
import enum
import numbers
from collections.abc import Sequence

import numpy as np

from ember import _core as ember
from ember.backend import array_module

__all__ = ["Compose", "ToTensor", "Normalize", "Lambda", "Pad", "RandomCrop", "CenterCrop",
           "RandomHorizontalFlip", "RandomVerticalFlip", "Resize", "InterpolationMode"]


class InterpolationMode(enum.Enum):
    """Interpolation modes (torchvision's enum); strings work too. ``Resize`` does
    ``NEAREST`` and ``BILINEAR``; the others raise ``NotImplementedError`` there."""

    NEAREST = "nearest"
    NEAREST_EXACT = "nearest-exact"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
    BOX = "box"
    HAMMING = "hamming"
    LANCZOS = "lanczos"


# ----- helpers: the two layouts ----------------------------------------------------------
def _check_image(img, who):
    if isinstance(img, ember.Tensor):
        if img.ndim < 2:
            raise ValueError(f"{who}: expected a tensor image of shape (..., H, W), got a "
                             f"tensor of shape {tuple(img.shape)}")
    elif isinstance(img, np.ndarray):
        if img.ndim not in (2, 3):
            raise ValueError(f"{who}: expected a NumPy image of shape (H, W) or (H, W, C), "
                             f"got an array of shape {img.shape}")
    else:
        raise TypeError(f"{who}: img should be an ember Tensor or a NumPy array. Got "
                        f"{type(img)}")


def _size_of(img):
    """(height, width) of either layout."""
    if isinstance(img, ember.Tensor):
        return int(img.shape[-2]), int(img.shape[-1])
    return int(img.shape[0]), int(img.shape[1])


def _hw_axes(img):
    return (img.ndim - 2, img.ndim - 1) if isinstance(img, ember.Tensor) else (0, 1)


def _array_of(img):
    return img.detach()._data if isinstance(img, ember.Tensor) else img


def _like(img, arr):
    """``arr`` as the same kind of image as ``img``."""
    if isinstance(img, ember.Tensor):
        from ember._tensor import _make
        return _make(arr)
    return arr


def _setup_size(size, error_msg):
    if isinstance(size, numbers.Number):
        return int(size), int(size)
    if isinstance(size, Sequence) and len(size) == 1:
        return int(size[0]), int(size[0])
    if not isinstance(size, Sequence) or len(size) != 2:
        raise ValueError(error_msg)
    return int(size[0]), int(size[1])


def _crop(img, top, left, height, width):
    if isinstance(img, ember.Tensor):
        return img[..., top:top + height, left:left + width]
    return img[top:top + height, left:left + width].copy()


_PAD_MODES = {"constant": "constant", "edge": "edge", "reflect": "reflect",
              "symmetric": "symmetric"}


def _parse_padding(padding):
    if isinstance(padding, numbers.Number):
        p = int(padding)
        return p, p, p, p
    if isinstance(padding, Sequence) and len(padding) in (1, 2, 4):
        p = [int(v) for v in padding]
        if len(p) == 1:
            return p[0], p[0], p[0], p[0]
        if len(p) == 2:
            return p[0], p[1], p[0], p[1]
        return tuple(p)
    raise ValueError(f"Padding must be an int or a 1, 2, or 4 element tuple, not {padding!r}")


def _pad(img, padding, fill=0, padding_mode="constant"):
    left, top, right, bottom = _parse_padding(padding)
    if padding_mode not in _PAD_MODES:
        raise ValueError("Padding mode should be either constant, edge, reflect or symmetric")
    if min(left, top, right, bottom) < 0:
        raise NotImplementedError("Pad: negative padding (cropping) is not supported")
    arr = _array_of(img)
    xp = array_module(arr)
    ax_h, ax_w = _hw_axes(img)
    widths = [(0, 0)] * arr.ndim
    widths[ax_h], widths[ax_w] = (top, bottom), (left, right)
    kw = {"constant_values": fill} if padding_mode == "constant" else {}
    return _like(img, xp.pad(arr, widths, mode=_PAD_MODES[padding_mode], **kw))


def _flip(img, vertical):
    if isinstance(img, ember.Tensor):
        return img.flip(-2 if vertical else -1)
    return np.ascontiguousarray(img[::-1] if vertical else img[:, ::-1])


def _rand_below(p):
    """One ``rand(1)`` draw from ember's global generator (torchvision's flip test)."""
    return float(ember.rand(1).item()) < p


# ----- transforms -------------------------------------------------------------------------
class Compose:
    """Apply ``transforms`` one after another."""

    def __init__(self, transforms):
        self.transforms = list(transforms)

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img

    def __repr__(self):
        body = "".join(f"\n    {t}" for t in self.transforms)
        return f"{type(self).__name__}({body}\n)"


class ToTensor:
    """A NumPy image ``(H, W)`` or ``(H, W, C)`` to a ``(C, H, W)`` tensor, as torchvision's
    ``ToTensor`` does for arrays: ``uint8`` is scaled to the default float dtype in
    ``[0, 1]``; other dtypes keep their values (and dtype). Tensors are refused
    (``TypeError``), as in torchvision.
    """

    def __call__(self, pic):
        if not isinstance(pic, np.ndarray):
            raise TypeError(f"pic should be PIL Image or ndarray. Got {type(pic)}")
        if pic.ndim not in (2, 3):
            raise ValueError(f"pic should be 2/3 dimensional. Got {pic.ndim} dimensions.")
        if pic.ndim == 2:
            pic = pic[:, :, None]
        arr = np.ascontiguousarray(pic.transpose(2, 0, 1))
        if arr.dtype == np.uint8:
            arr = arr.astype(ember.get_default_dtype().np)
            arr /= 255
        return ember.from_numpy(arr)

    def __repr__(self):
        return f"{type(self).__name__}()"


class Normalize:
    """``(x - mean) / std`` per channel, as torchvision's ``Normalize``.

    A tensor is ``(..., C, H, W)`` and must be floating point; a NumPy array is
    ``(H, W)`` or ``(H, W, C)`` (channels last) and must be floating point too.
    ``mean`` and ``std`` have one value per channel (or one for all). ``inplace=True``
    writes into the input. The tensor path uses ember ops, so it is differentiable.
    """

    def __init__(self, mean, std, inplace=False):
        self.mean, self.std, self.inplace = mean, std, inplace

    def __call__(self, tensor):
        if isinstance(tensor, np.ndarray):
            return self._numpy(tensor)
        if not isinstance(tensor, ember.Tensor):
            raise TypeError(f"img should be Tensor Image. Got {type(tensor)}")
        if not tensor.is_floating_point():
            raise TypeError(f"Input tensor should be a float tensor. Got {tensor.dtype}.")
        if tensor.ndim < 3:
            raise ValueError(f"Expected tensor to be a tensor image of size (..., C, H, W). Got "
                             f"tensor.size() = {tuple(tensor.size())}")
        mean = ember.as_tensor(self.mean, dtype=tensor.dtype, device=tensor.device)
        std = ember.as_tensor(self.std, dtype=tensor.dtype, device=tensor.device)
        if bool((std == 0).any()):
            raise ValueError(f"std evaluated to zero after conversion to {tensor.dtype}, "
                             f"leading to division by zero.")
        if mean.ndim == 1:
            mean = mean.view(-1, 1, 1)
        if std.ndim == 1:
            std = std.view(-1, 1, 1)
        if self.inplace:
            return tensor.sub_(mean).div_(std)
        return (tensor - mean) / std

    def _numpy(self, arr):
        if not np.issubdtype(arr.dtype, np.floating):
            raise TypeError(f"Input array should be a float array. Got {arr.dtype}.")
        _check_image(arr, "Normalize")
        mean = np.asarray(self.mean, dtype=arr.dtype)
        std = np.asarray(self.std, dtype=arr.dtype)
        if (std == 0).any():
            raise ValueError(f"std evaluated to zero after conversion to {arr.dtype}, leading to "
                             f"division by zero.")
        channels = 1 if arr.ndim == 2 else arr.shape[2]
        for name, v in (("mean", mean), ("std", std)):
            if v.size not in (1, channels):
                raise ValueError(f"Normalize: {name} has {v.size} values for an image with "
                                 f"{channels} channels")
        if arr.ndim == 2:
            mean, std = mean.reshape(()), std.reshape(())
        if self.inplace:
            arr -= mean
            arr /= std
            return arr
        return (arr - mean) / std

    def __repr__(self):
        return f"{type(self).__name__}(mean={self.mean}, std={self.std})"


class Lambda:
    """Apply a user function as a transform."""

    def __init__(self, lambd):
        if not callable(lambd):
            raise TypeError(f"Argument lambd should be callable, got "
                            f"{repr(type(lambd).__name__)}")
        self.lambd = lambd

    def __call__(self, img):
        return self.lambd(img)

    def __repr__(self):
        return f"{type(self).__name__}()"


class Pad:
    """Pad the border: ``padding`` is an int (all sides), ``(left/right, top/bottom)`` or
    ``(left, top, right, bottom)``; ``padding_mode`` is constant (with ``fill``), edge,
    reflect or symmetric, as torchvision's ``Pad``."""

    def __init__(self, padding, fill=0, padding_mode="constant"):
        _parse_padding(padding)
        if padding_mode not in _PAD_MODES:
            raise ValueError("Padding mode should be either constant, edge, reflect or symmetric")
        self.padding, self.fill, self.padding_mode = padding, fill, padding_mode

    def __call__(self, img):
        _check_image(img, "Pad")
        return _pad(img, self.padding, self.fill, self.padding_mode)

    def __repr__(self):
        return (f"{type(self).__name__}(padding={self.padding}, fill={self.fill}, "
                f"padding_mode={self.padding_mode})")


class RandomCrop:
    """Crop a random ``size`` window (after optional ``padding``), as torchvision's
    ``RandomCrop``: the top is ``randint(0, h - th + 1)``, then the left
    ``randint(0, w - tw + 1)``, from ember's global generator."""

    def __init__(self, size, padding=None, pad_if_needed=False, fill=0,
                 padding_mode="constant"):
        self.size = _setup_size(size, "Please provide only two dimensions (h, w) for size.")
        if padding is not None:
            _parse_padding(padding)
        self.padding, self.pad_if_needed = padding, pad_if_needed
        self.fill, self.padding_mode = fill, padding_mode

    @staticmethod
    def get_params(img, output_size):
        """The random ``(top, left, height, width)`` of a crop of ``output_size``."""
        h, w = _size_of(img)
        th, tw = output_size
        if h < th or w < tw:
            raise ValueError(f"Required crop size {(th, tw)} is larger than input image size "
                             f"{(h, w)}")
        if w == tw and h == th:
            return 0, 0, h, w
        i = int(ember.randint(0, h - th + 1, size=(1,)).item())
        j = int(ember.randint(0, w - tw + 1, size=(1,)).item())
        return i, j, th, tw

    def __call__(self, img):
        _check_image(img, "RandomCrop")
        if self.padding is not None:
            img = _pad(img, self.padding, self.fill, self.padding_mode)
        h, w = _size_of(img)
        if self.pad_if_needed and w < self.size[1]:
            img = _pad(img, [self.size[1] - w, 0], self.fill, self.padding_mode)
        if self.pad_if_needed and h < self.size[0]:
            img = _pad(img, [0, self.size[0] - h], self.fill, self.padding_mode)
        return _crop(img, *self.get_params(img, self.size))

    def __repr__(self):
        return f"{type(self).__name__}(size={self.size}, padding={self.padding})"


class CenterCrop:
    """Crop the centre ``size`` window (zero-padding first when the image is smaller), as
    torchvision's ``CenterCrop``."""

    def __init__(self, size):
        self.size = _setup_size(size, "Please provide only two dimensions (h, w) for size.")

    def __call__(self, img):
        _check_image(img, "CenterCrop")
        th, tw = self.size
        h, w = _size_of(img)
        if th > h or tw > w:
            img = _pad(img, [(tw - w) // 2 if tw > w else 0, (th - h) // 2 if th > h else 0,
                             (tw - w + 1) // 2 if tw > w else 0,
                             (th - h + 1) // 2 if th > h else 0])
            h, w = _size_of(img)
            if h == th and w == tw:
                return img
        top = int(round((h - th) / 2.0))
        left = int(round((w - tw) / 2.0))
        return _crop(img, top, left, th, tw)

    def __repr__(self):
        return f"{type(self).__name__}(size={self.size})"


class RandomHorizontalFlip:
    """Flip left-right with probability ``p`` (one ``rand(1)`` draw per call)."""

    def __init__(self, p=0.5):
        self.p = p

    def __call__(self, img):
        _check_image(img, "RandomHorizontalFlip")
        return _flip(img, vertical=False) if _rand_below(self.p) else img

    def __repr__(self):
        return f"{type(self).__name__}(p={self.p})"


class RandomVerticalFlip:
    """Flip upside down with probability ``p`` (one ``rand(1)`` draw per call)."""

    def __init__(self, p=0.5):
        self.p = p

    def __call__(self, img):
        _check_image(img, "RandomVerticalFlip")
        return _flip(img, vertical=True) if _rand_below(self.p) else img

    def __repr__(self):
        return f"{type(self).__name__}(p={self.p})"


# ----- Resize -----------------------------------------------------------------------------
def _resized_size(h, w, size, max_size):
    if len(size) == 1:
        short, long = (w, h) if w <= h else (h, w)
        new_short, new_long = size[0], int(size[0] * long / short)
        if max_size is not None:
            if max_size <= size[0]:
                raise ValueError(f"max_size = {max_size} must be strictly greater than the "
                                 f"requested size for the smaller edge size = {size}")
            if new_long > max_size:
                new_short, new_long = int(max_size * new_short / new_long), max_size
        return (new_long, new_short) if w <= h else (new_short, new_long)
    return size[0], size[1]


def _weights(in_size, out_size, mode, antialias):
    """The ``(out_size, in_size)`` matrix of PyTorch's 1-D interpolation weights."""
    W = np.zeros((out_size, in_size))
    scale = in_size / out_size
    rows = np.arange(out_size)
    if mode == "nearest":
        src = np.floor(rows.astype(np.float32) * np.float32(scale)).astype(np.int64)
        W[rows, np.minimum(src, in_size - 1)] = 1.0
        return W
    if antialias and scale > 1.0:
        # PyTorch's separable antialiased bilinear: a triangle filter stretched by scale
        support = scale
        for i in rows:
            center = scale * (i + 0.5)
            lo = max(int(center - support + 0.5), 0)
            hi = min(int(center + support + 0.5), in_size)
            j = np.arange(lo, hi)
            w = np.maximum(0.0, 1.0 - np.abs((j - center + 0.5) / scale))
            W[i, lo:hi] = w / w.sum()
        return W
    src = np.maximum((rows + 0.5) * scale - 0.5, 0.0)
    i0 = np.minimum(np.floor(src).astype(np.int64), in_size - 1)
    i1 = np.minimum(i0 + 1, in_size - 1)
    lam = src - i0
    np.add.at(W, (rows, i0), 1.0 - lam)
    np.add.at(W, (rows, i1), lam)
    return W


class Resize:
    """Resize to ``size``, as torchvision's ``Resize``: an int matches the smaller edge
    (keeping the aspect ratio, the longer edge at most ``max_size``); ``(h, w)`` is exact.

    ``interpolation`` is ``"bilinear"`` (default, PyTorch's half-pixel bilinear; with
    ``antialias=True`` downscaling uses PyTorch's antialiasing triangle filter) or
    ``"nearest"``; the other modes raise ``NotImplementedError``. ``uint8`` images are
    rounded back to ``uint8``.
    """

    def __init__(self, size, interpolation=InterpolationMode.BILINEAR, max_size=None,
                 antialias=True):
        if isinstance(size, numbers.Number):
            size = [int(size)]
        elif isinstance(size, Sequence) and len(size) in (1, 2):
            size = [int(s) for s in size]
        else:
            raise TypeError(f"Size should be int or sequence of length 1 or 2. Got {size!r}")
        if max_size is not None and len(size) != 1:
            raise ValueError("max_size should only be passed if size specifies the length of the "
                             "smaller edge, i.e. size should be an int or a sequence of length 1")
        mode = InterpolationMode(interpolation).value
        if mode not in ("bilinear", "nearest"):
            raise NotImplementedError(f"Resize: {mode} interpolation is not implemented in "
                                      "ember; use 'bilinear' or 'nearest'")
        self.size, self.max_size, self.antialias = size, max_size, antialias
        self.interpolation = InterpolationMode(mode)

    def __call__(self, img):
        _check_image(img, "Resize")
        h, w = _size_of(img)
        oh, ow = _resized_size(h, w, self.size, self.max_size)
        if (oh, ow) == (h, w):
            return img
        mode = self.interpolation.value
        arr = _array_of(img)
        xp = array_module(arr)
        wh = xp.asarray(_weights(h, oh, mode, self.antialias))
        ww = xp.asarray(_weights(w, ow, mode, self.antialias))
        work = arr.astype(np.float64) if arr.dtype.kind in "uib" else arr
        if isinstance(img, ember.Tensor):
            out = xp.matmul(xp.matmul(wh.astype(work.dtype), work), ww.T.astype(work.dtype))
        else:
            out = xp.tensordot(wh.astype(work.dtype), work, axes=(1, 0))       # (oh, W, ...)
            out = xp.moveaxis(xp.tensordot(ww.astype(work.dtype), out, axes=(1, 1)), 0, 1)
        if arr.dtype.kind in "uib":
            info = np.iinfo(arr.dtype) if arr.dtype.kind != "b" else None
            out = xp.rint(out)
            if info is not None:
                out = xp.clip(out, info.min, info.max)
            out = out.astype(arr.dtype)
        return _like(img, xp.ascontiguousarray(out))

    def __repr__(self):
        return (f"{type(self).__name__}(size={self.size if len(self.size) == 2 else self.size[0]}"
                f", interpolation={self.interpolation.value}, max_size={self.max_size}, "
                f"antialias={self.antialias})")
