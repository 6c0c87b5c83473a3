"""Training steps at two ember threads with each split kernel's route forced one way or
chosen from measured times, alternated in one process, against ember at one thread.

    python benchmarks/two_threads_routes.py [--only mlp,lstm,transformer] [--threads N]
                                            [--min-time S] [--per-round R] [--numpy-only]
                                            [--modes one-thread,static,measured,...]
                                            [--check-steps N] [--settle S] [--sites]

ember only. Each workload's step (the builders of ``two_threads.py``) runs in rounds,
one round per way in turn, so that the load of a shared machine hits all alike:

- ``one-thread``: ``ember.set_num_threads(1)`` for the round (the reference: at two
  threads ember should never be slower);
- at ``--threads`` (2) threads, ``threads._state["routes"]`` set to
  ``static`` (the fixed rules before the measured choice: the pool's split wherever it
  may, else BLAS's threads where the pool has been idle for 0.1 s, else one thread; on
  this tree's pool, whose caller takes back a block its worker has not started),
  ``measured`` (each site's route chosen from its measured wall times, the default:
  ``ember/backend/thread_routes.py``), ``split`` (the pool's split wherever it may,
  never BLAS's threads), ``blas`` (BLAS's own threads for the products whose inner
  dimension keeps their bits there, no split on the pool) or ``one`` (every kernel
  whole at one BLAS thread).

Each round waits ``--settle`` seconds (OpenBLAS's threads spin for ~0.1 s after a
product of theirs before they sleep: a round after the ``blas`` way would find the
second core taken and count their CPU), runs one untimed step, then ``--per-round``
timed steps. Printed per workload and way: the median wall and process (CPU, all
threads) milliseconds per step, the best round's wall time (on a loaded machine, the
rounds that found both cores free), the ratio of each median wall time to one
thread's, the routes the measured choice settled on, and the load average.
Run it at normal priority (``nice -n 0``): the other two-thread figures are wall times.

``--check-steps N`` (default 3) first runs N steps of a fresh model (same seed) each way
and asserts that every parameter has the same bits: the routes differ only in time.
``--sites`` prints each site of the measured way (a product's shapes, strides and
dtype; a split kernel's code, rows and cost), its routes, last trial's times and
choice. ``--numpy-only`` hides threadpoolctl, numba and MKL (the default install; set
``EMBER_MKL=0`` too), as in ``two_threads.py``.
"""
import argparse
import collections
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

if __name__ == "__main__" and "--numpy-only" in sys.argv:
    from two_threads import _NoExtras
    sys.meta_path.insert(0, _NoExtras())

MODES = "one-thread,static,measured,split,blas,one"


def _load():
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def _set_mode(ember, threads, mode, n):
    if mode == "one-thread":
        ember.set_num_threads(1)
        threads._state["routes"] = "measured"
    else:
        ember.set_num_threads(n)
        threads._state["routes"] = mode


def _modules(step):
    """The Modules a step's closure holds (its model), found through its cells."""
    import ember
    out = []
    for cell in step.__closure__ or ():
        v = cell.cell_contents
        if isinstance(v, ember.nn.Module):
            out.append(v)
        elif callable(v) and getattr(v, "__closure__", None):
            out += _modules(v)
    return out


def _check(ember, threads, build, modes, steps, n):
    """Every way's parameters after ``steps`` steps of a fresh model: the same bits."""
    import numpy as np
    params = {}
    for mode in modes:
        _set_mode(ember, threads, mode, n)
        ember.manual_seed(0)
        step = build(ember)
        for _ in range(steps):
            step()
        params[mode] = [p.detach().numpy().copy() for m in _modules(step)
                        for p in m.parameters()]
    first = modes[0]
    assert params[first], "no parameters found in the step's closure"
    for mode in modes[1:]:
        for x, y in zip(params[first], params[mode]):
            assert np.array_equal(x.view(np.uint8), y.view(np.uint8)), \
                f"{mode} gives other bits than {first}"
    return len(params[first])


def _site_name(key):
    """A site's key in words: a product's shapes, or a split kernel's code and size."""
    parts = []
    for k in key:
        if hasattr(k, "co_name"):
            parts.append(f"{os.path.basename(k.co_filename)}:{k.co_firstlineno} {k.co_name}")
        else:
            parts.append(getattr(k, "__name__", None) or str(k))
    return " ".join(parts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="mlp,lstm,transformer")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--min-time", type=float, default=2.0, help="seconds per way")
    ap.add_argument("--per-round", type=int, default=3, help="timed steps per round")
    ap.add_argument("--modes", default=MODES)
    ap.add_argument("--check-steps", type=int, default=3)
    ap.add_argument("--settle", type=float, default=0.15, help="seconds before each round")
    ap.add_argument("--numpy-only", action="store_true")
    ap.add_argument("--sites", action="store_true",
                    help="print each site's routes, trial times and choice")
    args = ap.parse_args()
    from two_threads import _builder

    import ember
    from ember.backend import thread_routes, threads
    modes = [m for m in args.modes.split(",") if m]
    print(f"ember at {args.threads} threads, "
          f"{'NumPy only' if args.numpy_only else 'with the extras installed'}, "
          f"EMBER_MKL={os.environ.get('EMBER_MKL', 'unset')}, nice {os.nice(0)}; "
          f"load average before {_load()}", flush=True)
    for name in [n for n in args.only.split(",") if n]:
        build = _builder(name)
        if args.check_steps:
            k = _check(ember, threads, build, modes, args.check_steps, args.threads)
            print(f"{name}: {k} parameters after {args.check_steps} steps, the same bits "
                  f"every way", flush=True)
        thread_routes.clear()
        ember.manual_seed(0)
        step = build(ember)
        for mode in modes + modes:  # warm up every way
            _set_mode(ember, threads, mode, args.threads)
            step()
        wall = collections.defaultdict(list)
        cpu = collections.defaultdict(list)
        start = time.perf_counter()
        while time.perf_counter() - start < len(modes) * args.min_time or \
                len(wall[modes[-1]]) < 5:
            for mode in modes:
                _set_mode(ember, threads, mode, args.threads)
                time.sleep(args.settle)
                step()
                t0, c0 = time.perf_counter(), time.process_time()
                for _ in range(args.per_round):
                    step()
                t1, c1 = time.perf_counter(), time.process_time()
                wall[mode].append((t1 - t0) / args.per_round * 1e3)
                cpu[mode].append((c1 - c0) / args.per_round * 1e3)
        _set_mode(ember, threads, "measured", args.threads)
        ref = statistics.median(wall[modes[0]])
        print(f"{name} ({len(wall[modes[0]])} rounds of {args.per_round}, load {_load()}):")
        for mode in modes:
            w, c = statistics.median(wall[mode]), statistics.median(cpu[mode])
            print(f"  {mode:<11} wall {w:8.3f} (best {min(wall[mode]):8.3f}) cpu {c:8.3f} ms"
                  f"  wall/{modes[0]} {w / ref:.3f}", flush=True)
        chosen = collections.Counter(thread_routes.choices().values())
        print(f"  measured: routes chosen at {sum(chosen.values())} sites: "
              f"{dict(chosen)}", flush=True)
        if args.sites:
            for key, site in thread_routes._sites.items():
                print(f"    {_site_name(key):<60} {site}")
    print(f"load average after {_load()}")


if __name__ == "__main__":
    main()
