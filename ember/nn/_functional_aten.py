"""Names of ``torch.nn.functional`` that are constants or ATen aliases."""
from ember.ops.composite_node import call
from ember.ops.conv import ConvTbc
from ember.ops.resample import _channel_shuffle

__all__ = ["GRID_SAMPLE_INTERPOLATION_MODES", "GRID_SAMPLE_PADDING_MODES",
           "assert_int_or_pair", "conv_tbc", "native_channel_shuffle"]

# grid_sample's modes as the integers ATen's grid_sampler takes
GRID_SAMPLE_INTERPOLATION_MODES = {"bilinear": 0, "nearest": 1, "bicubic": 2}
GRID_SAMPLE_PADDING_MODES = {"zeros": 0, "border": 1, "reflection": 2}


def assert_int_or_pair(arg, arg_name, message):
    """Assert that ``arg`` is an int or a pair (``message`` formats ``arg_name``)."""
    assert isinstance(arg, int) or len(arg) == 2, message.format(arg_name)


def conv_tbc(input, weight, bias, pad=0):
    """Time-batch-channel 1-D convolution: ``input`` (T, B, C_in), ``weight``
    (k, C_in, C_out), ``bias`` (C_out); returns (T', B, C_out)."""
    return call(ConvTbc, input, weight, bias, pad)


def native_channel_shuffle(input, groups):
    """``torch.nn.functional.native_channel_shuffle``: :func:`channel_shuffle`."""
    from ember.nn.functional import _check_shuffle  # (it re-exports this module)
    # torch's native kernel has no backward node of its own: keep the composite's nodes
    _check_shuffle(input, groups)
    return _channel_shuffle(input, groups)
