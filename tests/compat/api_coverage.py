"""Count the public torch APIs that ember also provides.

The "core" columns leave out PyTorch internals no program calls directly (cudnn_*/
miopen_*/fbgemm_* kernels, quantization, TorchScript IR classes from torch._C,
*Storage types, sym_* shape helpers, *_copy view variants).

    python tests/compat/api_coverage.py            # the table
    python tests/compat/api_coverage.py --missing  # and the names ember lacks

For each namespace below, the public names are ``dir(namespace)`` without names that
start with ``_``, without submodules (those are namespaces of their own) and without
what the namespace merely imports from Python's own modules (``typing.Callable``,
``math.inf``, ``__future__.annotations``). A name counts as provided when the ember
namespace of the same path has it (``hasattr``).
"""
import importlib
import re
import sys
import types

import torch

import ember

NAMESPACES = ["torch", "torch.Tensor", "torch.nn", "torch.nn.functional", "torch.nn.init",
              "torch.nn.utils", "torch.optim", "torch.optim.lr_scheduler",
              "torch.utils.data", "torch.autograd", "torch.linalg", "torch.sparse",
              "torch.amp", "torch.cuda"]


def _resolve(root, path):
    obj, name = root, root.__name__
    for part in path.split(".")[1:]:
        name = name + "." + part
        nxt = getattr(obj, part, None)
        if nxt is None:
            try:
                nxt = importlib.import_module(name)
            except ImportError:
                return None
        obj = nxt
    return obj


_FOREIGN = ("typing", "typing_extensions", "collections", "__future__", "functools",
            "abc", "math", "enum", "dataclasses")


def _foreign(obj):
    mod = getattr(obj, "__module__", None) or type(obj).__module__
    return isinstance(mod, str) and mod.split(".")[0] in _FOREIGN


def public_names(ns):
    return sorted(n for n in dir(ns) if not n.startswith("_")
                  and not isinstance(getattr(ns, n, None), types.ModuleType)
                  and not _foreign(getattr(ns, n, None)))


# backend kernels, TorchScript/IR types, quantization, storages, symbolic shapes: PyTorch
# internals that programs do not call; the "core" column leaves them out
_INTERNAL = re.compile(r"^(cudnn_|miopen_|mkldnn_|fbgemm_|quantize|quantized_|q_|sym_|"
                       r"fake_quantize|native_|batch_norm_|is_autocast|set_autocast|"
                       r"get_autocast|autocast_|_)|(Storage|Type|Iterator)$|_copy$")


def _internal(ns_path, name, obj):
    if _INTERNAL.search(name):
        return True
    mod = getattr(obj, "__module__", None)
    return ns_path == "torch" and isinstance(obj, type) and mod == "torch._C" and \
        not issubclass(obj, BaseException)


def coverage():
    """Yield (namespace, torch names, names ember lacks) for each namespace."""
    for path in NAMESPACES:
        tns, ens = _resolve(torch, path), _resolve(ember, path)
        names = public_names(tns)
        missing = [n for n in names if ens is None or not hasattr(ens, n)]
        core = [n for n in names if not _internal(path, n, getattr(tns, n, None))]
        yield path, names, missing, core


def main(argv):
    show = "--missing" in argv
    total = have = ctotal = chave = 0
    print(f"{'namespace':26s} {'torch':>6s} {'ember':>6s}  share | {'core':>5s} {'ember':>6s}"
          "  share")
    for path, names, missing, core in coverage():
        n, h = len(names), len(names) - len(missing)
        cn = len(core)
        ch = cn - len(set(missing) & set(core))
        total, have, ctotal, chave = total + n, have + h, ctotal + cn, chave + ch
        print(f"{path:26s} {n:6d} {h:6d} {100 * h / n:5.1f}% | {cn:5d} {ch:6d} "
              f"{100 * ch / max(cn, 1):5.1f}%")
        if show and missing:
            print("    missing (core): " + ", ".join(n for n in missing if n in core))
    print(f"{'all':26s} {total:6d} {have:6d} {100 * have / total:5.1f}% | {ctotal:5d} "
          f"{chave:6d} {100 * chave / ctotal:5.1f}%")


if __name__ == "__main__":
    main(sys.argv[1:])
