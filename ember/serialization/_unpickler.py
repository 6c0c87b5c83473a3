"""The restricted unpickler that reads every pickle ember loads with ``weights_only=True``
(checkpoints' ``data.pkl``, TorchScript archives' ``data.pkl`` and ``constants.pkl``).

It is its own opcode loop, not a ``pickle.Unpickler`` with a narrower ``find_class``: a
pickle can do harm without importing anything, by pointing BUILD (``setattr``),
SETITEM(S) or APPEND(S) at an object it did not make. So:

- only the opcodes ``torch.save`` writes (protocol 2) are read; any other is refused;
- a global is looked up in an allowlist (tensor rebuilds, storage types, dtypes,
  ``device``, ``Size``, ``OrderedDict``, ``Counter``, ``set``, ``bytearray``,
  ``complex``, ``_codecs.encode``) plus what the user added with ``add_safe_globals``;
  modules ``os``, ``sys``, ``posix``, ``nt`` are refused even then;
- REDUCE and NEWOBJ call only allowlisted callables, each through a builder that checks
  its arguments' types and charges what it allocates to a budget the size of the pickle,
  so no object grows larger than the file justifies (``bytearray(10**12)`` is refused);
- BUILD, SETITEM(S) and APPEND(S) act only on objects this load created (tracked by
  identity): lists, dicts, ``OrderedDict``/``Counter``, instances of allowlisted classes.
  Nothing that existed before the load (a dtype, a storage type, a class) can be changed.

Refusals raise ``pickle.UnpicklingError``; a pickle that is merely broken (truncated,
stack underflow, wrong argument types) raises ``CheckpointError`` naming the record.
"""
import _compat_pickle
import collections
import enum
import pickle
import pickletools
import struct
import types

from ember.serialization._allowlist import (
    _USER_SAFE,
    _default_allowlist,
    _LoadedStorage,
    _refuse,
    _StorageType,
)
from ember.serialization._format import CheckpointError

_BLOCKED_MODULES = ("os", "sys", "posix", "nt")
_BUDGET_FLOOR = 1 << 16  # allocations allowed to any pickle, however small


def _shared(obj):
    """Whether a constructor's result may be an object that existed before (an enum
    member, a class): BUILD must not touch those."""
    return isinstance(obj, (enum.Enum, type, types.ModuleType, types.FunctionType,
                            types.BuiltinFunctionType))


# ----- the opcode loop ------------------------------------------------------------------------
# the opcodes read: those torch.save writes (pickle protocol 2), as torch's reader
_PROTO = pickle.PROTO[0]
_STOP = pickle.STOP[0]
_GLOBAL = pickle.GLOBAL[0]
_REDUCE = pickle.REDUCE[0]
_NEWOBJ = pickle.NEWOBJ[0]
_BUILD = pickle.BUILD[0]
_BINPERSID = pickle.BINPERSID[0]
_MARK = pickle.MARK[0]
_TUPLE = pickle.TUPLE[0]
_TUPLE1 = pickle.TUPLE1[0]
_TUPLE2 = pickle.TUPLE2[0]
_TUPLE3 = pickle.TUPLE3[0]
_EMPTY_TUPLE = pickle.EMPTY_TUPLE[0]
_EMPTY_LIST = pickle.EMPTY_LIST[0]
_EMPTY_DICT = pickle.EMPTY_DICT[0]
_EMPTY_SET = pickle.EMPTY_SET[0]
_APPEND = pickle.APPEND[0]
_APPENDS = pickle.APPENDS[0]
_SETITEM = pickle.SETITEM[0]
_SETITEMS = pickle.SETITEMS[0]
_NONE = pickle.NONE[0]
_NEWTRUE = pickle.NEWTRUE[0]
_NEWFALSE = pickle.NEWFALSE[0]
_BININT = pickle.BININT[0]
_BININT1 = pickle.BININT1[0]
_BININT2 = pickle.BININT2[0]
_LONG1 = pickle.LONG1[0]
_BINFLOAT = pickle.BINFLOAT[0]
_BINUNICODE = pickle.BINUNICODE[0]
_SHORT_BINSTRING = pickle.SHORT_BINSTRING[0]
_BINGET = pickle.BINGET[0]
_LONG_BINGET = pickle.LONG_BINGET[0]
_BINPUT = pickle.BINPUT[0]
_LONG_BINPUT = pickle.LONG_BINPUT[0]
_ALL_NAMES = {op.code.encode("latin1")[0]: op.name for op in pickletools.opcodes}


class _EOF(Exception):
    pass


class _Unpickler:
    """Reads one pickle record of an archive under the rules in this module's docstring.

    ``data`` is the pickle's bytes, ``archive`` gives storages (``read_storage``).
    Subclasses widen it through ``find_class`` (more globals), ``newobj`` and ``build``
    (their own load-created objects).
    """

    def __init__(self, data, archive, map_location=None, mmap_file=None, record="data.pkl",
                 encoding="utf-8"):
        self._data = bytes(data)
        self._archive = archive
        self._map_location = map_location
        self._mmap = mmap_file
        self._record = record
        self._encoding = encoding
        self._storages = {}
        self._created = {}  # id -> object, for every object this load made
        self._budget = max(len(self._data), _BUDGET_FLOOR)
        self._allowed = _default_allowlist()
        self._user = dict(_USER_SAFE)
        self._user_ids = {id(v): v for v in self._user.values()}
        self._builders = {id(obj): (obj, b, c) for obj, b, c in self._allowed.values()
                          if b is not None}

    # ----- hooks --------------------------------------------------------------------------
    def find_class(self, module, name):
        """The object a GLOBAL names, or ``pickle.UnpicklingError``."""
        if module in _BLOCKED_MODULES or module.split(".")[0] in _BLOCKED_MODULES:
            raise _refuse(f"unsupported global {module}.{name}: module {module} is blocked. "
                          "Nothing was executed.")
        entry = self._allowed.get((module, name))
        if entry is not None:
            return entry[0]
        user = self._user.get(f"{module}.{name}")
        if user is not None:
            return user
        raise _refuse(f"unsupported global {module}.{name} in the checkpoint's pickle. "
                      "Nothing was executed. If you trust this class or function, allow it "
                      f"with ember.serialization.add_safe_globals([{name}]) (or the "
                      "safe_globals context manager); load with weights_only=False only "
                      "if you trust the file's source.")

    def newobj(self, cls, args):
        """NEWOBJ of ``cls``: (object, created by this load)."""
        entry = self._builders.get(id(cls))
        if entry is not None and entry[0] is cls and isinstance(cls, type):
            return entry[1](self, args), entry[2]
        if self._user_ids.get(id(cls)) is cls and isinstance(cls, type):
            obj = cls.__new__(cls, *args)
            return obj, type(obj) is cls and not _shared(obj)
        raise _refuse(f"NEWOBJ of {cls!r:.80}: only allowlisted classes can be created")

    def build(self, inst, state):
        """BUILD on an object this load created; False if this unpickler may not."""
        cls = type(inst)
        if cls in (collections.OrderedDict, collections.Counter):
            if state is None:
                return True
            if type(state) is not dict or any(type(k) is not str for k in state):
                raise CheckpointError("checkpoint damaged: an OrderedDict's state is not a "
                                      "dict of attribute names")
            self.charge(len(state), "BUILD")
            inst.__dict__.update(state)
            return True
        if self._user_ids.get(id(cls)) is cls:
            setstate = getattr(inst, "__setstate__", None)
            if setstate is not None and getattr(cls, "__setstate__", None) is not \
                    getattr(object, "__setstate__", None):
                setstate(state)
                return True
            slots = None
            if isinstance(state, tuple) and len(state) == 2:
                state, slots = state
            if state:
                if type(state) is not dict:
                    raise CheckpointError(f"checkpoint damaged: a {cls.__name__}'s state is "
                                          "not a dict")
                self.charge(len(state), "BUILD")
                inst.__dict__.update(state)
            if slots:
                if type(slots) is not dict:
                    raise CheckpointError(f"checkpoint damaged: a {cls.__name__}'s slot "
                                          "state is not a dict")
                for k, v in slots.items():
                    setattr(inst, k, v)
            return True
        return False

    def charge(self, n, what):
        """Count ``n`` units against the budget (the pickle's size): a small pickle cannot
        make a large object."""
        if n > self._budget:
            raise _refuse(f"{what} in {self._record} would build an object of {n} items, "
                          f"more than its {len(self._data)} bytes justify (a memory bomb)")
        self._budget -= n

    def persistent_load(self, pid):
        if type(pid) is not tuple or len(pid) != 5 or pid[0] not in ("storage", b"storage"):
            raise _refuse(f"unsupported persistent id {pid!r:.80} (only storages)")
        _, stype, key, location, numel = pid
        if type(stype) is not _StorageType:
            raise _refuse(f"unsupported storage type {stype!r:.80}")
        if type(key) is not str or type(location) is not str or type(numel) is not int or \
                numel < 0:
            raise CheckpointError(f"checkpoint damaged: bad storage reference {pid!r:.120}")
        cached = self._storages.get(key)
        if cached is not None:
            return cached
        arr = self._archive.read_storage(key, stype.dtype, numel, self._mmap)
        arr = _map_location(arr, location, self._map_location)
        self._storages[key] = _LoadedStorage(arr, location)
        return self._storages[key]

    # ----- the loop -----------------------------------------------------------------------
    def _made(self, obj):
        self._created[id(obj)] = obj
        return obj

    def _is_made(self, obj):
        return self._created.get(id(obj)) is obj

    def _call(self, func, args):
        if type(args) is not tuple:
            raise CheckpointError(f"checkpoint damaged: REDUCE arguments are a "
                                  f"{type(args).__name__}")
        entry = self._builders.get(id(func))
        if entry is not None and entry[0] is func:
            try:
                out = entry[1](self, args)
            except (pickle.UnpicklingError, CheckpointError, MemoryError):
                raise
            except (TypeError, ValueError, KeyError, IndexError, OverflowError,
                    AttributeError, RuntimeError) as e:
                raise CheckpointError(f"checkpoint damaged: {self._record} calls "
                                      f"{getattr(func, '__name__', func)} with arguments it "
                                      f"rejects ({type(e).__name__}: {e})") from None
            return self._made(out) if entry[2] else out
        if self._user_ids.get(id(func)) is func:
            out = func(*args)
            if isinstance(func, type) and type(out) is func and not _shared(out):
                self._made(out)
            return out
        raise _refuse(f"{self._record} calls {func!r:.80}, which is not an allowlisted "
                      "function")

    def load(self):
        """Unpickle the record: the object it holds."""
        try:
            return self._load()
        except _EOF:
            raise CheckpointError(f"checkpoint damaged: {self._record} ends early (the pickle "
                                  "is truncated)") from None
        except (pickle.UnpicklingError, CheckpointError, MemoryError):
            raise
        except (IndexError, KeyError, TypeError, ValueError, AttributeError, struct.error,
                UnicodeDecodeError, OverflowError, RecursionError) as e:
            raise CheckpointError(f"checkpoint damaged: its pickle ({self._record}) cannot be "
                                  f"read ({type(e).__name__}: {e})") from None

    def _load(self):  # noqa: C901 - one branch per opcode, as the pickle spec lists them
        data, n = self._data, len(self._data)
        stack, metastack, memo = [], [], {}
        made, is_made = self._made, self._is_made
        pos = 0
        unpack = struct.unpack_from

        def take(k):
            nonlocal pos
            if pos + k > n:
                raise _EOF
            out = data[pos:pos + k]
            pos += k
            return out

        def pop_mark():
            nonlocal stack
            items = stack
            stack = metastack.pop()
            return items

        while True:
            if pos >= n:
                raise _EOF
            code = data[pos]
            pos += 1
            if code == _BINPUT:
                memo[take(1)[0]] = stack[-1]
            elif code == _BINGET:
                stack.append(memo[take(1)[0]])
            elif code == _LONG_BINPUT:
                memo[unpack("<I", take(4))[0]] = stack[-1]
            elif code == _LONG_BINGET:
                stack.append(memo[unpack("<I", take(4))[0]])
            elif code == _MARK:
                metastack.append(stack)
                stack = []
            elif code == _BINUNICODE:
                k = unpack("<I", take(4))[0]
                stack.append(str(take(k), "utf-8", "surrogatepass"))
            elif code == _SHORT_BINSTRING:
                raw = take(take(1)[0])
                stack.append(raw if self._encoding == "bytes" else raw.decode(self._encoding))
            elif code == _BININT1:
                stack.append(take(1)[0])
            elif code == _BININT2:
                stack.append(unpack("<H", take(2))[0])
            elif code == _BININT:
                stack.append(unpack("<i", take(4))[0])
            elif code == _LONG1:
                stack.append(int.from_bytes(take(take(1)[0]), "little", signed=True))
            elif code == _BINFLOAT:
                stack.append(unpack(">d", take(8))[0])
            elif code == _NONE:
                stack.append(None)
            elif code == _NEWTRUE:
                stack.append(True)
            elif code == _NEWFALSE:
                stack.append(False)
            elif code == _EMPTY_TUPLE:
                stack.append(())
            elif code == _TUPLE1:
                stack[-1] = (stack[-1],)
            elif code == _TUPLE2:
                if len(stack) < 2:
                    raise IndexError("stack underflow")
                stack[-2:] = [(stack[-2], stack[-1])]
            elif code == _TUPLE3:
                if len(stack) < 3:
                    raise IndexError("stack underflow")
                stack[-3:] = [(stack[-3], stack[-2], stack[-1])]
            elif code == _TUPLE:
                items = pop_mark()
                stack.append(tuple(items))
            elif code == _EMPTY_LIST:
                stack.append(made([]))
            elif code == _EMPTY_DICT:
                stack.append(made({}))
            elif code == _EMPTY_SET:
                stack.append(made(set()))
            elif code == _APPEND:
                item = stack.pop()
                self._list_target(stack[-1], "APPEND").append(item)
            elif code == _APPENDS:
                items = pop_mark()
                self._list_target(stack[-1], "APPENDS").extend(items)
            elif code == _SETITEM:
                v = stack.pop()
                k = stack.pop()
                self._dict_target(stack[-1], "SETITEM")[k] = v
            elif code == _SETITEMS:
                items = pop_mark()
                target = self._dict_target(stack[-1], "SETITEMS")
                if len(items) % 2:
                    raise IndexError("SETITEMS with an odd number of items")
                for i in range(0, len(items), 2):
                    target[items[i]] = items[i + 1]
            elif code == _GLOBAL:
                module = self._line(data, pos)
                pos += len(module) + 1
                name = self._line(data, pos)
                pos += len(name) + 1
                module, name = _fix_name(module.decode("utf-8"), name.decode("utf-8"))
                stack.append(self.find_class(module, name))
            elif code == _REDUCE:
                args = stack.pop()
                stack[-1] = self._call(stack[-1], args)
            elif code == _NEWOBJ:
                args = stack.pop()
                cls = stack.pop()
                if type(args) is not tuple:
                    raise CheckpointError("checkpoint damaged: NEWOBJ arguments are not a "
                                          "tuple")
                obj, created = self.newobj(cls, args)
                stack.append(made(obj) if created else obj)
            elif code == _BUILD:
                state = stack.pop()
                inst = stack[-1]
                if not is_made(inst) or not self.build(inst, state):
                    raise _refuse(f"BUILD on a {type(inst).__name__} that {self._record} did "
                                  "not create from an allowlisted class (it would change an "
                                  "existing object)")
            elif code == _BINPERSID:
                stack.append(self.persistent_load(stack.pop()))
            elif code == _PROTO:
                proto = take(1)[0]
                if proto > pickle.HIGHEST_PROTOCOL:
                    raise CheckpointError(f"checkpoint damaged: pickle protocol {proto}")
            elif code == _STOP:
                if len(stack) != 1 or metastack:
                    raise CheckpointError(f"checkpoint damaged: {self._record} stops with "
                                          f"{len(stack)} objects on its stack")
                return stack[0]
            else:
                name = _ALL_NAMES.get(code)
                if name is None:
                    raise CheckpointError(f"checkpoint damaged: {self._record} has an invalid "
                                          f"pickle opcode {code:#04x} at byte {pos - 1}")
                raise _refuse(f"{self._record} uses the pickle opcode {name} (byte {pos - 1}), "
                              "which checkpoints do not contain")

    @staticmethod
    def _line(data, pos):
        end = data.find(b"\n", pos, pos + 512)
        if end < 0:
            raise _EOF
        return data[pos:end]

    def _list_target(self, obj, op):
        if type(obj) is not list or not self._is_made(obj):
            raise _refuse(f"{op} on a {type(obj).__name__} that {self._record} did not create "
                          "as a list")
        return obj

    def _dict_target(self, obj, op):
        if type(obj) not in (dict, collections.OrderedDict, collections.Counter) or \
                not self._is_made(obj):
            raise _refuse(f"{op} on a {type(obj).__name__} that {self._record} did not "
                          "create as a dict")
        return obj


def _fix_name(module, name):
    """Python 2 spellings (``__builtin__``) as Python 3 names them, as pickle does."""
    if (module, name) in _compat_pickle.NAME_MAPPING:
        return _compat_pickle.NAME_MAPPING[(module, name)]
    return _compat_pickle.IMPORT_MAPPING.get(module, module), name


def _map_location(arr, location, map_location):
    """A storage read on the CPU, moved where ``map_location`` (or, without one, its saved
    ``location``) says; a saved CUDA location without a GPU raises torch's error."""
    target = location if map_location is None else map_location
    if callable(map_location) and not isinstance(map_location, str):
        return arr  # storages are already on the cpu; the callable sees tensors later
    if isinstance(map_location, dict):
        target = map_location.get(location, location)
    from ember.backend import as_device, cuda_available, to_device
    dev = as_device(str(target) if not isinstance(target, str) else target)
    if dev.type == "cpu":
        return arr
    if dev.type == "cuda" and not cuda_available():
        raise RuntimeError(
            "Attempting to deserialize object on a CUDA device but torch.cuda.is_available() "
            "is False. If you are running on a CPU-only machine, please use torch.load with "
            "map_location=torch.device('cpu') to map your storages to the CPU.")
    return to_device(arr, dev)


class _TrustedUnpickler(pickle.Unpickler):
    """``weights_only=False``: plain pickle (runs whatever the file names), with torch's
    tensor, storage and dtype globals mapped to ember's."""

    def __init__(self, data, archive, map_location, mmap_file, **kwargs):
        import io
        kwargs.setdefault("encoding", "utf-8")
        super().__init__(io.BytesIO(data), **kwargs)
        self._inner = _Unpickler(data, archive, map_location, mmap_file)

    def find_class(self, module, name):
        entry = _default_allowlist().get(_fix_name(module, name))
        if entry is not None:
            return entry[0]
        if module == "torch" or module.startswith("torch."):
            raise pickle.UnpicklingError(f"the checkpoint pickles {module}.{name}, a torch "
                                         "object ember cannot rebuild; save a state_dict "
                                         "instead of the whole object")
        return super().find_class(module, name)

    def persistent_load(self, pid):
        return self._inner.persistent_load(pid)
