"""``torchvision.transforms.functional`` under ``ember run``: the functional forms of
:mod:`ember.transforms` (NumPy arrays stand in for PIL images); others raise
``AttributeError`` naming them."""
from ember import transforms as _t
from ember._torchvision import absent
from ember.compat import missing_torchvision
from ember.transforms import InterpolationMode

# PIL conversions: importable (transformers imports them by name), raising when called
_ABSENT = ("pil_to_tensor", "to_pil_image")

__all__ = ["InterpolationMode", "to_tensor", "normalize", "crop", "center_crop", "pad",
           "resize", "hflip", "vflip", "get_dimensions", "get_image_size", *_ABSENT]
globals().update({name: absent("torchvision.transforms.functional", name) for name in _ABSENT})


def to_tensor(pic):
    """A NumPy image to a ``(C, H, W)`` tensor, as ``transforms.ToTensor``."""
    return _t.ToTensor()(pic)


def normalize(tensor, mean, std, inplace=False):
    """``(tensor - mean) / std`` per channel, as ``transforms.Normalize``."""
    return _t.Normalize(mean, std, inplace=inplace)(tensor)


def crop(img, top, left, height, width):
    """The ``height`` x ``width`` window at ``(top, left)`` (inside the image)."""
    _t._check_image(img, "crop")
    h, w = _t._size_of(img)
    if top < 0 or left < 0 or top + height > h or left + width > w:
        raise NotImplementedError("crop: a window outside the image (torchvision pads it) "
                                  "is not implemented in ember")
    return _t._crop(img, top, left, height, width)


def center_crop(img, output_size):
    """The central window of ``output_size``, as ``transforms.CenterCrop``."""
    return _t.CenterCrop(output_size)(img)


def pad(img, padding, fill=0, padding_mode="constant"):
    """Pad the borders, as ``transforms.Pad``."""
    return _t.Pad(padding, fill, padding_mode)(img)


def resize(img, size, interpolation=InterpolationMode.BILINEAR, max_size=None,
           antialias=True):
    """Resize, as ``transforms.Resize``."""
    return _t.Resize(size, interpolation, max_size, antialias)(img)


def hflip(img):
    """Mirror left to right."""
    _t._check_image(img, "hflip")
    return _t._flip(img, vertical=False)


def vflip(img):
    """Mirror top to bottom."""
    _t._check_image(img, "vflip")
    return _t._flip(img, vertical=True)


def get_dimensions(img):
    """``[channels, height, width]`` of a tensor ``(..., C, H, W)`` or NumPy image."""
    _t._check_image(img, "get_dimensions")
    h, w = _t._size_of(img)
    if isinstance(img, _t.ember.Tensor):
        return [int(img.shape[-3]) if img.ndim > 2 else 1, h, w]
    return [int(img.shape[2]) if img.ndim == 3 else 1, h, w]


def get_image_size(img):
    """``[width, height]``."""
    h, w = get_dimensions(img)[1:]
    return [w, h]


def __getattr__(name):
    raise missing_torchvision("torchvision.transforms.functional", name)
