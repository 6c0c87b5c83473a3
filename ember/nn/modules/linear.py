"""Identity, Linear and Bilinear layers."""
import math

from ember import _core as ember
from ember._tensor import Tensor
from ember.autograd.grad_mode import state as _grad_state
from ember.nn import functional as F
from ember.nn import init
from ember.nn.modules import _infer
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter
from ember.ops.matmul_graph import _short_linear

__all__ = ["Identity", "Linear", "Bilinear"]


class Identity(Module):
    """Returns its input unchanged; accepts (and ignores) any constructor arguments."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """``y = x @ weight.T + bias``: ``(*, in_features) -> (*, out_features)``.

    ``weight`` (out_features, in_features) and ``bias`` (out_features) start from
    U(-1/sqrt(in_features), 1/sqrt(in_features)), as in PyTorch.

    Example::

        >>> m = ember.nn.Linear(20, 30)
        >>> m(ember.randn(128, 20)).shape
        ember.Size([128, 30])
    """

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(ember.empty((out_features, in_features), device=device,
                                            dtype=dtype))
        if bias:
            self.bias = Parameter(ember.empty(out_features, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        """Re-draw ``weight`` (kaiming_uniform_ with a=sqrt(5)) and ``bias``."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        if type(input) is Tensor and _grad_state.grad_enabled:
            xd = input._data
            if xd.ndim == 2 and xd.shape[1] == self.in_features:
                # a batch of rows with grad on: linear's two nodes made at once where
                # nothing watches the graph (``_short_linear``'s checks), the nodes and
                # kernels ``F.linear`` gives
                y = _short_linear(input, self.weight, self.bias)
                if y is not None:
                    return y
        y = _infer.linear(self, input)  # grad off, no mode: straight on the arrays
        if y is not None:
            return y
        if input.ndim and input.shape[-1] != self.in_features:
            raise RuntimeError(f"{self!r}: {F._linear_shape_msg(input, self.weight)}")
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Bilinear(Module):
    """``y = x1^T A x2 + b``: ``(*, in1), (*, in2) -> (*, out)``.

    ``weight`` (out, in1, in2) and ``bias`` (out) start from U(-1/sqrt(in1), 1/sqrt(in1)).
    """

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None,
                 dtype=None):
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        self.weight = Parameter(ember.empty((out_features, in1_features, in2_features),
                                            device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(ember.empty(out_features, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        """Re-draw ``weight`` and ``bias`` from U(-1/sqrt(in1), 1/sqrt(in1))."""
        bound = 1 / math.sqrt(self.weight.size(1))
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        try:
            return F.bilinear(input1, input2, self.weight, self.bias)
        except RuntimeError as e:
            raise RuntimeError(f"{self!r}: {e}") from None

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


def __getattr__(name):
    # torch.nn.modules.linear.NonDynamicallyQuantizableLinear: kept beside attention here
    if name == "NonDynamicallyQuantizableLinear":
        from ember.nn.modules.attention import NonDynamicallyQuantizableLinear
        return NonDynamicallyQuantizableLinear
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
