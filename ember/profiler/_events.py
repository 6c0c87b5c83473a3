"""The profiler's recorder and its results: events, their averages, the table and the
Chrome trace."""
import enum
import json
import os
import re
import threading
import time

from ember._tensor import Tensor
from ember.autograd import _modes

__all__ = ["FunctionEvent", "FunctionEventAvg", "EventList", "Recorder"]


def _now_us():
    return time.perf_counter_ns() / 1000.0


def _shape(a):
    if isinstance(a, Tensor):
        return list(a.shape)
    if isinstance(a, (list, tuple)) and a and all(isinstance(x, Tensor) for x in a):
        return [list(x.shape) for x in a]
    return []


# aten names that PyTorch's node names drop a leading underscore from
_UNDERSCORED = {"to_copy", "unsafe_view", "index_put_impl", "fft_r2c", "fft_c2r",
                "fft_c2c", "cdist_forward", "weight_norm_interface", "pdist_forward",
                "adaptive_avg_pool2d", "adaptive_avg_pool3d"}
_PUBLIC = {"adaptive_avg_pool2d", "adaptive_avg_pool3d"}  # the public name is the row
_NAMES = {}


def _op_name(cls):
    """``aten::native_batch_norm`` for the op whose node is ``NativeBatchNormBackward0``:
    PyTorch's node names are its aten names in CamelCase (``2d`` as ``2D``), so the
    name is turned back into snake case. A class's ``profiler_name`` overrides it
    (None: the op has no row of its own)."""
    name = _NAMES.get(cls, False)
    if name is False:
        if "profiler_name" in dir(cls):
            name = _NAMES[cls] = cls.profiler_name
            return name
        name = getattr(cls, "_node_name", cls.__name__)
        name = name.rsplit("::", 1)[-1]
        for tail in ("Backward0", "Backward1", "Backward2", "Backward"):
            if name.endswith(tail):
                name = name[:-len(tail)]
                break
        name = re.sub(r"(\d)D(?=[A-Z]|$)", r"\1d", name.lstrip("_"))
        name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()
        if name in _UNDERSCORED and name not in _PUBLIC:
            name = "_" + name
        name = _NAMES[cls] = "aten::" + name
    return name


class _Interval:
    def __init__(self, start, end):
        self.start, self.end = start, end

    def elapsed_us(self):
        return self.end - self.start


class DeviceType(enum.IntEnum):
    """Where an event ran (``torch.profiler.DeviceType``): ember records CPU events."""
    CPU = 0
    CUDA = 1
    MKLDNN = 2
    OPENGL = 3
    OPENCL = 4
    IDEEP = 5
    HIP = 6
    FPGA = 7
    MAIA = 8
    XLA = 9
    Vulkan = 10
    Metal = 11
    XPU = 12
    MPS = 13
    Meta = 14
    HPU = 15
    VE = 16
    Lazy = 17
    IPU = 18
    MTIA = 19
    PrivateUse1 = 20


class FunctionEvent:
    """One recorded call: an op, a ``record_function`` range or a backward node."""

    def __init__(self, id, name, thread, start, input_shapes, is_user=False):
        self.id, self.name, self.thread = id, name, thread
        self.time_range = _Interval(start, start)
        self.input_shapes = input_shapes
        self.cpu_children = []
        self.cpu_parent = None
        self.is_user_annotation = is_user
        self.count = 1
        self.device_type = DeviceType.CPU
        self.self_cpu_memory_usage = 0  # bytes of the new arrays this op itself made

    @property
    def cpu_memory_usage(self):
        """Bytes allocated by the event and the events inside it."""
        return self.self_cpu_memory_usage + sum(c.cpu_memory_usage for c in self.cpu_children)

    @property
    def key(self):
        return self.name

    @property
    def cpu_time_total(self):
        return self.time_range.elapsed_us()

    @property
    def self_cpu_time_total(self):
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children)

    @property
    def cpu_time(self):
        return self.cpu_time_total

    def __repr__(self):
        return (f"<FunctionEvent id={self.id} name={self.name} "
                f"cpu_time={self.cpu_time_total:.3f}us input_shapes={self.input_shapes}>")


class FunctionEventAvg:
    """The events of one name (and input shapes, if grouped) added up."""

    def __init__(self, key, input_shapes=None):
        self.key = key
        self.input_shapes = input_shapes
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.cpu_memory_usage = 0
        self.self_cpu_memory_usage = 0
        self.is_user_annotation = False

    def add(self, ev):
        self.count += ev.count
        self.cpu_time_total += ev.cpu_time_total
        self.self_cpu_time_total += ev.self_cpu_time_total
        self.cpu_memory_usage += ev.cpu_memory_usage
        self.self_cpu_memory_usage += ev.self_cpu_memory_usage
        self.is_user_annotation = ev.is_user_annotation
        if self.input_shapes is None:
            self.input_shapes = ev.input_shapes
        return self

    @property
    def cpu_time(self):
        return self.cpu_time_total / self.count if self.count else 0.0

    @property
    def self_cpu_time(self):
        return self.self_cpu_time_total / self.count if self.count else 0.0

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key} self_cpu_time={self.self_cpu_time_total:.3f}us "
                f"cpu_time={self.cpu_time_total:.3f}us count={self.count} "
                f"input_shapes={self.input_shapes}>")


def _fmt_time(us):
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


_SORT_KEYS = {"cpu_time_total", "self_cpu_time_total", "cpu_time", "self_cpu_time", "count",
              "cpu_time_avg", "cpu_memory_usage", "self_cpu_memory_usage"}


def _fmt_mem(n):
    for unit, size in (("Gb", 1 << 30), ("Mb", 1 << 20), ("Kb", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} b"


class EventList(list):
    """A list of events (or of averages) with PyTorch's reporting methods."""

    def __init__(self, events=(), record_shapes=False, profile_memory=False):
        super().__init__(events)
        self._record_shapes = record_shapes
        self._profile_memory = profile_memory

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0):
        """One ``FunctionEventAvg`` per name (and per input shapes when grouping). ember
        records no Python stacks, so ``group_by_stack_n`` groups as without it (every
        event's stack is empty, as in PyTorch for a profile without ``with_stack``)."""
        table = {}
        for ev in self:
            key = (ev.key, str(ev.input_shapes)) if group_by_input_shape else ev.key
            if key not in table:
                table[key] = FunctionEventAvg(ev.key, ev.input_shapes if group_by_input_shape
                                              else None)
            table[key].add(ev)
        out = EventList(table.values(), self._record_shapes, self._profile_memory)
        out._grouped_shapes = group_by_input_shape
        return out

    def total_average(self):
        """All events added up into one ``FunctionEventAvg`` named ``Total``."""
        total = FunctionEventAvg("Total")
        for ev in self:
            total.add(ev)
        total.input_shapes = None
        return total

    @property
    def self_cpu_time_total(self):
        return sum(ev.self_cpu_time_total for ev in self)

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75,
              max_name_column_width=55, max_shapes_column_width=80, header=None,
              top_level_events_only=False, time_unit=None):
        """PyTorch's text table: self and total CPU time per row, call counts, and the
        input shapes when the events were grouped by them."""
        rows = list(self)
        if top_level_events_only:
            rows = [r for r in rows if getattr(r, "cpu_parent", None) is None]
        if sort_by is not None:
            if sort_by not in _SORT_KEYS:
                raise AttributeError(f"'FunctionEventAvg' object has no attribute '{sort_by}'")
            attr = "cpu_time" if sort_by == "cpu_time_avg" else sort_by
            rows.sort(key=lambda r: getattr(r, attr), reverse=True)
        if row_limit is not None and row_limit > 0:
            rows = rows[:row_limit]
        total_self = self.self_cpu_time_total
        names = [r.key for r in rows] or ["Name"]
        name_w = min(max(len(n) for n in names) + 4, max_name_column_width)
        heads = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg",
                 "# of Calls"]
        widths = [name_w] + [12] * 6
        if self._profile_memory:
            heads[-1:-1] = ["CPU Mem", "Self CPU Mem"]
            widths += [12, 12]
        shapes = getattr(self, "_grouped_shapes", False)
        if shapes:
            shape_strs = [str(r.input_shapes) for r in rows]
            heads.append("Input Shapes")
            widths.append(min(max([len(s) for s in shape_strs] + [12]) + 4,
                              max_shapes_column_width))

        def line(cells):
            return "".join(c.rjust(w) + "  " for c, w in zip(cells, widths))
        sep = "".join("-" * w + "  " for w in widths)
        out = []
        if header:
            out += ["=" * len(sep), header]
        out += [sep, line(heads), sep]
        for i, r in enumerate(rows):
            name = r.key if len(r.key) <= name_w else r.key[:name_w - 3] + "..."
            pct = (lambda x: f"{100.0 * x / total_self:.2f}%") if total_self else \
                (lambda x: "0.00%")
            cells = [name, pct(r.self_cpu_time_total), _fmt_time(r.self_cpu_time_total),
                     pct(r.cpu_time_total), _fmt_time(r.cpu_time_total),
                     _fmt_time(r.cpu_time_total / max(r.count, 1)), str(r.count)]
            if self._profile_memory:
                cells[-1:-1] = [_fmt_mem(r.cpu_memory_usage), _fmt_mem(r.self_cpu_memory_usage)]
            if shapes:
                s = shape_strs[i]
                cells.append(s if len(s) <= widths[-1] else s[:widths[-1] - 3] + "...")
            out.append(line(cells))
        out += [sep, f"Self CPU time total: {_fmt_time(total_self)}", ""]
        return "\n".join(out)

    def export_chrome_trace(self, path):
        """Write the events as a Chrome / Perfetto trace (JSON ``traceEvents``)."""
        from ember.utils._atomic import atomic_write
        pid = os.getpid()
        events = []
        for ev in self:
            if not isinstance(ev, FunctionEvent):
                raise RuntimeError("export_chrome_trace needs the raw events, not averages")
            item = {"ph": "X", "cat": "user_annotation" if ev.is_user_annotation else "cpu_op",
                    "name": ev.name, "pid": pid, "tid": ev.thread,
                    "ts": ev.time_range.start, "dur": ev.cpu_time_total,
                    "args": {"External id": ev.id}}
            if self._record_shapes:
                item["args"]["Input Dims"] = ev.input_shapes
            events.append(item)
        meta = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                 "args": {"name": "python"}},
                {"ph": "M", "name": "process_labels", "pid": pid, "tid": 0,
                 "args": {"labels": "CPU"}}]
        for tid in sorted({ev.thread for ev in self}):
            meta.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                         "args": {"name": f"thread {tid} (python)"}})
        doc = {"schemaVersion": 1, "displayTimeUnit": "ms", "traceName": "ember",
               "traceEvents": meta + events}
        with atomic_write(os.fspath(path), "wb") as f:
            f.write(json.dumps(doc, indent=1).encode())


def _new_bytes(out):
    """Bytes of the arrays an op returned that own new memory (a view allocates none).
    The op's temporaries and the memory released later are not seen."""
    outs = out if isinstance(out, (tuple, list)) else (out,)
    n = 0
    for t in outs:
        if isinstance(t, Tensor):
            a = t._data
            if getattr(a, "base", None) is None:
                n += int(a.nbytes)
    return n


class Recorder(_modes.Mode):
    """Collects events while on the mode stack (``ember.autograd._modes``)."""

    # it times the ops a call runs and changes none: composites that build PyTorch's
    # nodes (``linear``, ``matmul``) build them under it, as in eager mode
    observer = True

    def __init__(self, record_shapes=False, profile_memory=False):
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.events = []
        self._local = threading.local()
        self._next_id = 0
        self._lock = threading.Lock()

    def _stack(self):
        st = getattr(self._local, "stack", None)
        if st is None:
            st = self._local.stack = []
        return st

    def begin(self, name, shapes, is_user=False):
        with self._lock:
            self._next_id += 1
            ev = FunctionEvent(self._next_id, name, threading.get_ident(), _now_us(), shapes,
                               is_user)
            self.events.append(ev)
        st = self._stack()
        if st:
            ev.cpu_parent = st[-1]
            st[-1].cpu_children.append(ev)
        st.append(ev)
        return ev

    def end(self, ev):
        ev.time_range.end = _now_us()
        st = self._stack()
        if st and st[-1] is ev:
            st.pop()
        elif ev in st:
            st.remove(ev)

    def op(self, cls, args, params):
        name = _op_name(cls)
        if name is None:
            return cls.apply(*args, **params)
        shapes = [_shape(a) for a in args] if self.record_shapes else []
        ev = self.begin(name, shapes)
        try:
            out = cls.apply(*args, **params)
            if self.profile_memory:
                ev.self_cpu_memory_usage = _new_bytes(out)
            return out
        finally:
            self.end(ev)

    def node(self, node, grads, below):
        ev = self.begin("autograd::engine::evaluate_function: " + node.name(), [])
        try:
            return below()
        finally:
            self.end(ev)
