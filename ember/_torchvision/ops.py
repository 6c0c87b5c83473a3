"""``torchvision.ops`` and ``torchvision.ops.misc`` under ``ember run``:
``FrozenBatchNorm2d``; the box operators libraries import by name are there, and
calling one raises NotImplementedError."""
from ember._torchvision import absent
from ember.compat import missing_torchvision
from ember.nn.modules.module import Module

_ABSENT = ("box_iou", "generalized_box_iou", "distance_box_iou", "complete_box_iou",
           "box_area", "box_convert", "nms", "batched_nms", "roi_align", "roi_pool",
           "masks_to_boxes")

__all__ = ["FrozenBatchNorm2d", *_ABSENT]
globals().update({name: absent("torchvision.ops", name) for name in _ABSENT})


class FrozenBatchNorm2d(Module):
    """BatchNorm2d with fixed statistics and affine parameters, all of them buffers:
    ``y = (x - running_mean) / sqrt(running_var + eps) * weight + bias`` per channel,
    the same in training and evaluation (nothing is learned or updated)."""

    def __init__(self, num_features, eps=1e-5):
        from ember import _factory
        super().__init__()
        self.eps = eps
        self.register_buffer("weight", _factory.ones(num_features))
        self.register_buffer("bias", _factory.zeros(num_features))
        self.register_buffer("running_mean", _factory.zeros(num_features))
        self.register_buffer("running_var", _factory.ones(num_features))

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict,
                              missing_keys, unexpected_keys, error_msgs):
        # a BatchNorm2d's state_dict loads: its step counter has no place here
        state_dict.pop(prefix + "num_batches_tracked", None)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict,
                                      missing_keys, unexpected_keys, error_msgs)

    def forward(self, x):
        w = self.weight.reshape(1, -1, 1, 1)
        b = self.bias.reshape(1, -1, 1, 1)
        rv = self.running_var.reshape(1, -1, 1, 1)
        rm = self.running_mean.reshape(1, -1, 1, 1)
        scale = w * (rv + self.eps).rsqrt()
        return x * scale + (b - rm * scale)

    def __repr__(self):
        return f"{type(self).__name__}({self.weight.shape[0]}, eps={self.eps})"


def __getattr__(name):
    raise missing_torchvision("torchvision.ops", name)
