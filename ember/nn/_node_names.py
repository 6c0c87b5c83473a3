"""PyTorch's backward node names for composite functions of ``nn.functional``.

ember builds these functions from primitives, so their output's node is the last
primitive (``mse_loss`` ends in ``MeanBackward0``); PyTorch has one kernel with its own
node (``MseLossBackward0``). ``install`` wraps each listed function so that the node it
leaves carries PyTorch's name (``ember.autograd.node.rename_output_node``): pictures,
``print(loss.grad_fn)`` and tutorials then agree with PyTorch. In-place calls keep
their node (PyTorch names those differently). Checked by ``tests/test_node_names.py``.
"""
import functools

from ember.autograd.node import rename_output_node

TORCH_NODE_NAMES = {
    # activations
    "gelu": "GeluBackward0", "silu": "SiluBackward0", "mish": "MishBackward0",
    "softplus": "SoftplusBackward0", "elu": "EluBackward0", "selu": "EluBackward0",
    "celu": "CeluBackward0", "hardswish": "HardswishBackward0",
    "hardsigmoid": "HardsigmoidBackward0", "logsigmoid": "LogSigmoidBackward0",
    "glu": "GluBackward0", "threshold": "ThresholdBackward0",
    "hardshrink": "HardshrinkBackward0", "softshrink": "SoftshrinkBackward0",
    "prelu": "PreluKernelBackward0",
    # losses
    "mse_loss": "MseLossBackward0", "huber_loss": "HuberLossBackward0",
    "smooth_l1_loss": "SmoothL1LossBackward0", "soft_margin_loss": "SoftMarginLossBackward0",
    "binary_cross_entropy": "BinaryCrossEntropyBackward0",
    "binary_cross_entropy_with_logits": "BinaryCrossEntropyWithLogitsBackward0",
    "multi_margin_loss": "MultiMarginLossBackward0",
    "multilabel_margin_loss": "MultilabelMarginLossBackward0",
}


# calls for which PyTorch itself runs a composite (smooth_l1_loss with beta=0 is l1_loss)
_COMPOSITE_IN_TORCH = {
    "smooth_l1_loss": lambda args, kw: kw.get("beta", args[5] if len(args) > 5 else 1.0) == 0,
}


def _named(fn, name):
    composite = _COMPOSITE_IN_TORCH.get(fn.__name__)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        out = fn(*args, **kwargs)
        if not kwargs.get("inplace") and not (composite and composite(args, kwargs)):
            rename_output_node(out, name, args)
        return out
    return wrapper


def install(namespace):
    """Wrap the listed functions of ``namespace`` (``nn.functional``'s globals)."""
    for fname, node in TORCH_NODE_NAMES.items():
        namespace[fname] = _named(namespace[fname], node)
