"""torch.overrides.TorchFunctionMode on ember's mode stack, against torch 2.13: the public
functions a mode is told of, nesting, re-dispatch, and the calls it cannot see raising."""
import pytest
import torch

import ember
import ember.overrides


def _logger(lib, log, tag=""):
    class Log(lib.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            log.append(tag + func.__name__)
            return func(*args, **(kwargs or {}))
    return Log()


CALLS = {
    "torch.add": lambda t, F, x, y: t.add(x, y),
    "x.add": lambda t, F, x, y: x.add(y),
    "x + y": lambda t, F, x, y: x + y,
    "2 + x": lambda t, F, x, y: 2 + x,
    "2 - x": lambda t, F, x, y: 2 - x,
    "x * y": lambda t, F, x, y: x * y,
    "2 / x": lambda t, F, x, y: 2 / x,
    "x @ y": lambda t, F, x, y: x @ y,
    "-x": lambda t, F, x, y: -x,
    "x == y": lambda t, F, x, y: x == y,
    "x < y": lambda t, F, x, y: x < y,
    "x ** 2": lambda t, F, x, y: x ** 2,
    "2 ** x": lambda t, F, x, y: 2 ** x,
    "x % 2": lambda t, F, x, y: x % 2,
    "x // 2": lambda t, F, x, y: x // 2,
    "abs(x)": lambda t, F, x, y: abs(x),
    "x[0]": lambda t, F, x, y: x[0],
    "x[0] = 1": lambda t, F, x, y: x.__setitem__(0, 1.0),
    "x += 1": lambda t, F, x, y: x.__iadd__(1),
    "len(x)": lambda t, F, x, y: len(x),
    "float(x[0, 0])": lambda t, F, x, y: float(x[0, 0]),
    "x[0, 0].item()": lambda t, F, x, y: x[0, 0].item(),
    "x.T": lambda t, F, x, y: x.T,
    "x.sum()": lambda t, F, x, y: x.sum(),
    "x.view(4)": lambda t, F, x, y: x.view(4),
    "torch.matmul": lambda t, F, x, y: t.matmul(x, y),
    "torch.cat": lambda t, F, x, y: t.cat([x, y]),
    "F.relu": lambda t, F, x, y: F.relu(x),
    "F.softmax": lambda t, F, x, y: F.softmax(x, -1),
    "repr(x)": lambda t, F, x, y: repr(x),
}


def _run(lib, call):
    x, y = lib.ones(2, 2), lib.ones(2, 2)
    log = []
    with _logger(lib, log):
        CALLS[call](lib, lib.nn.functional, x, y)
    return log


@pytest.mark.parametrize("call", sorted(CALLS))
def test_reported_functions_match_torch(call):
    assert _run(ember, call) == _run(torch, call)


def test_func_is_the_public_function():
    seen = []

    class Keep(ember.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))
    x = ember.ones(2)
    with Keep():
        ember.add(x, 1)
        x.add(1)
        x + 1
        ember.nn.functional.relu(x)
        assert seen == [ember.add, ember.Tensor.add, ember.Tensor.add,
                        ember.nn.functional.relu]
    assert not hasattr(ember.add, "__wrapped__")  # the plain functions are back


def _module_run(lib):
    lib.manual_seed(0)
    log = []
    net = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.ReLU(), lib.nn.Linear(4, 1))
    x = lib.ones(2, 3)
    with _logger(lib, log):
        loss = net(x).pow(2).mean()
        loss.backward()
    with _logger(lib, log, "o:"), _logger(lib, log, "i:"):
        lib.add(x, 1)
        x * 2
    return log, [v for p in net.parameters() for v in p.grad.reshape(-1).tolist()]


def test_module_forward_backward_and_nesting_match_torch():
    e_log, e_grads = _module_run(ember)
    t_log, t_grads = _module_run(torch)
    assert e_log == t_log  # innermost mode first, each seeing the call once
    assert e_grads == pytest.approx(t_grads, rel=1e-5, abs=1e-6)


def test_handler_can_change_the_result():
    class Double(ember.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            return out * 2 if func is ember.add else out
    with Double():
        r = ember.add(ember.ones(2), 1)
    assert r.tolist() == [4.0, 4.0]


def test_enabled_flag_and_disable():
    x = ember.ones(2)
    log = []
    assert not ember.overrides.is_torch_function_mode_enabled()
    with _logger(ember, log):
        assert ember.overrides.is_torch_function_mode_enabled()
        with ember._C.DisableTorchFunction():
            assert not ember.overrides.is_torch_function_mode_enabled()
            x + 1
        x + 1
    assert log == ["add"]


def test_handle_torch_function_goes_to_the_mode():
    log = []

    def mine(t):
        if ember.overrides.has_torch_function_unary(t):
            return ember.overrides.handle_torch_function(mine, (t,), t)
        return t + 1
    t = ember.ones(1)
    with _logger(ember, log):
        out = mine(t)
    assert log == ["mine"] and out.tolist() == [2.0]


def test_a_function_bound_before_entering_raises():
    add = ember.add
    with _logger(ember, []):
        with pytest.raises(RuntimeError, match="bound before the mode was entered"):
            add(ember.ones(1), 1)
    assert add(ember.ones(1), 1).tolist() == [2.0]


def _layers_run(lib, which):
    lib.manual_seed(0)
    nn = lib.nn
    log = []
    if which == "cnn":
        m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.MaxPool2d(2), nn.Flatten(),
                          nn.Linear(4 * 3 * 3, 2))
        x = lib.randn(2, 3, 8, 8)
        with _logger(lib, log):
            m(x).sum().backward()
    else:
        logits, target = lib.randn(3, 4, requires_grad=True), lib.tensor([0, 1, 2])
        with _logger(lib, log):
            nn.CrossEntropyLoss()(logits, target).backward()
    return log


@pytest.mark.parametrize("which", ["cnn", "cross_entropy"])
def test_modules_report_their_functional_calls_as_torch(which):
    # the modules' calls through names bound at import time (a class's static method,
    # a table of functions, ``from ... import``) are seen as well
    assert _layers_run(ember, which) == _layers_run(torch, which)


def test_lstm_and_attention_modules_run_under_a_mode():
    log = []
    lstm = ember.nn.LSTM(4, 3, batch_first=True)
    layer = ember.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    x, y = ember.randn(1, 3, 4), ember.randn(2, 3, 8)
    with _logger(ember, log):
        lstm(x)[0].sum().backward()
        layer(y).sum().backward()
    assert "lstm" in log and "layer_norm" in log and log.count("backward") == 2


def test_disable_subclass_leaves_modes_on():
    for lib in (ember, torch):
        log = []
        with _logger(lib, log):
            with lib._C.DisableTorchFunctionSubclass():
                lib.ones(1) + 1
        assert log == ["ones", "add"]


def test_a_profiler_inside_or_outside_the_mode_sees_every_op():
    from contextlib import nullcontext

    from ember.profiler import profile
    names = []
    for where in ("none", "outside", "inside"):
        x = ember.randn(4, 5, requires_grad=True)
        prof = profile()
        outer = prof if where == "outside" else (
            nullcontext() if where == "none" else _logger(ember, []))
        inner = prof if where != "outside" else _logger(ember, [])
        with outer, inner:
            (x * 2).sum().backward()
        names.append(sorted(e.name for e in prof.events()))
    assert names[0] == names[1] == names[2] and "aten::expand" in names[0]
