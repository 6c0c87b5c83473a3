"""Training steps: eager ember, ember.compile'd ember, torch eager and torch.compile, in
one run.

    python benchmarks/compile_step.py [--threads 1|2] [--only mlp,mlp_infer,...]
                                      [--min-time S] [--no-inductor] [--no-numba]

Variants, interleaved round by round so machine load hits all alike:
- ``eager``: ember eager.
- ``model``: ``ember.compile(model)``; ``zero_grad``/loss/``backward``/``step`` outside.
- ``step``: the whole training step compiled, the optimizer inside
  (``ember.compile(step)`` with ``opt.zero_grad(); loss(model(x)).backward();
  opt.step()`` in ``step``).
- ``torch``: torch eager, the same step.
- ``inductor``: torch.compile (inductor) of the same step function (torch compiles
  the forward and backward, the optimizer step runs in its graph too).
- ``nobuf`` (with ``--ab-buffers``): ``step`` with ``ember._compile.config.reuse_buffers``
  off during its calls (no buffers kept across steps, no fused elementwise loops), and
  the process-time ratio step/nobuf.
- ``floor``: the matrix products of one compiled step alone. Each product the step sends
  through ``ember.backend.gemm.matmul`` (or ``gemm.addmm``) is recorded (operand shapes,
  strides, dtype) during one call, and the recorded list is timed on arrays of the same
  layout through the same function with MKL loaded (``ember[mkl]``; it is loaded for this even where
  ``EMBER_MKL=0`` keeps ember's own products on NumPy), so ``step/floor`` shows what the
  rest of the step -- elementwise kernels, the optimizer, Python -- costs on top of its
  GEMMs (``floor ms`` is process time, as ``step cpu ms``; ``GEMMs``: how many products
  one step makes). Without the ``mkl`` package the floor is printed as unavailable.
  Products made inside compiled kernels (the LSTM's numba step kernels, ``ember[fast]``)
  and a plan's linear steps whose products ``gemm`` would run on NumPy anyway (a cell's
  small products: ``ember._compile._linear``) do not pass through that
  function: their floor counts only the rest (none at all: printed as unavailable).
Median wall milliseconds per step, ratios to torch eager, the median process (CPU)
milliseconds of the compiled step and of torch (interpretable under machine load:
wall time there includes waiting for a core), the load average, and the
compile times (ember: first call plus the second, which builds the plan; torch: the
first call) are printed. Workloads (the sizes of benchmarks/training_steps.py):
- mlp: MLP 784-256-128-10, batch 128, SGD momentum
- mlp_infer: the same MLP, inference under no_grad, batch 1024
- cnn: Conv(1->8)-ReLU-MaxPool-Conv(8->16)-ReLU-MaxPool-Linear, batch 64, 28x28, SGD
- lstm: LSTM(64->128, batch_first, seq 32, batch 32) + Linear, Adam
- rnncell: a Python loop over RNNCell(64, 128) for 32 steps, SGD
- transformer: TransformerEncoderLayer(128, 4, ff 256, dropout 0), batch 16, seq 64, Adam
"""
import argparse
import os
import sys
import time

if __name__ == "__main__" and "--threads" in sys.argv:
    # OpenBLAS reads its thread count when NumPy is first imported
    os.environ["OPENBLAS_NUM_THREADS"] = sys.argv[sys.argv.index("--threads") + 1]
if __name__ == "__main__" and "--no-numba" in sys.argv:
    # the default install: ember's optional numba paths (fused loops, one-pass optimizer
    # updates, LSTM step kernels) see numba as absent; with EMBER_MKL=0 that is NumPy only
    sys.modules["numba"] = None

import numpy as np  # noqa: E402


def _mlp(m):
    nn = m.nn
    return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                         nn.Linear(128, 10))


def mlp(m):
    model = _mlp(m)
    rng = np.random.default_rng(0)
    x = m.tensor(rng.standard_normal((128, 784), dtype=np.float32))
    y = m.tensor(rng.integers(0, 10, 128))
    return model, m.optim.SGD(model.parameters(), lr=0.01, momentum=0.9), x, \
        lambda out: m.nn.functional.cross_entropy(out, y)


def mlp_tiny(m):
    """The MLP step at 8-8-8-4, batch 32: its kernels negligible, what is left is the
    step's fixed Python cost."""
    nn = m.nn
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(),
                          nn.Linear(8, 4))
    rng = np.random.default_rng(0)
    x = m.tensor(rng.standard_normal((32, 8), dtype=np.float32))
    y = m.tensor(rng.integers(0, 4, 32))
    return model, m.optim.SGD(model.parameters(), lr=0.01, momentum=0.9), x, \
        lambda out: m.nn.functional.cross_entropy(out, y)


def mlp_infer(m):
    model = _mlp(m)
    x = m.tensor(np.random.default_rng(0).standard_normal((1024, 784), dtype=np.float32))
    return model, None, x, None


def cnn(m):
    nn = m.nn
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(16 * 7 * 7, 10))
    rng = np.random.default_rng(0)
    x = m.tensor(rng.standard_normal((64, 1, 28, 28), dtype=np.float32))
    y = m.tensor(rng.integers(0, 10, 64))
    return model, m.optim.SGD(model.parameters(), lr=0.01, momentum=0.9), x, \
        lambda out: m.nn.functional.cross_entropy(out, y)


def lstm(m):
    nn = m.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(64, 128, batch_first=True)
            self.head = nn.Linear(128, 10)

        def forward(self, x):
            out, _ = self.lstm(x)
            return self.head(out[:, -1])
    model = Net()
    rng = np.random.default_rng(0)
    x = m.tensor(rng.standard_normal((32, 32, 64), dtype=np.float32))
    y = m.tensor(rng.integers(0, 10, 32))
    return model, m.optim.Adam(model.parameters(), lr=1e-3), x, \
        lambda out: m.nn.functional.cross_entropy(out, y)


def rnncell(m):
    nn = m.nn

    class Loop(nn.Module):  # the user's Python loop over the cell, as one module
        def __init__(self):
            super().__init__()
            self.cell = nn.RNNCell(64, 128)

        def forward(self, xs):
            h = m.zeros(xs.shape[1], 128)
            for t in range(xs.shape[0]):
                h = self.cell(xs[t], h)
            return h
    model = Loop()
    xs = m.tensor(np.random.default_rng(0).standard_normal((32, 32, 64), dtype=np.float32))
    return model, m.optim.SGD(model.parameters(), lr=0.01), xs, \
        lambda h: h.pow(2).mean()


def transformer(m):
    model = m.nn.TransformerEncoderLayer(128, 4, dim_feedforward=256, dropout=0.0,
                                         batch_first=True)
    rng = np.random.default_rng(0)
    x = m.tensor(rng.standard_normal((16, 64, 128), dtype=np.float32))
    target = m.tensor(rng.standard_normal((16, 64, 128), dtype=np.float32))
    return model, m.optim.Adam(model.parameters(), lr=1e-3), x, \
        lambda out: m.nn.functional.mse_loss(out, target)


WORKLOADS = {"mlp": mlp, "mlp_infer": mlp_infer, "cnn": cnn, "lstm": lstm,
             "rnncell": rnncell, "transformer": transformer}
# not in the default list: the fixed cost of a step (``compile_step_ab.py --only``)
EXTRA_WORKLOADS = {"mlp_tiny": mlp_tiny}


def make_step(m, make, variant):
    """(step function, compiled object or None) for one variant."""
    model, opt, x, loss_of = make(m)
    if opt is None:  # inference
        run = m.compile(model) if variant in ("model", "step", "inductor") else model

        def infer():
            with m.no_grad():
                return run(x)
        return infer, run
    run = m.compile(model) if variant == "model" else model

    def step():
        opt.zero_grad()
        loss = loss_of(run(x))
        loss.backward()
        opt.step()
        return loss
    if variant in ("step", "inductor"):
        compiled = m.compile(step)
        return compiled, compiled
    return step, (run if variant == "model" else None)


def _without_buffers(ember, step):
    """``step`` run with the compiled plans' buffer reuse and fusion switched off."""
    from ember._compile import config

    def run():
        config.reuse_buffers = False
        try:
            return step()
        finally:
            config.reuse_buffers = True
    return run


def time_rounds(steps, min_time, warmup=3, per_round=3):
    """Interleaved rounds of each step; (median wall, median process-time) milliseconds
    per step for each. Process time counts this process's CPU seconds on all its
    threads: under machine load it grows less than wall time, and with one thread it
    is close to what the step costs on a quiet machine."""
    for step in steps:
        for _ in range(warmup):
            step()
    wall = [[] for _ in steps]
    cpu = [[] for _ in steps]
    start = time.perf_counter()
    while time.perf_counter() - start < min_time * len(steps) or len(wall[0]) < 5:
        for i, step in enumerate(steps):
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(per_round):
                step()
            wall[i].append((time.perf_counter() - t0) / per_round)
            cpu[i].append((time.process_time() - c0) / per_round)
    return ([float(np.median(w)) * 1e3 for w in wall],
            [float(np.median(c)) * 1e3 for c in cpu])


def record_products(run):
    """The operand layouts ``(shape, strides, dtype)`` of ``a`` and ``b`` for each matrix
    product that one call of ``run`` sends through ``ember.backend.gemm.matmul`` or
    ``gemm.addmm`` (linear's bias and product; every product of ember's kernels goes
    through one of them)."""
    from ember.backend import gemm
    seen = []
    inner = gemm.matmul
    inner_addmm = getattr(gemm, "addmm", None)  # (linear's bias + product, where it exists)

    def record(a, b):
        if type(a) is np.ndarray and type(b) is np.ndarray:
            seen.append(((a.shape, a.strides, a.dtype), (b.shape, b.strides, b.dtype)))

    def spy(a, b, out=None):
        record(a, b)
        return inner(a, b, out)

    def spy_addmm(bias, a, b, out=None):
        record(a, b)
        gemm.matmul = inner  # (addmm's own call of matmul is this same product)
        try:
            return inner_addmm(bias, a, b, out)
        finally:
            gemm.matmul = spy
    # a plan's linear steps may call MKL themselves with gemm's arguments
    # (``ember._compile._mkl.Site``): their products count too, once
    try:
        from ember._compile._mkl import Site
    except ImportError:  # an older tree
        Site = None
    site_fns = {name: getattr(Site, name) for name in ("matmul", "addmm")} if Site else {}

    def site_spy(name):
        def call(self, *args, **kw):
            a, b = args[1:3] if name == "addmm" else args[:2]
            record(a, b)
            gemm.matmul, gemm.addmm = inner, inner_addmm
            try:
                return site_fns[name](self, *args, **kw)
            finally:
                gemm.matmul, gemm.addmm = spy, spy_addmm
        return call
    gemm.matmul = spy
    if inner_addmm is not None:
        gemm.addmm = spy_addmm
    for name in site_fns:
        setattr(Site, name, site_spy(name))
    try:
        run()
    finally:
        gemm.matmul = inner
        if inner_addmm is not None:
            gemm.addmm = inner_addmm
        for name, fn in site_fns.items():
            setattr(Site, name, fn)
    return seen


def _laid_out(shape, strides, dtype, rng):
    """Random values in an array of this shape and these (non-negative) byte strides."""
    span = sum((n - 1) * s for n, s in zip(shape, strides) if n > 0) + dtype.itemsize
    base = rng.standard_normal(-(-span // dtype.itemsize)).astype(dtype)
    return np.lib.stride_tricks.as_strided(base, shape, strides)


def gemm_floor_ms(products, min_time):
    """``(median process (CPU) milliseconds, None)`` of all ``products`` (from
    :func:`record_products`) run back to back through ``ember.backend.gemm.matmul`` with
    MKL loaded, or ``(None, why not)``."""
    from ember.backend import gemm
    if not products:
        return None, ("no product passed through gemm.matmul (a plan's linear steps on "
                      "small products call NumPy directly)")
    path = gemm.library_path()
    if path is None:
        return None, "the mkl package is not installed (pip install 'ember[mkl]')"
    if any(s < 0 for prod in products for _, strides, _ in prod for s in strides):
        return None, "a product with negative strides"
    saved = gemm._lib[0]
    try:
        mkl = saved if saved else gemm._Mkl(path)
    except (OSError, AttributeError) as err:
        return None, f"libmkl_rt could not be loaded ({err})"
    from ember.backend import threads
    mkl.set_num_threads(threads.get_num_threads())
    rng = np.random.default_rng(0)
    pairs = [tuple(_laid_out(*op, rng) for op in prod) for prod in products]
    gemm._lib[0] = mkl
    try:
        for a, b in pairs:  # warm: first-touch pages, MKL's buffers
            gemm.matmul(a, b)
        times = []
        start = time.perf_counter()
        while time.perf_counter() - start < min_time or len(times) < 5:
            t0 = time.process_time()
            for a, b in pairs:
                gemm.matmul(a, b)
            times.append(time.process_time() - t0)
    finally:
        gemm._lib[0] = saved
    return float(np.median(times)) * 1e3, None


def _first_calls(step, n):
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default=",".join(WORKLOADS))
    ap.add_argument("--min-time", type=float, default=2.0)
    ap.add_argument("--threads", type=int, default=None,
                    help="torch and OpenBLAS threads (default: the libraries' own)")
    ap.add_argument("--no-inductor", action="store_true")
    ap.add_argument("--no-numba", action="store_true",
                    help="run as if numba were not installed (the default install)")
    ap.add_argument("--ab-buffers", action="store_true",
                    help="also time the compiled step without buffer reuse and fusion")
    args = ap.parse_args()
    import torch

    import ember
    if args.threads:
        torch.set_num_threads(args.threads)
        ember.set_num_threads(args.threads)  # its kernels and its BLAS alike
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, "
          f"numba {'off' if args.no_numba else 'on'}, "
          f"EMBER_MKL={os.environ.get('EMBER_MKL', 'unset')}, "
          f"torch threads {torch.get_num_threads()}, "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}")
    cols = ["eager", "model", "step"] + (["nobuf"] if args.ab_buffers else []) + \
        ["torch"] + ([] if args.no_inductor else ["inductor"])
    print(f"{'workload':<12}" + "".join(f"{c + ' ms':>12}" for c in cols) +
          "".join(f"{c + '/torch':>15}" for c in cols if c != "torch") +
          f"{'step cpu ms':>13}{'torch cpu ms':>14}{'cpu step/torch':>16}" +
          (f"{'cpu step/nobuf':>16}" if args.ab_buffers else "") +
          f"{'floor ms':>10}{'step/floor':>12}{'GEMMs':>7}" +
          f"{'ember comp s':>14}" + ("" if args.no_inductor else f"{'inductor s':>12}"))
    floors_unavailable = set()
    for name in args.only.split(","):
        make = WORKLOADS[name]
        torch.manual_seed(0)
        ember.manual_seed(0)
        steps = {}
        eager, _ = make_step(ember, make, "eager")
        model_step, _ = make_step(ember, make, "model")
        step_step, compiled = make_step(ember, make, "step")
        # ember's compile time: the capturing first call and the plan-building second
        ember_s = _first_calls(step_step, 2)
        steps = {"eager": eager, "model": model_step, "step": step_step}
        if args.ab_buffers:
            nobuf, _ = make_step(ember, make, "step")
            steps["nobuf"] = _without_buffers(ember, nobuf)
            _first_calls(steps["nobuf"], 2)
        steps["torch"], _ = make_step(torch, make, "torch")
        inductor_s = None
        if not args.no_inductor:
            try:
                steps["inductor"], _ = make_step(torch, make, "inductor")
                inductor_s = _first_calls(steps["inductor"], 2)
            except Exception as e:  # a missing C compiler, an unsupported op...
                print(f"  torch.compile failed on {name}: {type(e).__name__}: {e}")
                steps.pop("inductor", None)
        products = record_products(step_step)
        floor, why = gemm_floor_ms(products, min(args.min_time, 1.0))
        if why:
            floors_unavailable.add(why)
        names = [c for c in cols if c in steps]
        wall, cpu = time_rounds([steps[c] for c in names], args.min_time)
        ms, cpu = dict(zip(names, wall)), dict(zip(names, cpu))
        stats = compiled.stats if hasattr(compiled, "stats") else compiled._compiled.stats
        note = "" if stats["eager"] == 0 else "  (graph break: ran eagerly)"
        t = ms["torch"]
        print(f"{name:<12}" + "".join(f"{ms.get(c, float('nan')):>12.2f}" for c in cols) +
              "".join(f"{ms.get(c, float('nan')) / t:>15.2f}" for c in cols if c != "torch") +
              f"{cpu['step']:>13.2f}{cpu['torch']:>14.2f}{cpu['step'] / cpu['torch']:>16.2f}" +
              (f"{cpu['step'] / cpu['nobuf']:>16.2f}" if args.ab_buffers else "") +
              (f"{floor:>10.2f}{cpu['step'] / floor:>12.2f}" if floor else
               f"{'n/a':>10}{'n/a':>12}") + f"{len(products):>7}" +
              f"{ember_s:>14.3f}" +
              ("" if args.no_inductor else f"{inductor_s or float('nan'):>12.1f}") + note)
    for why in sorted(floors_unavailable):
        print(f"GEMM floor unavailable: {why}")
    print(f"load average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
