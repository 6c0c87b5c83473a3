"""Count what ember provides: primitives (ops with their own derivative), public
functions, Tensor methods, nn modules; and, when torch is importable, which of torch's
public names ember has.

    python tools/inventory.py              # the counts and the coverage table
    python tools/inventory.py --missing    # and, per namespace, the names ember lacks

Coverage of torch's public API, namespace by namespace (``NAMESPACES``):

- the public names of a torch namespace are its ``__all__`` where it has one (PyTorch's
  own definition of its public API), else ``dir()``; for ``torch`` and ``torch.Tensor``
  always ``dir()`` (``torch.__all__`` leaves out ``unique``, ``set_default_dtype``...).
  Names starting with ``_``, submodules (namespaces of their own) and what a namespace
  merely imports (``typing.Callable``, ``torch.Tensor`` inside ``torch.nn.init``,
  ``pathlib.Path`` inside ``torch.hub``) are not names of that namespace;
- ``EXCLUDED`` leaves out, with the reason for each group, names that are CUDA- or
  accelerator-only, backend-specific kernels, quantization, sparse compressed and nested
  layouts, and torch internals reachable from a public namespace;
- a name is covered when the ember namespace of the same path has it (``hasattr``);
  ``NOT_APPLICABLE`` lists the few ember defines only to raise ``NotImplementedError``
  and says why each is not applicable;
"""
import importlib
import inspect
import re
import sys
import types

import ember
import ember.nn
from ember.autograd.node import Primitive


def _subclasses(cls):
    seen, stack = set(), [cls]
    while stack:
        for sub in stack.pop().__subclasses__():
            if sub not in seen:
                seen.add(sub)
                stack.append(sub)
    return seen


NAMESPACES = [
    "torch", "torch.Tensor", "torch.nn", "torch.nn.functional", "torch.nn.init",
    "torch.nn.utils", "torch.nn.utils.parametrize", "torch.nn.utils.parametrizations",
    "torch.nn.utils.prune", "torch.nn.utils.rnn", "torch.linalg", "torch.fft",
    "torch.special", "torch.autograd", "torch.autograd.functional",
    "torch.autograd.forward_ad", "torch.autograd.graph", "torch.optim",
    "torch.optim.lr_scheduler", "torch.utils.data", "torch.utils.data.distributed",
    "torch.utils.checkpoint", "torch.distributions", "torch.func", "torch.jit",
    "torch.onnx", "torch.testing", "torch.masked", "torch.profiler", "torch.amp",
    "torch.random", "torch.signal.windows", "torch.hub",
]
# not counted: torch.cuda, torch.backends.cudnn, torch.mps, torch.xpu (accelerator-only
# namespaces), torch.sparse (mostly compressed layouts), torch.distributed (its own
# subsystem, docs/distributed.md), torch._* (private)

# (namespace regex, name regex, why it is left out). Each group is argued once.
EXCLUDED = [
    # --- accelerators and backend-specific kernels
    (r".*", r"^(cudnn_|miopen_|mkldnn_|fbgemm_)|^(to_mkldnn|is_vulkan_available)$",
     "kernels of one backend library (cuDNN, MIOpen, oneDNN, FBGEMM); the portable op is "
     "counted under its own name"),
    (r".*", r"(^|_)(cuda|xpu|mps|mtia|ipu|hpu|xla|gpu|cupti|cudagraph|stream)(_|$)|"
     r"^(Stream|Event|AcceleratorError|OutOfMemoryError|record_stream|StreamObjType)$",
     "CUDA/accelerator-only: devices, streams, events and their errors, which a CPU "
     "build of torch cannot use either"),
    (r"^torch$", r"^batch_norm_(stats|elemt|gather_stats|gather_stats_with_counts|"
     r"backward_elemt|backward_reduce|update_stats)$",
     "the kernels of SyncBatchNorm's multi-GPU path"),
    (r"^torch\.nn\.functional$", r"^(scaled_mm|scaled_grouped_mm|grouped_mm|ScalingType|"
     r"SwizzleType)$",
     "low-precision (FP8/MX) grouped and scaled matmuls for CUDA tensor cores"),
    # --- quantization (fake quantization on float tensors is counted: ember has it)
    (r".*", r"^(quantize_|quantized_|q_|fake_quantize(?!_per_(tensor|channel)_affine$)|"
     r"dequantize$|int_repr$|"
     r"choose_qparams|fused_moving_avg_obs_fake_quant$|empty_quantized$|qscheme$|"
     r"per_(tensor|channel)_|^qu?int\d+(x\d+)?$|QU?Int\w*Storage$)",
     "quantized tensors (qint8, quint8, per-tensor/per-channel schemes): a separate "
     "runtime of int kernels ember does not model"),
    # --- layouts ember does not have
    (r".*", r"sparse_(csc|bsr|bsc|compressed)|(^|_)(ccol|row)_indices|"
     r"^jagged$|^to_padded_tensor$|SparseSemiStructured|semi_structured|^spsolve$",
     "sparse compressed layouts other than CSR (CSC/BSR/BSC), semi-structured and nested "
     "(jagged) layouts; ember's sparse support is COO and CSR"),
    (r"^torch$", r"^(bit|bits\d\w*|u?int[1-7]|float4_e2m1fn_x2)$",
     "shell dtypes: torch allocates them but defines no arithmetic on them (sub-byte "
     "and packed types for custom kernels)"),
    # --- torch's C++ runtime, re-exported at the top level
    (r"^torch$", r"^(AliasDb|Argument|ArgumentSpec|Block|BufferDict|CallStack|Capsule|"
     r"Code|CompilationUnit|CompleteArgumentSpec|ConcreteModuleType|"
     r"ConcreteModuleTypeBuilder|DeepCopyMemoTable|ErrorReport|ExecutionPlan|FileCheck|"
     r"FunctionSchema|Future|Gradient|Graph|GraphExecutorState|IODescriptor|"
     r"LiteScriptModule|ModuleDict|Node|OperatorInfo|ParameterDict|ScriptClass|"
     r"ScriptClassFunction|ScriptDict\w*|ScriptFunction|ScriptList\w*|ScriptMethod|"
     r"ScriptModule|ScriptModuleSerializer|ScriptObject|ScriptObjectProperty|"
     r"StaticModule|TracingState|Use|Value|\w+Type|JITException|parse_ir|parse_schema|"
     r"parse_type_comment|merge_type_from_type_comment|unify_type_list|"
     r"import_ir_module|import_ir_module_from_buffer|fork|wait|PRIVATE_OPS|Type|"
     r"FatalError)$",
     "TorchScript's C++ IR and runtime classes that `from torch._C import *` leaves at "
     "the top level (the user-facing ones, ScriptModule, ScriptFunction, fork, wait, are "
     "counted in torch.jit)"),
    (r"^torch$", r"^(DispatchKey|DispatchKeySet|ExcludeDispatchKeyGuard|Tag|"
     r"DisableTorchFunction|DisableTorchFunctionSubclass|PyTorchFileReader|"
     r"PyTorchFileWriter|SerializationStorageContext|DeserializationStorageContext|"
     r"ThroughputBenchmark|BenchmarkConfig|BenchmarkExecutionStats|LockingLogger|"
     r"NoopLogger|LoggerBase|AggregationType|AVG|SUM|StorageBase|classproperty|"
     r"get_file_path|prepare_multiprocessing_environment|USE_GLOBAL_DEPS|"
     r"USE_RTLD_GLOBAL_WITH_LIBTORCH|compiled_with_cxx11_abi)$",
     "the C++ dispatcher, its file reader/writer, benchmark and logging classes and "
     "library-loading flags: torch internals with no counterpart in a Python framework"),
    (r"^torch$", r"^(SymInt|SymFloat|SymBool|sym_fresh_size|"
     r"sym_constrain_range|sym_constrain_range_for_size)$",
     "symbolic-shape types and constraints, which exist only while torch.compile/export "
     "trace with symbolic sizes (ember's compile traces concrete shapes)"),
    (r"^torch$", r"^(autocast_increment_nesting|autocast_decrement_nesting|"
     r"clear_autocast_cache|is_autocast_cache_enabled|set_autocast_cache_enabled)$",
     "autocast's kernel-cache bookkeeping; ember has no autocast dispatch (see "
     "docs/compatibility.md)"),
    (r".*", r"_notes$", "fragments of docstring text (dicts of notes torch's docs reuse)"),
    # --- legacy storages
    (r"^torch$", r"^(?!Untyped)\w*Storage$",
     "typed storages, deprecated since torch 2.0 (TypedStorage warns when used); the "
     "untyped storage is counted"),
    (r"^torch\.Tensor$", r"^(storage|storage_type)$",
     "return the deprecated TypedStorage (see above)"),
    # --- __torch_function__ / TorchScript helpers
    (r".*", r"^(handle_torch_function|has_torch_function\w*|is_tensor_like|"
     r"BroadcastingList\d|boolean_dispatch|TYPE_CHECKING)$",
     "the __torch_function__ override protocol and TorchScript annotation helpers: "
     "ember has no override dispatch (an op is a Python class)"),
]

# names ember defines only to raise NotImplementedError (counted as covered), and why
NOT_APPLICABLE = {}

# objects a namespace imports from elsewhere: not names of that namespace
_FOREIGN_ROOTS = {"typing", "typing_extensions", "collections", "__future__", "functools",
                  "abc", "math", "enum", "dataclasses", "pathlib", "urllib", "datetime",
                  "tqdm", "contextlib", "warnings", "weakref", "os", "copy", "io", "sys",
                  "builtins"}


def _stub_function(fn):
    """True when ``fn``'s body (after its docstring) only raises NotImplementedError."""
    import ast
    import textwrap
    fn = inspect.unwrap(fn) if callable(fn) else fn
    if not (inspect.isfunction(fn) or inspect.ismethod(fn)):
        return False
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return False
    body = tree.body[0].body if tree.body and hasattr(tree.body[0], "body") else []
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None),
                                                             ast.Constant):
        body = body[1:]
    if len(body) != 1 or not isinstance(body[0], ast.Raise) or body[0].exc is None:
        return False
    exc = body[0].exc.func if isinstance(body[0].exc, ast.Call) else body[0].exc
    return getattr(exc, "id", None) == "NotImplementedError"


def is_stub(obj):
    """True for an ember name that only raises NotImplementedError: a function whose
    body is that raise, or a class whose ``__new__``/``__init__`` is."""
    if inspect.isclass(obj):
        return any(_stub_function(obj.__dict__[m]) for m in ("__new__", "__init__")
                   if m in obj.__dict__ and inspect.isfunction(obj.__dict__[m]))
    return _stub_function(obj)


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


def _imported(torch, path, name, obj):
    if isinstance(obj, types.ModuleType):
        return True
    if path != "torch" and any(obj is o for o in _common_imports(torch)):
        return True
    if inspect.isclass(obj) or inspect.isfunction(obj):
        mod = getattr(obj, "__module__", None) or ""
        return mod.split(".")[0] in _FOREIGN_ROOTS
    # typing constructs (Optional, Union[...]) are annotations, not API
    return type(obj).__module__.split(".")[0] in ("typing", "typing_extensions")


def _common_imports(torch):
    import torch.nn
    import torch.optim
    import torch.utils.data
    return (torch.Tensor, torch.nn.Module, torch.nn.Parameter, torch.optim.Optimizer,
            torch.utils.data.Dataset, torch.utils.data.Sampler, torch.device, torch.dtype,
            torch.Size, torch.Generator, float("inf"))


def public_names(torch, path):
    """The public names of torch's namespace ``path`` (see the module docstring)."""
    ns = _resolve(torch, path)
    if ns is None:
        return []
    names = getattr(ns, "__all__", None) if path not in ("torch", "torch.Tensor") else None
    if names is None:
        names = dir(ns)
    out = []
    for n in sorted(set(names)):
        if n.startswith("_") or not hasattr(ns, n):
            continue
        if not _imported(torch, path, n, getattr(ns, n)):
            out.append(n)
    return out


def excluded_reason(path, name):
    """Why torch's ``path.name`` is left out of the count, or None."""
    for ns_re, name_re, why in EXCLUDED:
        if re.match(ns_re, path) and re.search(name_re, name):
            return why
    return None


def coverage():
    """A dict per namespace: names counted, covered, missing, excluded ({name: why})."""
    import torch
    rows = []
    for path in NAMESPACES:
        names = public_names(torch, path)
        ens = _resolve(ember, path)
        excluded = {n: excluded_reason(path, n) for n in names}
        excluded = {n: why for n, why in excluded.items() if why}
        counted = [n for n in names if n not in excluded]
        missing = [n for n in counted if ens is None or not hasattr(ens, n)
                   or (is_stub(getattr(ens, n)) and (path, n) not in NOT_APPLICABLE)]
        rows.append({"namespace": path, "counted": counted, "missing": missing,
                     "covered": len(counted) - len(missing), "excluded": excluded})
    return rows


def overall(rows):
    total = sum(len(r["counted"]) for r in rows)
    return sum(r["covered"] for r in rows), total


def print_coverage(show_missing):
    rows = coverage()
    print("\ncoverage of torch's public names (excluding CUDA-only, backend and internal "
          "names)")
    for r in rows:
        n = len(r["counted"])
        print(f"  {r['namespace']:32s} {r['covered']:4d}/{n:<4d} "
              f"{100 * r['covered'] / max(n, 1):5.1f}%  (excluded {len(r['excluded'])})")
        if show_missing and r["missing"]:
            marked = list(r["missing"])
            print("      missing: " + ", ".join(marked))
    have, total = overall(rows)
    print(f"  {'overall':32s} {have:4d}/{total:<4d} {100 * have / total:5.1f}%")
    if show_missing:
        why = {}
        for r in rows:
            for n, w in r["excluded"].items():
                why.setdefault(w, []).append(f"{r['namespace']}.{n}")
        print("\nexcluded:")
        for w, ns in why.items():
            print(f"  {len(ns):3d}  {w}")


def main(argv=()):
    prims = {c for c in _subclasses(Primitive) if "forward" in c.__dict__}
    funcs = [n for n in dir(ember) if not n.startswith("_") and callable(getattr(ember, n))
             and not inspect.isclass(getattr(ember, n))]
    methods = [n for n in dir(ember.Tensor) if not n.startswith("_")]
    modules = [n for n in dir(ember.nn) if inspect.isclass(getattr(ember.nn, n))
               and issubclass(getattr(ember.nn, n), ember.nn.Module)]
    fn = [n for n in dir(ember.nn.functional) if not n.startswith("_")
          and callable(getattr(ember.nn.functional, n))]
    print(f"primitives (forward + derivative): {len(prims)}")
    print(f"functions in ember: {len(funcs)}")
    print(f"Tensor methods and properties: {len(methods)}")
    print(f"nn modules: {len(modules)}")
    print(f"nn.functional functions: {len(fn)}")
    try:
        import torch  # noqa: F401
    except ImportError:
        print("torch is not importable: no coverage table")
        return
    print_coverage("--missing" in argv)


if __name__ == "__main__":
    main(sys.argv[1:])
