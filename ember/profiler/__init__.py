"""``torch.profiler``: record which ops a block of code ran, how often, for how long
and on which shapes.

    with ember.profiler.profile(record_shapes=True) as prof:
        with ember.profiler.record_function("model_inference"):
            model(x)
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=10))
    prof.export_chrome_trace("trace.json")

Every op is recorded under PyTorch's name for it (``aten::mul``, ``aten::addmm``), each
backward node as ``autograd::engine::evaluate_function: MulBackward0``, and each
``record_function`` range under its own name. Times are wall-clock CPU time of ember's
Python and NumPy code; ember has no CUDA kernels to trace, no memory or FLOP counters.
"""
import enum
import os
import socket
import time
import warnings

from ember.autograd import _modes
from ember.profiler._events import EventList, FunctionEvent, FunctionEventAvg, Recorder

__all__ = ["profile", "record_function", "ProfilerActivity", "ProfilerAction", "schedule",
           "tensorboard_trace_handler", "supported_activities", "EventList", "FunctionEvent",
           "FunctionEventAvg", "kineto_available"]


class ProfilerActivity(enum.Enum):
    """What to profile: ember records ``CPU`` activity only."""

    CPU = 0
    CUDA = 1
    MTIA = 2
    XPU = 3
    PrivateUse1 = 4
    HPU = 5


class ProfilerAction(enum.Enum):
    """What a ``schedule`` asks the profiler to do at a step."""

    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def supported_activities():
    """The activities ember can record: ``{ProfilerActivity.CPU}``."""
    return {ProfilerActivity.CPU}


def kineto_available():
    return False


def schedule(*, wait, warmup, active, repeat=0, skip_first=0, skip_first_wait=0):
    """PyTorch's step schedule: skip ``skip_first`` steps, then cycles of ``wait`` idle,
    ``warmup`` and ``active`` recorded steps (``repeat`` cycles, 0 for unlimited); the
    last active step of a cycle is ``RECORD_AND_SAVE``."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise AssertionError("Invalid profiler schedule arguments")
    if warmup == 0:
        warnings.warn("Profiler won't be using warmup, this can skew profiler results",
                      stacklevel=2)

    def fn(step):
        if step < 0:
            raise AssertionError(f"Step should be non-negative, got {step}")
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if skip_first_wait and step < wait:
            return ProfilerAction.NONE
        n = wait + warmup + active
        if repeat > 0 and step / n >= repeat:
            return ProfilerAction.NONE
        mod = step % n
        if mod < wait:
            return ProfilerAction.NONE
        if mod < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if mod < n - 1 else ProfilerAction.RECORD_AND_SAVE
    return fn


def tensorboard_trace_handler(dir_name, worker_name=None, use_gzip=False):
    """An ``on_trace_ready`` that writes each trace as
    ``<dir_name>/<worker_name>.<time>.pt.trace.json``."""
    if use_gzip:
        raise NotImplementedError("tensorboard_trace_handler(use_gzip=True) is not "
                                  "implemented in ember")

    def handler(prof):
        from ember.utils._atomic import makedirs
        makedirs(dir_name, "cannot create the trace directory")
        name = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        prof.export_chrome_trace(os.path.join(dir_name,
                                              f"{name}.{time.time_ns()}.pt.trace.json"))
    return handler


class record_function:
    """Mark a named range in the profile (a context manager or a decorator)."""

    def __init__(self, name, args=None):
        self.name = name
        self.args = args
        self._ev = None

    def __enter__(self):
        rec = _modes.find(Recorder)
        if rec is not None:
            self._rec = rec
            self._ev = rec.begin(self.name, [], is_user=True)
        return self

    def __exit__(self, *exc):
        if self._ev is not None:
            self._rec.end(self._ev)
            self._ev = None
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with record_function(self.name, self.args):
                return fn(*args, **kwargs)
        return wrapped


class _KinetoProfile:
    """State shared by ``torch.profiler.profile`` and ``torch.autograd.profiler.profile``."""

    def _check_options(self, profile_memory, with_flops, with_stack, with_modules):
        if with_flops:
            raise NotImplementedError("profile(with_flops=True): ember does not count FLOPs")
        if with_stack or with_modules:
            warnings.warn("ember's profiler records no Python stacks or module hierarchy; "
                          "with_stack/with_modules are ignored", stacklevel=3)

    def _start(self):
        running = _modes.find(Recorder)
        if running is self._rec:
            return
        if running is not None:
            raise RuntimeError("Profiler is already enabled on this thread")
        _modes.push(self._rec)

    def _stop(self):
        if _modes.find(Recorder) is self._rec:
            _modes.pop(self._rec)

    def events(self):
        """The recorded events in the order they started."""
        evs = sorted(self._rec.events, key=lambda e: e.time_range.start)
        return EventList(evs, self._rec.record_shapes, self._rec.profile_memory)

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0,
                     group_by_overload_name=False):
        """The events added up per name (see ``EventList.key_averages``)."""
        return self.events().key_averages(group_by_input_shape, group_by_stack_n)

    def export_chrome_trace(self, path):
        """Write the recorded events as a Chrome / Perfetto JSON trace."""
        self.events().export_chrome_trace(path)

    def table(self, *args, **kwargs):
        return self.key_averages().table(*args, **kwargs)


class profile(_KinetoProfile):
    """Record the ops run inside the block (``torch.profiler.profile``).

    ``record_shapes`` keeps each op's input shapes; ``schedule`` and ``step()`` limit
    recording to some steps of a loop, calling ``on_trace_ready(prof)`` after each
    recorded cycle. ``profile_memory`` counts the bytes of the new arrays each op returns
    (its temporaries and later releases are not seen); ``with_flops`` raises
    NotImplementedError.
    """

    def __init__(self, *, activities=None, schedule=None, on_trace_ready=None,
                 record_shapes=False, profile_memory=False, with_stack=False, with_flops=False,
                 with_modules=False, experimental_config=None, execution_trace_observer=None,
                 acc_events=False, use_cuda=None, custom_trace_id_callback=None):
        self._check_options(profile_memory, with_flops, with_stack, with_modules)
        acts = set(activities) if activities else supported_activities()
        if acts - {ProfilerActivity.CPU}:
            warnings.warn("ember's profiler records CPU activity only; "
                          f"{sorted(a.name for a in acts - {ProfilerActivity.CPU})} ignored",
                          stacklevel=2)
        self.activities = acts
        self.record_shapes = record_shapes
        self.schedule = schedule
        self.on_trace_ready = on_trace_ready
        self.step_num = 0
        self.profile_memory = profile_memory
        self._rec = Recorder(record_shapes, profile_memory)
        self._action = None

    def _recording(self, action):
        return action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)

    def start(self):
        self._action = self.schedule(self.step_num) if self.schedule else ProfilerAction.RECORD
        if self._recording(self._action) or self._action == ProfilerAction.WARMUP:
            self._start()

    def stop(self):
        was = self._action
        self._stop()
        if self.on_trace_ready is not None and (self.schedule is None or self._recording(was)):
            self.on_trace_ready(self)

    def step(self):
        """Advance the schedule by one step (call once per training iteration)."""
        if self.schedule is None:
            self.step_num += 1
            return
        prev = self._action
        self.step_num += 1
        self._action = self.schedule(self.step_num)
        if prev == ProfilerAction.RECORD_AND_SAVE:
            self._stop()
            if self.on_trace_ready is not None:
                self.on_trace_ready(self)
        if prev == ProfilerAction.WARMUP and self._recording(self._action):
            # warm-up steps run the recorder, but their events are not kept
            self._rec.events.clear()
        if prev in (ProfilerAction.NONE, ProfilerAction.RECORD_AND_SAVE) and \
                self._action != ProfilerAction.NONE:
            self._rec = Recorder(self.record_shapes, self.profile_memory)
        if self._action == ProfilerAction.NONE:
            self._stop()
        elif _modes.find(Recorder) is not self._rec:
            self._start()

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False
from ember.profiler._events import DeviceType  # noqa: E402,F401

__all__ += ["DeviceType"]
