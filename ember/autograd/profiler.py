"""``torch.autograd.profiler``: the older profiler API over the same recorder as
``ember.profiler``."""
from ember.profiler import (
    EventList,
    FunctionEvent,
    FunctionEventAvg,
    _KinetoProfile,
    record_function,
)
from ember.profiler._events import Recorder

__all__ = ["profile", "record_function", "emit_nvtx", "EventList", "FunctionEvent",
           "FunctionEventAvg"]


class profile(_KinetoProfile):
    """``with torch.autograd.profiler.profile() as prof:`` records the block's ops;
    ``prof.key_averages().table()``, ``prof.function_events``,
    ``prof.export_chrome_trace(path)`` report them."""

    def __init__(self, enabled=True, *, use_cuda=False, use_device=None, record_shapes=False,
                 with_flops=False, profile_memory=False, with_stack=False, with_modules=False,
                 use_kineto=False, use_cpu=True, experimental_config=None, acc_events=False,
                 custom_trace_id_callback=None):
        self.enabled = enabled
        if use_cuda or (use_device not in (None, "cpu")):
            raise NotImplementedError("autograd.profiler.profile(use_cuda/use_device): ember "
                                      "records CPU activity only")
        self._check_options(profile_memory, with_flops, with_stack, with_modules)
        self._rec = Recorder(record_shapes, profile_memory)

    def __enter__(self):
        if self.enabled:
            self._start()
        return self

    def __exit__(self, *exc):
        if self.enabled:
            self._stop()
        return False

    @property
    def function_events(self):
        return self.events()

    def self_cpu_time_total(self):
        return self.events().self_cpu_time_total


class emit_nvtx:
    """NVTX ranges for NVIDIA's tools: ember has no CUDA kernels to annotate."""

    def __init__(self, enabled=True, record_shapes=False):
        raise NotImplementedError("autograd.profiler.emit_nvtx: ember has no CUDA kernels to "
                                  "annotate; use torch.profiler.profile")
