"""TorchScript archives (``torch.jit.save`` files) read and written exactly as PyTorch does.

An archive is a zip whose records sit under one directory ``<name>/``:

- ``data.pkl``: the module tree, pickled (protocol 2); each module is an object of
  class ``__torch__.<qualified name>`` built with NEWOBJ and filled by BUILD with a
  dict of its attributes; tensors are persistent ids ``('storage', torch.FloatStorage,
  key, 'cpu', numel)`` whose bytes are ``data/<key>``.
- ``constants.pkl``: a tuple of the tensors the code reads as ``CONSTANTS.cN``,
  storages under ``constants/<key>``.
- ``code/__torch__/<module path>.py``: the TorchScript source of every class and free
  function, one file per qualified module path (``.debug_pkl`` beside them maps code
  to Python source ranges; optional, ember neither needs nor writes it).
- ``version`` (3, or the newest operator version the code calls: see
  :func:`_file_version`), ``byteorder``, ``.data/serialization_id``, and ``extra/<name>``
  for ``_extra_files``.

Reading reuses :mod:`ember.serialization`: its archive reader (records, storages,
damage reports) and its weights-only unpickler, widened only to build the archive's
own ``__torch__`` classes as inert records. All code is parsed and validated before
anything runs, and nothing in the file is executed as Python.
"""
import collections
import io
import os
import pickle
import re
import uuid
import zipfile

from ember import serialization as _ser
from ember.jit._errors import ArchiveError, ScriptSafetyError
from ember.jit._interpreter import CompilationUnit
from ember.jit._module import RecursiveScriptModule, annotate_self

__all__ = ["load_archive", "save_archive"]


# ----- reading -------------------------------------------------------------------------------
def _damaged(e):
    msg = str(e).replace("checkpoint damaged", "TorchScript archive damaged")
    return ArchiveError(msg)


class _Pending:
    """An object of an archive class while data.pkl is unpickled: state only, no code."""

    _qual = None

    def __setstate__(self, state):
        self.__dict__["_state"] = state


def _restore_type_tag(u, args):
    if not 1 <= len(args) <= 2:
        raise _ser.CheckpointError("checkpoint damaged: restore_type_tag with "
                                   f"{len(args)} arguments")
    return args[0]  # the value itself: its container was made by this load, or is immutable


def _build_list(u, args):
    if len(args) != 1 or type(args[0]) not in (list, tuple):
        raise _ser.CheckpointError("checkpoint damaged: a typed list of a non-list")
    u.charge(len(args[0]), "build_list")
    return list(args[0])


# torch.jit._pickle's helpers: (builder, whether the result is a new object)
_JIT_PICKLE = {"restore_type_tag": (_restore_type_tag, False),
               "build_intlist": (_build_list, True), "build_doublelist": (_build_list, True),
               "build_boollist": (_build_list, True), "build_tensorlist": (_build_list, True)}


class _JitUnpickler(_ser._Unpickler):
    """ember's one restricted unpickler, plus inert records for the archive's own
    ``__torch__`` classes (made by NEWOBJ, filled by BUILD) and torch.jit's list helpers."""

    def __init__(self, data, archive, map_location, part):
        super().__init__(data, archive, map_location, None, record=part)
        self._pending = {}
        self._part = part
        self._helpers = {}
        for name, (builder, created) in _JIT_PICKLE.items():
            # one marker object per helper: what a GLOBAL of it pushes and REDUCE calls
            marker = type(name, (), {"__slots__": ()})
            self._helpers[name] = marker
            self._builders[id(marker)] = (marker, builder, created)

    def find_class(self, module, name):
        if module == "__torch__" or module.startswith("__torch__."):
            qual = f"{module}.{name}"
            cls = self._pending.get(qual)
            if cls is None:
                cls = self._pending[qual] = type(name, (_Pending,), {"_qual": qual})
            return cls
        if module == "torch.jit._pickle" and name in self._helpers:
            return self._helpers[name]
        try:
            return super().find_class(module, name)
        except pickle.UnpicklingError as e:
            raise ScriptSafetyError(f"TorchScript archive's {self._part}: {e}") from None

    def newobj(self, cls, args):
        if isinstance(cls, type) and self._pending.get(cls._qual if issubclass(cls, _Pending)
                                                       else None) is cls:
            if args:
                raise _ser.CheckpointError(f"checkpoint damaged: NEWOBJ of {cls._qual} with "
                                           "arguments")
            return cls(), True
        return super().newobj(cls, args)

    def build(self, inst, state):
        if isinstance(inst, _Pending):
            if "_state" in inst.__dict__:
                raise _ser.CheckpointError(f"checkpoint damaged: {inst._qual} built twice")
            inst.__setstate__(state)
            return True
        return super().build(inst, state)


class _JitArchive(_ser._Archive):
    max_version = 10  # torch writes 3 to 10 by the operators a model uses (PyTorch 2.x)

    def __init__(self, f):
        try:
            super().__init__(f)
        except _ser.CheckpointError as e:
            raise _damaged(e) from None

    def read(self, name):
        try:
            return super().read(name)
        except _ser.CheckpointError as e:
            raise _damaged(e) from None

    def read_storage(self, key, dtype, numel, mmap_file):
        try:
            return super().read_storage(key, dtype, numel, mmap_file)
        except _ser.CheckpointError as e:
            raise _damaged(e) from None


class _ConstantsView:
    """The archive seen by constants.pkl's unpickler: storages live in ``constants/``."""

    def __init__(self, archive):
        self._a = archive

    def read_storage(self, key, dtype, numel, mmap_file):
        self._a.storage_dir = "constants"
        try:
            return self._a.read_storage(key, dtype, numel, mmap_file)
        finally:
            self._a.storage_dir = "data"


def _unpickle(archive, record, map_location, view=None):
    data = archive.read(record)
    unpickler = _JitUnpickler(data, view or archive, map_location, record)
    try:
        return unpickler.load()
    except (ArchiveError, ScriptSafetyError):
        raise
    except pickle.UnpicklingError as e:  # a refusal: the pickle does what archives never do
        raise ScriptSafetyError(f"TorchScript archive's {record}: {e}") from None
    except _ser.CheckpointError as e:
        raise _damaged(e) from None


# TorchScript code of real models is kilobytes to a few megabytes per file
_MAX_CODE_BYTES = 16 << 20


def _code_files(archive):
    """(qualified module path, record name) for every code file, in a stable order."""
    out = []
    base = archive.prefix + "code/"
    for name in sorted(archive.names):
        if name.startswith(base) and name.endswith(".py"):
            rel = name[len(base):-len(".py")]
            parts = rel.split("/")
            if not parts or parts[0] != "__torch__" or any(
                    not p.isidentifier() for p in parts):
                raise ScriptSafetyError(f"TorchScript archive has a code file outside "
                                        f"__torch__: {name}")
            out.append((".".join(parts), name[len(archive.prefix):]))
    return out


def load_archive(f, map_location=None, _extra_files=None):
    """Build a RecursiveScriptModule from a TorchScript archive (path or file object)."""
    if isinstance(f, (str, os.PathLike)):
        if not os.path.exists(f):
            raise ValueError(f"The provided filename {os.fspath(f)} does not exist")
        if os.path.isdir(f):
            raise ValueError(f"The provided filename {os.fspath(f)} is a directory")
    with _JitArchive(f) as archive:
        return _load(archive, map_location, _extra_files)


def _load(archive, map_location, _extra_files):
    code = _code_files(archive)
    if not code:
        raise ArchiveError("TorchScript archive damaged: it has no code/ records (is it a "
                           "torch.save checkpoint? load that with ember.load)")
    constants = ()
    if archive.prefix + "constants.pkl" in archive.names:
        constants = _unpickle(archive, "constants.pkl", map_location,
                              _ConstantsView(archive))
        if not isinstance(constants, tuple):
            raise ArchiveError("TorchScript archive damaged: constants.pkl is not a tuple")
    cu = CompilationUnit(constants)
    for qual_path, record in code:  # parse and validate everything before anything runs
        size = archive.infos[archive.prefix + record].file_size
        if size > _MAX_CODE_BYTES:  # the zip reader stops at this size; parsing is linear
            raise ScriptSafetyError(f"TorchScript archive's {record} holds {size} bytes of "
                                    f"code; ember parses at most {_MAX_CODE_BYTES} per file")
        raw = archive.read(record)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ArchiveError(f"TorchScript archive damaged: {record} is not UTF-8 "
                               "text") from None
        cu.define(text, qual_path, f"{archive.prefix}{record}")
    cu.check_methods()
    cu.warn_missing("this TorchScript archive", stacklevel=4)  # the caller of jit.load
    root = _unpickle(archive, "data.pkl", map_location)
    try:
        module = _build(root, cu, {})
    except RecursionError:
        raise ArchiveError("TorchScript archive refused: data.pkl nests its values deeper "
                           "than ember builds them (Python's recursion limit)") from None
    if not isinstance(module, RecursiveScriptModule):
        raise ArchiveError("TorchScript archive damaged: data.pkl does not hold a module")
    module.__dict__["_jit_cu"] = cu
    if _extra_files is not None:
        for name in list(_extra_files):
            rec = archive.prefix + "extra/" + name
            if rec in archive.names:
                _extra_files[name] = archive.read("extra/" + name)
    return module


def _build(obj, cu, memo):
    """Turn unpickled records into script modules (and plain values) by their classes."""
    if isinstance(obj, _Pending):
        if id(obj) in memo:
            return memo[id(obj)]
        cls = cu.classes.get(obj._qual)
        if cls is None:
            raise ArchiveError(f"TorchScript archive damaged: data.pkl uses class "
                               f"{obj._qual} but no code/ file defines it")
        state = obj.__dict__.get("_state")
        if cls.kind == "class" and isinstance(state, dict) and "__setstate__" not in \
                cls.methods:
            from ember.jit._module import ScriptObject
            so = memo[id(obj)] = ScriptObject(cls, {})
            so._jit_state.update((k, _build(v, cu, memo)) for k, v in state.items())
            return so
        if cls.kind != "module":
            raise NotImplementedError(f"TorchScript archive holds an object of script class "
                                      f"{obj._qual}; ember loads module objects only")
        if not isinstance(state, dict) or "__setstate__" in cls.methods:
            raise NotImplementedError(f"{obj._qual} is restored by __setstate__ code, which "
                                      "ember's loader does not run")
        from ember.nn.parameter import Parameter
        params, buffers, modules, attrs = {}, {}, {}, {}
        for name in cls.parameters:
            t = state.get(name)
            if t is not None:  # a tensor pickled twice (tied weights) is one Parameter
                key = ("param", id(t))
                if key not in memo:
                    memo[key] = Parameter(t, t.requires_grad)
                t = memo[key]
            params[name] = t
        for name in cls.buffers:
            buffers[name] = state.get(name)
        # a loaded module prints its code in SSA form and runs its calls as PyTorch's
        # executor does, whether it was scripted or traced (see ScriptClass.scripted)
        cls.scripted = True
        sm = RecursiveScriptModule(cls, params, buffers, modules, attrs)
        memo[id(obj)] = sm
        for name, value in state.items():
            if name in params or name in buffers:
                continue
            value = _build(value, cu, memo)
            if isinstance(value, RecursiveScriptModule):
                modules[name] = value
            else:
                sm.__dict__[name] = value
        return sm
    if isinstance(obj, (list, tuple, dict)):
        # once per container: a pickle may share one list many times over (a DAG that
        # would take exponential time to walk as a tree), and torch keeps it shared
        key = ("value", id(obj))
        if key in memo:
            return memo[key]
        if isinstance(obj, list):
            out = memo[key] = []
            out.extend(_build(v, cu, memo) for v in obj)
        elif isinstance(obj, dict):
            out = memo[key] = {}
            out.update((k, _build(v, cu, memo)) for k, v in obj.items())
        else:
            out = memo[key] = tuple(_build(v, cu, memo) for v in obj)
        return out
    return obj


# ----- writing -------------------------------------------------------------------------------
class _JitPickler(_ser._TorchPickler):
    """Pickles script modules as ``__torch__`` objects and every tensor as a plain tensor."""

    def save(self, obj, save_persistent_id=True):
        if isinstance(obj, RecursiveScriptModule):
            memo = self.memo.get(id(obj))
            if memo is not None:
                return self.write(self.get(memo[0]))
            module, _, name = obj._jit_class.qualname.rpartition(".")
            self.save_global(_ser._Global(module, name))
            self.write(pickle.EMPTY_TUPLE + pickle.NEWOBJ)
            self.memoize(obj)
            self.save(_module_state(obj))
            self.write(pickle.BUILD)
            return None
        from ember.jit import _script_classes as SC
        from ember.jit._module import ScriptObject
        if isinstance(obj, ScriptObject):
            memo = self.memo.get(id(obj))
            if memo is not None:
                return self.write(self.get(memo[0]))
            cls = obj._jit_class
            module, _, name = cls.qualname.rpartition(".")
            self.save_global(_ser._Global(module, name))
            self.write(pickle.EMPTY_TUPLE + pickle.NEWOBJ)
            self.memoize(obj)
            self.save({n: _tag(obj._jit_state.get(n), cls.attributes[n])
                       for n in cls.attributes if n in obj._jit_state})
            self.write(pickle.BUILD)
            return None
        if SC.fields(type(obj)) and SC.is_plain_class(type(obj)):
            # an object of a plain class: a TorchScript class object, its attributes
            # typed as the class declares them
            memo = self.memo.get(id(obj))
            if memo is not None:
                return self.write(self.get(memo[0]))
            module, _, name = SC.qualname(type(obj)).rpartition(".")
            self.save_global(_ser._Global(module, name))
            self.write(pickle.EMPTY_TUPLE + pickle.NEWOBJ)
            self.memoize(obj)
            self.save({n: _tag(obj.__dict__.get(n), str(t))
                       for n, t in SC.fields(type(obj)).items()})
            self.write(pickle.BUILD)
            return None
        return super().save(obj, save_persistent_id)

    def _save_reduce_tensor(self, t):
        if t.grad_fn is not None:
            t = t.detach()
        storage, offset, stride = self._storage_of(t._host())
        args = (storage, offset, tuple(t.shape), stride, t.requires_grad,
                collections.OrderedDict())
        self.save_reduce(_ser._Global("torch._utils", "_rebuild_tensor_v2"), args, obj=t)


class _Tagged:
    """A list or dict attribute with its TorchScript type, pickled the way torch reads it."""

    def __init__(self, value, type_s):
        self.value, self.type_s = value, type_s


_TYPED_LISTS = {"Tensor": "build_tensorlist", "int": "build_intlist",
                "float": "build_doublelist", "bool": "build_boollist"}


def _split_args(s):
    """``"str, List[int]"`` -> ``["str", "List[int]"]`` (commas at the top level only)."""
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
            continue
        depth += ch == "["
        depth -= ch == "]"
        cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _tag(value, type_s):
    """Attach TorchScript container types to a value (recursively) for the pickler."""
    if type_s is None or value is None:
        return value
    head, _, rest = type_s.partition("[")
    args = _split_args(rest[:-1]) if rest else []
    if head == "Optional" and args:
        return _tag(value, args[0])
    if head == "List" and args and isinstance(value, list):
        return _Tagged([_tag(v, args[0]) for v in value], type_s)
    if head == "Dict" and len(args) == 2 and isinstance(value, dict):
        return _Tagged({k: _tag(v, args[1]) for k, v in value.items()}, type_s)
    if head == "Tuple" and isinstance(value, tuple) and len(args) == len(value):
        return tuple(_tag(v, t) for v, t in zip(value, args))
    return value


def _save_tagged(pickler, obj):
    head, _, rest = obj.type_s.partition("[")
    builder = _TYPED_LISTS.get(rest[:-1]) if head == "List" else None
    if builder is not None:
        pickler.save_reduce(_ser._Global("torch.jit._pickle", builder), (obj.value,), obj=obj)
    else:
        pickler.save_reduce(_ser._Global("torch.jit._pickle", "restore_type_tag"),
                            (obj.value, obj.type_s), obj=obj)


_JitPickler.dispatch = dict(_ser._TorchPickler.dispatch)
_JitPickler.dispatch[_Tagged] = _save_tagged


def _module_state(sm):
    """The attribute dict that data.pkl stores for one module, in declaration order."""
    state = {}
    for name, p in sm._parameters.items():
        state[name] = p
    for name, b in sm._buffers.items():
        state[name] = b
    d = sm.__dict__
    for name in sm._jit_class.attributes:
        if name in state or name in sm._modules:
            continue
        state[name] = _tag(d.get(name), sm._jit_class.attributes[name])
    for name, child in sm._modules.items():
        state[name] = child
    return state


_IDENT_OK = str.isidentifier


def _class_source(sm):
    """The ``class X(Module):`` text for a script module's class, as torch writes it."""
    cls = sm._jit_class
    params = [n for n, p in sm._parameters.items() if p is not None]
    buffers = [n for n, b in sm._buffers.items() if b is not None]
    lines = [f"class {cls.name}(Module):",
             "  __parameters__ = [" + "".join(f'"{n}", ' for n in params) + "]",
             "  __buffers__ = [" + "".join(f'"{n}", ' for n in buffers) + "]"]
    declared = set()

    def decl(name, type_s):
        declared.add(name)
        if _IDENT_OK(name):
            lines.append(f"  {name} : {type_s}")
        else:
            lines.append(f'  __annotations__["{name}"] = {type_s}')
    for name, p in sm._parameters.items():
        decl(name, "Tensor" if p is not None else "NoneType")
    for name, b in sm._buffers.items():
        decl(name, "Tensor" if b is not None else "NoneType")
    for name, t in cls.attributes.items():
        if name not in declared and name not in sm._modules:
            decl(name, t)
    if "training" not in declared:
        decl("training", "bool")
    for name, child in sm._modules.items():
        decl(name, child._jit_class.qualname)
    for name, value in cls.constants.items():
        lines.append(f"  {name} : {cls.const_types[name]} = {value!r}")
    for src in cls.method_sources.values():
        src = annotate_self(src, cls.qualname)
        lines.extend("  " + ln if ln.strip() else ln for ln in src.splitlines())
    return "\n".join(lines) + "\n"


def _collect(root):
    """{qualified module path: [source, ...]} for every class and function to write."""
    files = collections.OrderedDict()
    seen = set()
    stack = [root]
    while stack:
        sm = stack.pop(0)
        if id(sm) in seen:
            continue
        seen.add(id(sm))
        qual = sm._jit_class.qualname
        path, _, _ = qual.rpartition(".")
        entry = files.setdefault(path, collections.OrderedDict())
        if qual not in entry:
            entry[qual] = _class_source(sm)
        stack.extend(sm._modules.values())
        _collect_plain_classes(sm, files)
    cu = root._jit_cu
    if cu is not None:
        for qual, src in cu.function_sources.items():
            path, _, _ = qual.rpartition(".")
            files.setdefault(path, collections.OrderedDict()).setdefault(qual, src + "\n")
        for qual, cls in cu.classes.items():
            text = getattr(cls, "source", None)
            if cls.kind != "module" and text:
                path, _, _ = qual.rpartition(".")
                files.setdefault(path, collections.OrderedDict()).setdefault(qual, text + "\n")
    return files


def _collect_plain_classes(sm, files):
    """The ``class X:`` declarations of the plain classes whose objects ``sm`` holds."""
    from ember.jit import _script_classes as SC
    d = sm.__dict__
    todo = set()
    for name in sm._jit_class.attributes:
        if name in d:
            todo |= SC.classes_in(d[name])
    done = set()
    while todo:
        klass = todo.pop()
        done.add(klass)
        qual = SC.qualname(klass)
        path, _, short = qual.rpartition(".")
        lines = [f"class {short}:"]
        for n, t in SC.fields(klass).items():
            lines.append(f"  {n} : {t}")
            todo |= {k for k in _classes_of_type(t) if k not in done}
        files.setdefault(path, collections.OrderedDict()).setdefault(
            qual, "\n".join(lines) + "\n")


def _classes_of_type(t):
    from ember.jit import _script_classes as SC
    return {k for k in SC.known_classes() if SC.qualname(k) in str(t)}


def save_archive(sm, f, _extra_files=None):
    """Write ``sm`` as a TorchScript archive to a path (atomically) or a binary file."""
    files = _collect(sm)
    storages = {}
    data = io.BytesIO()
    _JitPickler(data, storages).dump(sm)
    const_storages = {}
    consts = io.BytesIO()
    cu = sm._jit_cu
    _JitPickler(consts, const_storages).dump(tuple(cu.constants) if cu is not None else ())
    extra = {}
    for name, content in (_extra_files or {}).items():
        extra[name] = content.encode("utf-8") if isinstance(content, str) else bytes(content)
    if isinstance(f, (str, os.PathLike)):
        from ember.utils._atomic import atomic_write
        archive = os.path.splitext(os.path.basename(os.fspath(f)))[0] or "archive"
        with atomic_write(f, "wb") as fh:
            _write(fh, archive, files, data.getvalue(), storages, consts.getvalue(),
                   const_storages, extra)
    else:
        _write(f, "archive", files, data.getvalue(), storages, consts.getvalue(),
               const_storages, extra)


def _storage_bytes(root):
    import numpy as np
    little = root.astype(root.dtype.newbyteorder("<"), copy=False)
    return memoryview(np.ascontiguousarray(little)).cast("B") if little.size else b""


# The file format version at which an aten operator's meaning last changed (PyTorch's
# operator version map, ``torch._C._get_operator_version_map()``). torch.jit.load runs an
# archive of an older version through that operator's upgrader: ``torch.div`` of two
# integer tensors in a version-3 file is rounded toward zero, as before true division.
# So a file calling one of them says it was written after the change, as torch's does.
_OPERATOR_VERSIONS = (
    (re.compile(r"\b(div_?|true_divide_?)\(|\s/\s"), 4),
    (re.compile(r"\bfull\("), 5),
    (re.compile(r"\blinspace\("), 8),
    (re.compile(r"\blogspace\("), 9),
    (re.compile(r"\bgelu_?\("), 10),
)


def _file_version(files):
    """The archive's ``version`` record: 3, or the newest operator version its code
    calls (:data:`_OPERATOR_VERSIONS`)."""
    code = "\n".join(src for sources in files.values() for src in sources.values())
    return max([3] + [v for pattern, v in _OPERATOR_VERSIONS if pattern.search(code)])


def _write(fh, archive, files, data, storages, consts, const_storages, extra):
    w = _ser._aligned_write
    with zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED) as zf:
        for name, content in extra.items():
            w(zf, f"{archive}/extra/{name}", content)
        for key, root in storages.values():
            w(zf, f"{archive}/data/{key}", _storage_bytes(root))
        w(zf, f"{archive}/data.pkl", data)
        for path, sources in files.items():
            rel = path.replace(".", "/")
            w(zf, f"{archive}/code/{rel}.py", "\n".join(sources.values()).encode("utf-8"))
        for key, root in const_storages.values():
            w(zf, f"{archive}/constants/{key}", _storage_bytes(root))
        w(zf, f"{archive}/constants.pkl", consts)
        w(zf, f"{archive}/version", f"{_file_version(files)}\n".encode())
        w(zf, f"{archive}/byteorder", b"little")
        w(zf, f"{archive}/.data/serialization_id", str(uuid.uuid4().int).encode())
