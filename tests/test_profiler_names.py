"""Profiler rows carry PyTorch's ``aten::`` names: a sweep over common ops and layers,
profiled in ember and in torch on the same inputs. Every row ember shows is an aten
operator torch has, and where ember runs the op torch runs, the same name appears in
torch's profile of that call (``aten::native_batch_norm``, ``aten::max_pool2d_with_
indices``, ``aten::log_softmax``, ``aten::lstm``...). Ember's composites that run other
ops than torch's kernel (gelu's erf, an embedding's index) show the ops they run."""
import numpy as np
import pytest
import torch
import torch.profiler as tprof

import ember
import ember.profiler as eprof


def _cases(lib):
    nn, F = lib.nn, lib.nn.functional
    x = lib.tensor(np.random.RandomState(0).randn(2, 3, 8, 8).astype("float32"))
    v = lib.tensor(np.random.RandomState(1).randn(4, 6).astype("float32"))
    s = lib.tensor(np.random.RandomState(2).randn(5, 2, 6).astype("float32"))
    lib.manual_seed(0)
    return {
        "linear": (nn.Linear(6, 5), v), "conv2d": (nn.Conv2d(3, 4, 3), x),
        "conv1d": (nn.Conv1d(3, 2, 3), x[:, :, 0]),
        "batch_norm_train": (nn.BatchNorm2d(3).train(), x),
        "layer_norm": (nn.LayerNorm(6), v), "group_norm": (nn.GroupNorm(1, 3), x),
        "relu": (nn.ReLU(), v), "sigmoid": (nn.Sigmoid(), v), "tanh": (nn.Tanh(), v),
        "softmax": (nn.Softmax(-1), v), "log_softmax": (nn.LogSoftmax(-1), v),
        "leaky_relu": (nn.LeakyReLU(), v), "silu": (nn.SiLU(), v),
        "hardtanh": (nn.Hardtanh(), v), "softplus": (nn.Softplus(), v),
        "max_pool2d": (nn.MaxPool2d(2), x), "avg_pool2d": (nn.AvgPool2d(2), x),
        "max_pool1d": (nn.MaxPool1d(2), x[:, :, 0]),
        "flatten": (nn.Flatten(), x), "cross_entropy": (
            lambda t: F.cross_entropy(t, lib.tensor([0, 1, 2, 3])), v),
        "lstm": (nn.LSTM(6, 4, num_layers=2), s), "gru": (nn.GRU(6, 4), s),
        "rnn": (nn.RNN(6, 4), s),
        "add": (lambda t: t + t, v), "mul": (lambda t: t * 2.0, v), "sub": (lambda t: t - 1, v),
        "div": (lambda t: t / 3.0, v), "sum": (lambda t: t.sum(1), v),
        "mean": (lambda t: t.mean(), v), "mm": (lambda t: t.mm(t.t()), v),
        "bmm": (lambda t: t.bmm(t.transpose(1, 2)), s), "exp": (lambda t: t.exp(), v),
        "log": (lambda t: t.abs().log(), v), "view": (lambda t: t.view(-1), v),
        "cat": (lambda t: lib.cat([t, t]), v), "stack": (lambda t: lib.stack([t, t]), v),
        "max": (lambda t: t.max(), v), "argmax": (lambda t: t.argmax(1), v),
        "transpose": (lambda t: t.transpose(0, 1), v), "permute": (lambda t: t.permute(1, 0), v),
        "pow": (lambda t: t.pow(2), v), "sqrt": (lambda t: t.abs().sqrt(), v),
        "clamp": (lambda t: t.clamp(0, 1), v), "where": (lambda t: lib.where(t > 0, t, t * 2), v),
        "abs": (lambda t: t.abs(), v), "neg": (lambda t: -t, v),
        "rsqrt": (lambda t: t.abs().rsqrt(), v),
        "sin": (lambda t: t.sin(), v), "cumsum": (lambda t: t.cumsum(0), v),
        "topk": (lambda t: t.topk(2), v), "sort": (lambda t: t.sort(), v),
        "unsqueeze": (lambda t: t.unsqueeze(0), v), "squeeze": (lambda t: t[None].squeeze(0), v),
        "gather": (lambda t: t.gather(1, lib.tensor([[0], [1], [2], [3]])), v),
        "copy_": (lambda t: lib.zeros(4, 6).copy_(t), v),
    }


# ops ember computes with other ops than torch's kernel (the rows then name those ops):
# batch norm's running statistics (``add``, torch ``add_``), the recurrent layers'
# input split (``unbind``), ``sort``/``topk`` (``gather``), ``x[None]`` (``slice``)
_COMPOSED = {"cross_entropy", "group_norm", "hardtanh", "softplus", "max_pool1d", "conv1d",
             "batch_norm_train", "lstm", "sort", "topk", "squeeze"}


def _names(prof_mod, fn, x):
    with prof_mod.profile() as p:
        fn(x)
    return {e.name for e in p.events() if e.name.startswith("aten::")}


ECASES, TCASES = _cases(ember), _cases(torch)


@pytest.mark.parametrize("case", sorted(ECASES))
def test_profiler_rows_have_torchs_aten_names(case):
    with ember.no_grad():
        got = _names(eprof, *ECASES[case])
    with torch.no_grad():
        ref = _names(tprof, *TCASES[case])
    assert got, "no rows recorded"
    unknown = [n for n in got if not hasattr(torch.ops.aten, n[len("aten::"):])]
    assert not unknown, f"rows that are no aten operator: {unknown}"
    if case not in _COMPOSED:
        assert got <= ref, f"ember {sorted(got)} vs torch {sorted(ref)}"


def test_backward_rows_keep_their_node_names():
    lin = ember.nn.Linear(4, 3)
    with eprof.profile() as p:
        lin(ember.randn(2, 4)).relu().sum().backward()
    names = {e.name for e in p.events()}
    assert "aten::addmm" in names and "aten::relu" in names
    assert any(n.startswith("autograd::engine::evaluate_function: ") for n in names)
