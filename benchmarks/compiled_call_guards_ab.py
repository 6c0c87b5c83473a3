"""The cost of a compiled function's guards on a tiny call, for an older ember tree and
this one in one process (rounds alternated, CPU time, one thread): ``x * 2 + y`` on
three-element tensors, compiled, called with the same guard set every time (the path
that checks each tensor argument's shape, dtype, ``requires_grad`` and contiguity
without computing the guard key), with and without ``requires_grad``.

    python benchmarks/compiled_call_guards_ab.py /tmp/before [--rounds 15]

Prints the median CPU microseconds per call of each tree, after/before, and the load
average before and after.
"""
import argparse
import os
import sys

os.environ["OPENBLAS_NUM_THREADS"] = "1"

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def main():
    sys.path.insert(0, HERE)
    from nn_ops_ab import _load, _use, alternated_ms
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", help="root of the older ember tree")
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    load0 = os.getloadavg()
    libs = [("before",) + _load(args.before), ("after",) + _load(ROOT)]
    for rg in (False, True):
        steps = []
        for _, m, mods in libs:
            _use(mods)
            f = m.compile(lambda x, y: x * 2 + y)
            x, y = m.ones(3, requires_grad=rg), m.ones(3)
            f(x, y)
            f(x, y)
            steps.append(lambda f=f, x=x, y=y: f(x, y))
        ms = alternated_ms(libs, steps, args.rounds, 2000)
        b, a = ms
        print(f"requires_grad={rg}: before {b * 1e3:.1f} us, after {a * 1e3:.1f} us per call; "
              f"after/before {a / b:.3f}")
    print("load %.2f %.2f %.2f -> %.2f %.2f %.2f" % (load0 + os.getloadavg()))


if __name__ == "__main__":
    main()
