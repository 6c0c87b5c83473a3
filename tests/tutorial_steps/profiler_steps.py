"""The profiler recipe's steps on the CPU, with a small CNN: a labelled range, tables
sorted by time and memory, grouping by input shape and by stack, a Chrome trace, and a
schedule with ``on_trace_ready``. Prints what does not depend on timings."""
import json
import os
import sys
import tempfile

import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile, record_function, schedule

torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))
inputs = torch.randn(5, 3, 16, 16)
out = {}

with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
    with record_function("model_inference"):
        model(inputs)
rows = {e.key: e for e in prof.key_averages()}
out["labelled"] = rows["model_inference"].count
table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=10)
out["table"] = ["model_inference" in table, "Self CPU time total" in table]
by_shape = prof.key_averages(group_by_input_shape=True)
out["input_shape"] = any([5, 3, 16, 16] in [list(s) for s in e.input_shapes if s]
                         for e in by_shape)

with profile(activities=[ProfilerActivity.CPU], profile_memory=True,
             record_shapes=True) as prof:
    model(inputs)
mem = prof.key_averages().table(sort_by="self_cpu_memory_usage", row_limit=10)
out["memory_table"] = "CPU Mem" in mem
out["memory_total"] = sum(e.self_cpu_memory_usage for e in prof.key_averages()) >= 0

with tempfile.TemporaryDirectory() as d:
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        model(inputs)
    path = os.path.join(d, "trace.json")
    prof.export_chrome_trace(path)
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    out["trace"] = len(events) > 0

with profile(activities=[ProfilerActivity.CPU], with_stack=True) as prof:
    model(inputs)
out["stack_table"] = "Source Location" in prof.key_averages(group_by_stack_n=5).table(
    sort_by="self_cpu_time_total", row_limit=2)

sched = schedule(skip_first=10, wait=5, warmup=1, active=3, repeat=2)
out["schedule"] = [str(sched(i)).split(".")[-1] for i in range(32)]
seen = []


def trace_handler(p):
    seen.append(p.step_num)
    p.key_averages().table(sort_by="self_cpu_time_total", row_limit=10)


with profile(activities=[ProfilerActivity.CPU],
             schedule=schedule(wait=1, warmup=1, active=2),
             on_trace_ready=trace_handler) as p:
    for _ in range(8):
        model(inputs)
        p.step()
out["on_trace_ready"] = seen
out["cuda"] = torch.cuda.is_available()
print(json.dumps(out))
sys.stdout.flush()
