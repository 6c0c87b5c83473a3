"""Where a compiled training step's time goes, piece by piece (one thread, CPU time).

    python benchmarks/compile_step_pieces.py [--only mlp] [--steps 2000] [--no-numba]

Runs the whole step of ``compile_step.py`` (``ember.compile`` of zero_grad, forward,
loss, backward and ``optimizer.step()``), then wraps with ``time.thread_time`` every
kernel, product site and vjp that the plan's generated forward and backward bind
(``into*``, ``inplace*``, ``bvjp*``, the ``op*`` objects' ``forward``), the plan's
``forward``/``backward``, ``optimizer.step`` (with the one-pass SGD group and its numba
loops) and the guard check, and prints the microseconds per step of each, with the
step timed alone before the wrappers went in and the load average. Each wrapper adds
about a microsecond; what no wrapper covers (the generated functions' own lines, the
replay around them) is the difference between the totals and their parts. An op
object that clears its own ``__dict__`` in ``forward`` (the cross-entropy pair's NLL
step) drops its wrapper and shows 0.
"""
import argparse
import collections
import gc
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # read when NumPy is first imported
if __name__ == "__main__" and "--no-numba" in sys.argv:
    sys.modules["numba"] = None
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="mlp")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--no-numba", action="store_true")
    args = ap.parse_args()
    import compile_step as cs

    import ember
    from ember._compile import _compiled, _plan
    from ember.optim import _one_pass
    tt = time.thread_time
    make = cs.WORKLOADS.get(args.only) or cs.EXTRA_WORKLOADS[args.only]
    ember.manual_seed(0)
    step, _ = cs.make_step(ember, make, "step")
    for _ in range(5):
        step()
    n = args.steps

    def per_step(k):
        t0 = tt()
        for _ in range(k):
            step()
        return (tt() - t0) / k * 1e6
    alone = min(per_step(max(1, n // 4)) for _ in range(4))
    acc = collections.defaultdict(float)

    def wrap(name, f):
        def timed(*a, **k):
            t0 = tt()
            try:
                return f(*a, **k)
            finally:
                acc[name] += tt() - t0
        return timed
    plans = [o for o in gc.get_objects() if type(o) is _plan.Plan]
    for plan in plans:
        for key, fn in plan.generated.items():
            scope = fn.__globals__
            for name, v in list(scope.items()):
                if name.startswith(("into", "inplace", "bvjp")):
                    scope[name] = wrap(f"{key} {name}", v)
                elif name.startswith("op") and hasattr(v, "forward"):
                    v.forward = wrap(f"{key} {name}.forward", v.forward)
    for name in ("forward", "backward"):
        setattr(_plan.Plan, name, wrap(f"Plan.{name}", getattr(_plan.Plan, name)))
    _compiled._step_one_pass = wrap("optimizer.step", _compiled._step_one_pass)
    _one_pass.sgd_group = wrap("  sgd_group", _one_pass.sgd_group)
    kernels = _one_pass._numba_kernels()
    if kernels.get("sgd") is not None:
        kernels["sgd"] = wrap("    SGD numba loops", kernels["sgd"])
    cls = type(step)
    cls._same_as_last = wrap("guard check", cls._same_as_last)
    for _ in range(5):
        step()
    acc.clear()
    total = per_step(n)
    print(f"{args.only}: step alone {alone:.0f} us, with the wrappers {total:.0f} us; "
          f"load {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    for name, v in sorted(acc.items(), key=lambda kv: -kv[1]):
        print(f"{v / n * 1e6:9.1f}  {name}")


if __name__ == "__main__":
    main()
