"""PyTorch's per-element samplers in ember against torch, in one process, calls
alternated: ``_standard_gamma`` (float32, float64), ``_sample_dirichlet``,
``binomial``, ``poisson`` and the gamma's reparameterised gradient, each with ember's
numba-compiled loops (``ember[fast]``) and with the same loops run as Python (the
default install), on ``--n`` values.

    python benchmarks/random_samplers.py [--n N] [--rounds R] [--before TREE]

Printed: median CPU milliseconds per call, each ratio to torch, and the load average.
One thread. Both paths give torch's values bit for bit (checked once here). With
``--before``, the older tree's ``ember/ops/sampling.py`` (loaded from its file under
another name) is timed too for the gamma and binomial: before this tree its samplers
were NumPy's (not torch's values).
"""
import argparse
import os
import sys
import time

os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["OMP_NUM_THREADS"] = "1"
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402


def _cases(torch, ember, n):
    rng = np.random.default_rng(0)
    alpha = rng.uniform(0.1, 5.0, n)
    conc = rng.uniform(0.1, 5.0, (n // 10, 10))
    count = np.floor(rng.uniform(0, 60, n))
    prob = rng.uniform(0, 1, n)
    rate = rng.uniform(0, 40, n)
    x = rng.gamma(alpha)

    def pair(fn, *arrays, dtype=np.float32):
        t = [torch.tensor(a.astype(dtype)) for a in arrays]
        e = [ember.tensor(a.astype(dtype)) for a in arrays]
        return (lambda: fn(torch)(*t)), (lambda: fn(ember)(*e))

    return {
        "_standard_gamma f32": pair(lambda m: m._standard_gamma, alpha),
        "_standard_gamma f64": pair(lambda m: m._standard_gamma, alpha, dtype=np.float64),
        "_sample_dirichlet f32 (k=10)": pair(lambda m: m._sample_dirichlet, conc),
        "binomial f32": pair(lambda m: m.binomial, count, prob),
        "poisson f32": pair(lambda m: m.poisson, rate),
        "_standard_gamma_grad f32": pair(lambda m: m._standard_gamma_grad, alpha, x),
    }


def _before(root, torch, ember, n):
    """The older tree's gamma and binomial ops, on this tree's ember otherwise."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "sampling_before", os.path.join(root, "ember", "ops", "sampling.py"))
    old = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(old)
    rng = np.random.default_rng(0)
    alpha = ember.tensor(rng.uniform(0.1, 5.0, n).astype(np.float32))
    count = ember.tensor(np.floor(rng.uniform(0, 60, n)).astype(np.float32))
    prob = ember.tensor(rng.uniform(0, 1, n).astype(np.float32))
    return {"_standard_gamma f32": lambda: old.standard_gamma(alpha),
            "binomial f32": lambda: old.binomial(count, prob)}


def _cpu_ms(fn, seed_fn):
    seed_fn(0)
    t = time.process_time()
    out = fn()
    return (time.process_time() - t) * 1e3, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--before", help="root of an older ember tree")
    args = ap.parse_args()
    import torch

    import ember
    from ember import _random_samplers, _sampler_env
    torch.set_num_threads(1)
    compiled = _sampler_env.load_compiled()
    print(f"load average {os.getloadavg()}, n={args.n}, rounds={args.rounds}, "
          f"numba {'yes' if compiled is not None else 'no'}")
    before = _before(args.before, torch, ember, args.n) if args.before else {}
    print(f"{'call':30s} {'torch ms':>9s} {'numba ms':>9s} {'ratio':>6s} "
          f"{'python ms':>10s} {'ratio':>6s}" + ("  before ms  ratio" if before else ""))
    for name, (t_fn, e_fn) in _cases(torch, ember, args.n).items():
        times = {"torch": [], "numba": [], "python": [], "before": []}
        for r in range(args.rounds):
            ms, t_out = _cpu_ms(t_fn, torch.manual_seed)
            times["torch"].append(ms)
            if name in before:
                times["before"].append(_cpu_ms(before[name], ember.manual_seed)[0])
            for path, loops in (("numba", compiled), ("python", None)):
                if path == "python" and r and args.n > 20_000:
                    continue  # one round of the slow path is enough
                _random_samplers._COMPILED["loops"] = loops
                ms, e_out = _cpu_ms(e_fn, ember.manual_seed)
                times[path].append(ms)
                if r == 0:
                    assert np.array_equal(t_out.numpy(), e_out.numpy(), equal_nan=True), name
        med = {k: float(np.median(v)) for k, v in times.items() if v}
        line = (f"{name:30s} {med['torch']:9.2f} {med['numba']:9.2f} "
                f"{med['numba'] / med['torch']:6.2f} {med['python']:10.1f} "
                f"{med['python'] / med['torch']:6.1f}")
        if "before" in med:
            line += f"  {med['before']:9.2f} {med['before'] / med['torch']:6.2f}"
        print(line)
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
