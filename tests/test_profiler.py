"""torch.profiler / torch.autograd.profiler basics against torch: op names and call
counts, record_function ranges, shapes, the table, the Chrome trace, schedules."""
import json

import torch
import torch.profiler as tprof

import ember
import ember.profiler as eprof

LIBS = [(ember, eprof), (torch, tprof)]


def _program(m):
    x = m.randn(3, 4, requires_grad=True)
    w = m.randn(4, 2, requires_grad=True)
    for _ in range(3):
        y = x.exp()
    z = (y * 2.0).mm(w).relu().sum()
    z.backward()


def _counts(prof, names):
    avg = {e.key: e.count for e in prof.key_averages()}
    return {n: avg.get(n, 0) for n in names}


def test_op_names_counts_and_ranges_match_torch():
    names = ["aten::exp", "aten::mul", "aten::mm", "aten::relu", "aten::sum", "my_range",
             "autograd::engine::evaluate_function: MmBackward0",
             "autograd::engine::evaluate_function: ExpBackward0",
             "autograd::engine::evaluate_function: ReluBackward0"]
    res = []
    for m, p in LIBS:
        with p.profile(activities=[p.ProfilerActivity.CPU], record_shapes=True) as prof:
            with p.record_function("my_range"):
                _program(m)
        res.append(_counts(prof, names))
        rng = next(e for e in prof.events() if e.name == "my_range")
        assert rng.cpu_time_total >= max(e.cpu_time_total for e in prof.events()
                                         if e.name == "aten::mm")
    assert res[0] == res[1]
    assert res[0]["aten::exp"] == 3


def test_shapes_and_table_layout():
    tables = []
    for m, p in LIBS:
        with p.profile(record_shapes=True) as prof:
            m.ones(2, 3).mm(m.ones(3, 5))
        mm = [e for e in prof.events() if e.name == "aten::mm"]
        assert mm[0].input_shapes == [[2, 3], [3, 5]]
        table = prof.key_averages(group_by_input_shape=True).table(sort_by="cpu_time_total")
        tables.append(table)
    for table in tables:
        lines = table.splitlines()
        assert lines[1].split() == ["Name", "Self", "CPU", "%", "Self", "CPU", "CPU", "total",
                                    "%", "CPU", "total", "CPU", "time", "avg", "#", "of",
                                    "Calls", "Input", "Shapes"]
        assert any("aten::mm" in line and "[[2, 3], [3, 5]]" in line for line in lines)
        assert lines[-2 if lines[-1] == "" else -1].startswith("Self CPU time total:")


def test_chrome_trace_is_valid_json(tmp_path):
    with eprof.profile(record_shapes=True) as prof:
        with eprof.record_function("outer"):
            _program(ember)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    doc = json.loads(path.read_text())
    ops = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert {"name", "ts", "dur", "pid", "tid"} <= set(ops[0])
    assert any(e["name"] == "outer" and e["cat"] == "user_annotation" for e in ops)
    outer = next(e for e in ops if e["name"] == "outer")
    inner = [e for e in ops if e["name"] == "aten::exp"]
    assert all(outer["ts"] <= e["ts"] and e["ts"] + e["dur"] <= outer["ts"] + outer["dur"]
               for e in inner)


def test_schedule_and_on_trace_ready_match_torch():
    kw = dict(wait=1, warmup=1, active=2, repeat=2, skip_first=1)
    se, st = eprof.schedule(**kw), tprof.schedule(**kw)
    assert [se(i).name for i in range(15)] == [st(i).name for i in range(15)]
    calls = []
    for m, p in LIBS:
        seen = []
        with p.profile(schedule=p.schedule(**kw),
                       on_trace_ready=lambda pr, seen=seen: seen.append(
                           sum(e.count for e in pr.key_averages() if e.key == "aten::exp"))
                       ) as prof:
            for _ in range(12):
                m.ones(2).exp()
                prof.step()
        calls.append(seen)
    assert calls[0] == calls[1], calls


def test_autograd_profiler_and_decorator():
    for m in (ember, torch):
        @m.autograd.profiler.record_function("decorated")
        def f(x):
            return x.exp()
        with m.autograd.profiler.profile() as prof:
            f(m.ones(2))
        names = [e.name for e in prof.function_events]
        assert "decorated" in names and "aten::exp" in names



def test_profile_memory_counts_new_results():
    """An op's CPU Mem is the bytes of the arrays it allocated (its result here)."""
    got = {}
    for m in (ember, torch):
        x = m.ones(256)
        with m.profiler.profile(profile_memory=True) as prof:
            x.exp()
            x.view(16, 16)
        rows = {e.key: e for e in prof.key_averages()}
        got[m.__name__] = (rows["aten::exp"].cpu_memory_usage,
                           rows["aten::view"].cpu_memory_usage)
        assert "CPU Mem" in prof.key_averages().table(sort_by="self_cpu_memory_usage")
    assert got["ember"] == got["torch"] == (1024, 0)
