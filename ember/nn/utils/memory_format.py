"""``convert_conv2d_weight_memory_format`` / ``convert_conv3d_weight_memory_format``:
store the weights of a model's convolutions in a memory format (channels-last)."""
from ember.nn.modules.conv import Conv2d, Conv3d, ConvTranspose2d, ConvTranspose3d

__all__ = ["convert_conv2d_weight_memory_format", "convert_conv3d_weight_memory_format"]


def _convert(module, memory_format, kinds):
    if isinstance(module, kinds):
        module.weight.data = module.weight.detach().clone().contiguous(
            memory_format=memory_format)
    for child in module.children():
        _convert(child, memory_format, kinds)
    return module


def convert_conv2d_weight_memory_format(module, memory_format):
    """Rewrite the weight of every ``Conv2d``/``ConvTranspose2d`` in ``module`` (itself
    included) in ``memory_format``; returns ``module``."""
    return _convert(module, memory_format, (Conv2d, ConvTranspose2d))


def convert_conv3d_weight_memory_format(module, memory_format):
    """As :func:`convert_conv2d_weight_memory_format`, for 3-D convolutions."""
    return _convert(module, memory_format, (Conv3d, ConvTranspose3d))
