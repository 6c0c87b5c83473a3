"""Names of ``torch.nn.functional`` that are constants or ATen aliases."""
from ember._nn_kernels import channel_shuffle as native_channel_shuffle  # noqa: F401
from ember._nn_kernels import conv_tbc  # noqa: F401

__all__ = ["GRID_SAMPLE_INTERPOLATION_MODES", "GRID_SAMPLE_PADDING_MODES",
           "assert_int_or_pair", "conv_tbc", "native_channel_shuffle"]

# grid_sample's modes as the integers ATen's grid_sampler takes
GRID_SAMPLE_INTERPOLATION_MODES = {"bilinear": 0, "nearest": 1, "bicubic": 2}
GRID_SAMPLE_PADDING_MODES = {"zeros": 0, "border": 1, "reflection": 2}


def assert_int_or_pair(arg, arg_name, message):
    """Assert that ``arg`` is an int or a pair (``message`` formats ``arg_name``)."""
    assert isinstance(arg, int) or len(arg) == 2, message.format(arg_name)
