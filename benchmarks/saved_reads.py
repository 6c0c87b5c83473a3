"""The cost of one ``saved_tensors`` read, ember beside torch.

    python benchmarks/saved_reads.py

ember: ``Primitive.saved_tensors`` of a ``sin`` node read 200,000 times from a
function compiled under an ember file name (as ember's own backward formulas read it),
once as inside a backward pass (the engine's ``in_backward`` count set) and once
outside one (where the caller's file is looked at). torch: a custom Function's
``ctx.saved_tensors``. CPU microseconds per read, the best of 3, and the load average.
"""
import os
import time


def per_read(fn, node, k=200_000, repeat=3):
    best = float("inf")
    for _ in range(repeat):
        c = time.process_time()
        fn(node, k)
        best = min(best, time.process_time() - c)
    return best / k * 1e6


def main():
    import torch

    import ember
    import ember.autograd.node as node_mod
    x = ember.randn(4, requires_grad=True)
    node = x.sin().grad_fn
    ns = {}
    exec(compile("def reads(n, k):\n    for _ in range(k):\n        n.saved_tensors\n",
                 node_mod.__file__, "exec"), ns)
    outside = per_read(ns["reads"], node)
    count = getattr(node_mod, "in_backward", None)  # absent before: every read looked
    if count is None:
        inside = per_read(ns["reads"], node)
    else:
        count[0] += 1
        try:
            inside = per_read(ns["reads"], node)
        finally:
            count[0] -= 1

    class Twice(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2
    tnode = Twice.apply(torch.randn(4, requires_grad=True)).grad_fn

    def treads(n, k):
        for _ in range(k):
            _ = n.saved_tensors
    print(f"us per read: ember inside backward {inside:.2f}, ember outside {outside:.2f}, "
          f"torch ctx.saved_tensors {per_read(treads, tnode):.2f}; load average "
          f"{os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
