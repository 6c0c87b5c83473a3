"""Recurrent layers record torch's whole graph: a sweep over RNN/GRU/LSTM × layers ×
directions × batch_first × packed × initial state × dtype (float32 LSTMs over a padded
batch: torch's oneDNN node) × bias, projections and dropout, comparing every node and
edge of the output's and the last states' graphs with torch's; and the graph-free path
(``no_grad``: fused layers) gives the recorded path's values."""
import itertools
import warnings

import numpy as np
import pytest
import torch
from test_node_names import graph, graph_diff

import ember


def _run(lib, mode, L, D, bf, packed, state, dt, bias, proj, drop, grad=True):
    lib.manual_seed(0)
    kw = dict(num_layers=L, bidirectional=D == 2, batch_first=bf, bias=bias, dropout=drop)
    if proj:
        kw["proj_size"] = 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch: projections are not run by oneDNN
        m = getattr(lib.nn, mode)(3, 4, **kw).to(getattr(lib, dt))
    rng = np.random.default_rng(0)
    T, B = 3, 3
    x = lib.tensor(rng.standard_normal((B, T, 3) if bf else (T, B, 3)), dtype=getattr(lib, dt),
                   requires_grad=grad)
    args = [lib.nn.utils.rnn.pack_padded_sequence(x, [3, 1, 2], batch_first=bf,
                                                  enforce_sorted=False) if packed else x]
    if state:
        def s(n):
            return lib.tensor(rng.standard_normal((L * D, B, n)), dtype=getattr(lib, dt),
                              requires_grad=grad)
        h = s(2 if proj else 4)
        args.append((h, s(4)) if mode == "LSTM" else h)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = m(*args)
    hidden = list(out[1]) if mode == "LSTM" else [out[1]]
    return [out[0].data if packed else out[0]] + hidden


def _configs():
    grid = itertools.product(("RNN", "GRU", "LSTM"), (1, 2), (1, 2), (False, True),
                             (False, True), (False, True))
    for i, (mode, L, D, bf, packed, state) in enumerate(grid):
        dt = ("float64", "float32")[i % 2]
        yield mode, L, D, bf, packed, state, dt, i % 3 != 0, mode == "LSTM" and i % 4 == 1, \
            1.0 if L == 2 and i % 5 == 0 else 0.0


CONFIGS = list(_configs())


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: "-".join(map(str, c)))
def test_recurrent_graph_is_torchs(config):
    e = _run(ember, *config)
    t = _run(torch, *config)
    for k, (a, b) in enumerate(zip(e, t)):
        ga, gb = graph(a.grad_fn), graph(b.grad_fn)
        assert ga == gb, (k, graph_diff(ga, gb))


@pytest.mark.parametrize("config", CONFIGS[::7], ids=lambda c: "-".join(map(str, c)))
def test_graph_free_path_gives_the_same_values(config):
    mode, L, D, bf, packed, state, dt, bias, proj, drop = config
    recorded = _run(ember, *config[:-1], 0.0)
    with ember.no_grad():
        fused = _run(ember, *config[:-1], 0.0, grad=False)
    tol = 1e-5 if dt == "float32" else 1e-12
    for a, b in zip(recorded, fused):
        assert b.grad_fn is None
        np.testing.assert_allclose(b.numpy(), a.detach().numpy(), rtol=tol, atol=tol)
