"""``nn.AdaptiveLogSoftmaxWithLoss`` (Grave et al., "Efficient softmax approximation for
GPUs"): frequent classes in a head softmax, rare ones in clusters whose probability is
the head's cluster entry times a softmax within the cluster."""
from collections import namedtuple

from ember import _core as ember
from ember.nn import functional as F
from ember.nn.modules.container import ModuleList, Sequential
from ember.nn.modules.linear import Linear
from ember.nn.modules.module import Module

__all__ = ["AdaptiveLogSoftmaxWithLoss"]

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """Adaptive softmax over ``n_classes`` split at ``cutoffs`` (increasing, each in
    ``(0, n_classes)``). The head scores the ``cutoffs[0]`` shortlist classes and one
    entry per cluster; cluster ``i`` projects to ``in_features // div_value**(i+1)``
    features before its own softmax.

    ``forward(input, target)`` returns ``(output, loss)``: each row's log-probability of
    its target and their negated mean.
    """

    def __init__(self, in_features, n_classes, cutoffs, div_value=4.0, head_bias=False,
                 device=None, dtype=None):
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if (cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs)):
            raise ValueError("cutoffs should be a sequence of unique, positive integers sorted "
                             "in an increasing order, where each value is between 1 and "
                             "n_classes-1")
        kw = {"device": device, "dtype": dtype}
        self.in_features = in_features
        self.n_classes = n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value = div_value
        self.head_bias = head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, **kw)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hsz = int(in_features // (div_value ** (i + 1)))
            osz = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hsz, bias=False, **kw),
                                        Linear(hsz, osz, bias=False, **kw)))

    def reset_parameters(self):
        self.head.reset_parameters()
        for i2h, h2o in self.tail:
            i2h.reset_parameters()
            h2o.reset_parameters()

    def forward(self, input, target):
        batched = target.dim() == 1
        if target.dim() == 0:
            if input.dim() != 1:
                raise RuntimeError("1D target tensor expects 1D input tensors, but found "
                                   f"inputs with size {list(input.shape)}")
            input, target = input.unsqueeze(0), target.unsqueeze(0)
        elif target.dim() == 1:
            if input.dim() != 2:
                raise RuntimeError("1D target tensor expects 2D input tensors, but found "
                                   f"inputs with size {list(input.shape)}")
            if input.size(0) != target.size(0):
                raise RuntimeError("Input and target should have the same size in the batch "
                                   "dimension.")
        else:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        n = target.size(0)
        if n and (int(target.min()) < 0 or int(target.max()) >= self.n_classes):
            raise RuntimeError(f"Target values should be in [0, {self.n_classes - 1}], but "
                               f"values in range [{int(target.min())}, {int(target.max())}] "
                               "were found. ")
        head_lp = F.log_softmax(self.head(input), dim=1)
        # the head column each row reads: its class in the shortlist, else its cluster
        cluster = ember.zeros(n, dtype=ember.int64, device=input.device)
        for c in self.cutoffs[:-1]:
            cluster = cluster + (target >= c).long()
        head_col = ember.where(cluster == 0, target, self.shortlist_size + cluster - 1)
        output = head_lp.gather(1, head_col.unsqueeze(1)).squeeze(1)
        for i in range(self.n_clusters):
            rows = (cluster == i + 1).nonzero().reshape(-1)
            if rows.numel() == 0:
                continue
            lp = F.log_softmax(self.tail[i](input.index_select(0, rows)), dim=1)
            local = target.index_select(0, rows) - self.cutoffs[i]
            output = output.index_add(0, rows, lp.gather(1, local.unsqueeze(1)).squeeze(1))
        loss = (-output).mean()
        return _ASMoutput(output if batched else output.squeeze(0), loss)

    def _full_log_prob(self, input, head_output):
        head_lp = F.log_softmax(head_output, dim=1)
        parts = [head_lp[:, :self.shortlist_size]]
        for i in range(self.n_clusters):
            col = self.shortlist_size + i
            parts.append(F.log_softmax(self.tail[i](input), dim=1) + head_lp[:, col:col + 1])
        return ember.cat(parts, 1)

    def log_prob(self, input):
        """Log-probabilities of every class: (N, n_classes), or (n_classes,)."""
        batched = input.dim() == 2
        x = input if batched else input.unsqueeze(0)
        out = self._full_log_prob(x, self.head(x))
        return out if batched else out.squeeze(0)

    def predict(self, input):
        """The most likely class of each row."""
        batched = input.dim() == 2
        x = input if batched else input.unsqueeze(0)
        out = self._full_log_prob(x, self.head(x)).argmax(dim=1)
        return out if batched else out.squeeze(0)
