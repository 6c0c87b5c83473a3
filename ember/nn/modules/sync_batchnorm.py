"""``SyncBatchNorm``: batch norm whose batch statistics cover every rank's batch.

In training, with a process group of more than one rank, the mean and variance are
those of the combined batch: each rank sums its part, and the sums are all-reduced
with a differentiable all-reduce (``ember.distributed.nn.functional.all_reduce``), so
backward reaches every rank's input through the shared statistics, as one process on
the whole batch would. The variance is taken around the global mean (two rounds of
sums), as ``batch_norm`` does on one process. Otherwise it is ``BatchNorm``.
"""
from ember import _core as ember
from ember.nn.modules.normalization import _BatchNorm

__all__ = ["SyncBatchNorm"]


class SyncBatchNorm(_BatchNorm):
    """``torch.nn.SyncBatchNorm(num_features, eps, momentum, affine, track_running_stats,
    process_group)`` for inputs of 2 or more dimensions (N, C, ...)."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_group=None, device=None, dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats,
                         device=device, dtype=dtype)
        self.process_group = process_group

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def _need_sync(self):
        from ember import distributed as dist
        if not (self.training and dist.is_initialized()):
            return False
        return dist.get_world_size(self.process_group) > 1

    def forward(self, input):
        self._check_input_dim(input)
        if not self._need_sync():
            return super().forward(input)
        from ember.distributed.nn.functional import all_reduce
        factor = 0.0 if self.momentum is None else self.momentum
        if self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            factor = 1.0 / float(self.num_batches_tracked) if self.momentum is None else \
                self.momentum
        c = input.shape[1]
        dims = [0] + list(range(2, input.dim()))
        shape = [1, c] + [1] * (input.dim() - 2)
        count = ember.tensor([float(input.numel() // c)], dtype=input.dtype)
        sums = all_reduce(ember.cat([input.sum(dims), count]), group=self.process_group)
        n = float(sums[c])
        if n <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got "
                             f"input size {list(input.shape)} over all ranks")
        mean = sums[:c] / n
        centered = input - mean.reshape(shape)
        var = all_reduce((centered * centered).sum(dims), group=self.process_group) / n
        out = centered * ember.rsqrt(var + self.eps).reshape(shape)
        if self.weight is not None:
            out = out * self.weight.reshape(shape)
        if self.bias is not None:
            out = out + self.bias.reshape(shape)
        if self.track_running_stats and self.running_mean is not None:
            with ember.no_grad():
                self.running_mean.mul_(1 - factor).add_(mean.detach() * factor)
                self.running_var.mul_(1 - factor).add_(var.detach() * (n / (n - 1)) * factor)
        return out

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """``module`` with every ``BatchNorm*d`` replaced by a ``SyncBatchNorm`` holding
        the same parameters and running statistics (in place for children)."""
        out = module
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
            out = cls(module.num_features, module.eps, module.momentum, module.affine,
                      module.track_running_stats, process_group)
            if module.affine:
                with ember.no_grad():
                    out.weight = module.weight
                    out.bias = module.bias
            out.running_mean = module.running_mean
            out.running_var = module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out

