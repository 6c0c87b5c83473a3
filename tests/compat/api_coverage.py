"""Count the public torch APIs that ember also provides.

    python tests/compat/api_coverage.py            # the table
    python tests/compat/api_coverage.py --missing  # and the names ember lacks

For each namespace below, the public names are ``dir(namespace)`` without names that
start with ``_`` and without submodules (those are namespaces of their own). A name
counts as provided when the ember namespace of the same path has it (``hasattr``).
"""
import importlib
import sys
import types

import torch

import ember

NAMESPACES = ["torch", "torch.Tensor", "torch.nn", "torch.nn.functional", "torch.nn.init",
              "torch.nn.utils", "torch.optim", "torch.optim.lr_scheduler",
              "torch.utils.data", "torch.autograd", "torch.linalg"]


def _resolve(root, path):
    obj = root
    for part in path.split(".")[1:]:
        obj = getattr(obj, part, None)
        if obj is None:
            try:
                obj = importlib.import_module(root.__name__ + "." + part)
            except ImportError:
                return None
    return obj


def public_names(ns):
    return sorted(n for n in dir(ns) if not n.startswith("_")
                  and not isinstance(getattr(ns, n, None), types.ModuleType))


def coverage():
    """Yield (namespace, torch names, names ember lacks) for each namespace."""
    for path in NAMESPACES:
        tns, ens = _resolve(torch, path), _resolve(ember, path)
        names = public_names(tns)
        missing = [n for n in names if ens is None or not hasattr(ens, n)]
        yield path, names, missing


def main(argv):
    show = "--missing" in argv
    total = have = 0
    print(f"{'namespace':28s} {'torch':>6s} {'ember':>6s}   share")
    for path, names, missing in coverage():
        n, h = len(names), len(names) - len(missing)
        total, have = total + n, have + h
        print(f"{path:28s} {n:6d} {h:6d}   {100 * h / n:5.1f}%")
        if show and missing:
            print("    missing: " + ", ".join(missing))
    print(f"{'all':28s} {total:6d} {have:6d}   {100 * have / total:5.1f}%")


if __name__ == "__main__":
    main(sys.argv[1:])
