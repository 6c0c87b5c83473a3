"""``torchvision.io`` under ``ember run``: the names libraries import from it at import
time (transformers' video utilities); calling one raises NotImplementedError, since
ember reads no image or video files."""
import enum

from ember._torchvision import absent
from ember.compat import missing_torchvision

_ABSENT = ("read_image", "decode_image", "decode_jpeg", "decode_png", "encode_jpeg",
           "encode_png", "write_jpeg", "write_png", "read_file", "write_file",
           "read_video", "read_video_timestamps", "write_video")

__all__ = ["ImageReadMode", *_ABSENT]
globals().update({name: absent("torchvision.io", name) for name in _ABSENT})


class ImageReadMode(enum.Enum):
    """How an image is read (torchvision's members, for code that names them)."""
    UNCHANGED = 0
    GRAY = 1
    GRAY_ALPHA = 2
    RGB = 3
    RGB_ALPHA = 4
    RGBA = RGB_ALPHA


def __getattr__(name):
    raise missing_torchvision("torchvision.io", name)
