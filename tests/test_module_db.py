"""Every nn module of PyTorch's own ModuleInfo table (``torch.testing._internal.
common_modules.module_db``, 114 entries in torch 2.13.0) swept against torch: for
float32 and float64, train and eval mode, each sample the table gives, ember's module of
the same name is built from the same constructor arguments, loaded with torch's
``state_dict()`` and run on the same inputs; the state_dict keys (order too), the
parameter names, shapes and dtypes, the ``repr``, the outputs (values at
``torch.testing``'s tolerances, dtype, shape, nesting), the output's node name, the
gradients of the inputs and of every parameter (``None`` is not zeros) and the buffers
after the forward must be torch's (tests/module_db_harness.py). The first three samples
of each dtype run again with every input a non-contiguous view (stride 2 in the last
dim). A float32 value outside the tolerance passes where a float64 run shows ember no
further from the exact result than twice torch's own distance (rounding, not a wrong
number). The table's error rows (``module_error_inputs_func``) must raise the declared
class with a matching message.

Samples that draw random numbers inside the module (dropout) are run as the table
gives them: every dropout in the table is 0.0, so their values are compared too.
Capped: ``LinearCrossEntropyLoss`` gives 857 samples per dtype and mode (a product of
its options); every third is taken (:data:`STRIDE`), about 3 s instead of 9 s.

What stays different is listed in :data:`KNOWN` (module, message pattern, reason) and
in docs/differences.md ("nn modules swept against PyTorch's ModuleInfo table"); a
module ember lacks would be in :data:`MISSING`. Both lists are exact: an entry that no
longer matches fails ``test_known_and_missing_are_exact``. ``python
tests/test_module_db.py`` prints the table of cases per module.
"""
import re
import sys
import warnings

import numpy as np
import pytest
import torch
from module_db_harness import (
    DTYPES,
    MODES,
    WEIGHED,
    error_samples,
    infos,
    run_case,
    run_error_case,
    samples,
)

import ember

INFOS = infos()
# modules of the table that ember lacks (checked to be still missing)
MISSING = frozenset()
# every n-th sample of a module whose table is very long
STRIDE = {"LinearCrossEntropyLoss": 3}
# how many samples per dtype run again on strided (non-contiguous) inputs
STRIDED_SAMPLES = 3

# module -> [(message pattern, why ember stays different)]
KNOWN = {
    "LinearCrossEntropyLoss": [
        (r"^out0: grad_fn NllLossBackward0 != GeneratedBackwardFor_torch_nn__linear_cross_"
         r"entropy_batch_chunked(_no_reduction)?_defaultBackward$",
         "with ``options``, PyTorch runs its chunked custom op (a generated node); ember "
         "computes the reference path in one piece: the same values and gradients"),
        (r"^out0: grad_fn NllLossBackward0 != SqueezeBackward1$",
         "the same chunked op on an unbatched input, squeezed after it"),
    ],
}

_RESULTS = {}


def _cases(name):
    """(case id, differences) for every sample and error row of a module, run once."""
    if name in _RESULTS:
        return _RESULTS[name]
    info = INFOS[name]
    step = STRIDE.get(name, 1)
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for dtype in DTYPES:
            for training in MODES:
                mode = "train" if training else "eval"
                for i, s in enumerate(samples(info, dtype, training)):
                    if i % step:
                        continue
                    case = f"{str(dtype)[6:]}/{mode}/{i}:{s.desc}"
                    out.append((case, run_case(info, s, dtype, training)))
            # the first samples again with every input a view of stride 2 (last dim)
            for i, s in enumerate(samples(info, dtype, True)[:STRIDED_SAMPLES]):
                out.append((f"{str(dtype)[6:]}/strided/{i}:{s.desc}",
                            run_case(info, s, dtype, True, strided=True)))
        for training in MODES:
            for i, err in enumerate(error_samples(info, training)):
                msg = run_error_case(info, err)
                out.append((f"error/{'train' if training else 'eval'}/{i}:"
                            f"{err.module_error_input.desc}", [msg] if msg else []))
    _RESULTS[name] = out
    return out


def _known(name, msg):
    return [i for i, (pat, _) in enumerate(KNOWN.get(name, ())) if re.search(pat, msg)]


def _undocumented(name):
    return [f"{case}: {msg[:300]}" for case, msgs in _cases(name) for msg in msgs
            if not _known(name, msg)]


PRESENT = sorted(n for n in INFOS if n not in MISSING)


@pytest.mark.parametrize("name", PRESENT)
def test_module(name):
    bad = _undocumented(name)
    assert not bad, f"nn.{name}: {len(bad)} differences from torch:\n" + "\n".join(bad[:20])


def test_known_and_missing_are_exact():
    """Each KNOWN entry still matches a difference; MISSING is what ember lacks."""
    assert set(KNOWN) <= set(INFOS)
    for name, entries in KNOWN.items():
        used = {i for _, msgs in _cases(name) for msg in msgs for i in _known(name, msg)}
        stale = [entries[i][0] for i in range(len(entries)) if i not in used]
        assert not stale, f"nn.{name}: KNOWN entries that match nothing now: {stale}"
    lacking = {n for n in INFOS if not hasattr(ember.nn, n)}
    assert lacking == MISSING, f"ember.nn lacks {sorted(lacking)}; MISSING says {sorted(MISSING)}"


def test_sweep_is_wide():
    assert len(INFOS) == 114
    assert {"TransformerDecoderLayer", "CTCLoss", "FractionalMaxPool3d", "LazyConv3d",
            "LSTM", "MultiheadAttention", "RMSNorm", "CircularPad3d"} <= set(PRESENT)


def test_fixed_rows_stay_fixed():
    """What this sweep found wrong, as plain checks (each differed from torch before)."""
    F = ember.nn.functional
    # an empty batch: PyTorch's scaled copy, running statistics untouched (were NaN)
    bn = ember.nn.BatchNorm2d(3)
    x = ember.zeros(0, 3, 2, 2, requires_grad=True)
    y = bn(x)
    assert y.grad_fn.name() == "AddBackward0" and y.shape == (0, 3, 2, 2)
    assert bn.running_mean.tolist() == [0.0] * 3 and bn.running_var.tolist() == [1.0] * 3
    assert bn.num_batches_tracked.item() == 1
    y.sum().backward()
    assert bn.weight.grad.tolist() == [0.0] * 3
    assert ember.nn.BatchNorm1d(3, affine=False)(ember.zeros(0, 3)).grad_fn is None
    with pytest.raises(ValueError, match="eps must be positive during training"):
        ember.nn.BatchNorm1d(3, eps=0.0)(ember.randn(4, 3))
    with pytest.raises(ValueError, match="eps must be non-negative"):
        F.batch_norm(ember.randn(4, 3), ember.zeros(3), ember.ones(3), eps=-1.0)
    # eval instance norm over running statistics: PyTorch's view of a batch norm
    inorm = ember.nn.InstanceNorm1d(3, track_running_stats=True).eval()
    assert inorm(ember.randn(2, 3, 5, requires_grad=True)).grad_fn.name() == "ViewBackward0"
    # fractional max pooling: one node, unbatched without a squeeze, a longer
    # _random_samples table read in its first rows
    u = ember.rand(2, 4, 3)
    z = F.fractional_max_pool3d(ember.randn(4, 5, 5, 5, requires_grad=True), 2,
                                output_size=3, _random_samples=u)
    assert z.grad_fn.name() == "FractionalMaxPool3DBackward0" and z.shape == (4, 3, 3, 3)
    z2 = F.fractional_max_pool2d(ember.randn(1, 4, 5, 5, requires_grad=True), 2,
                                 output_size=3, _random_samples=ember.rand(1, 4, 2))
    assert z2.grad_fn.name() == "FractionalMaxPool2DBackward0"
    with pytest.raises(RuntimeError, match="same dtype as input"):
        F.fractional_max_pool2d(ember.randn(1, 4, 5, 5), 2, output_size=3,
                                _random_samples=ember.rand(1, 4, 2, dtype=ember.float64))
    with pytest.raises(RuntimeError, match="no less then input batch size"):
        F.fractional_max_pool2d(ember.randn(2, 4, 5, 5), 2, output_size=3,
                                _random_samples=ember.rand(1, 4, 2))
    # the batch sizes before the target's dtype and shape (ValueError, as PyTorch)
    with pytest.raises(ValueError, match=r"batch_size \(4\) to match target batch_size \(5\)"):
        F.cross_entropy(ember.randn(4, 2), ember.rand(5, 2))
    with pytest.raises(ValueError, match="match target batch_size"):
        F.nll_loss(ember.randn(4, 2, 3), ember.rand(5, 3))
    with pytest.raises(RuntimeError, match="Expected target size"):
        F.nll_loss(ember.randn(4, 2, 3), ember.rand(4, 2))
    with pytest.raises(RuntimeError, match="Long or Byte"):
        F.nll_loss(ember.randn(2), ember.rand(3))
    # constructor errors as PyTorch's
    with pytest.raises(TypeError, match="delta must be a float or int"):
        ember.nn.HuberLoss(delta=1 + 0j)
    with pytest.raises(ValueError, match=r"num_channels \(10\) must be divisible by "
                       r"num_groups \(3\)"):
        ember.nn.GroupNorm(3, 10)
    # LinearCrossEntropyLoss: PyTorch's module, checks and reference path
    ember.manual_seed(0)
    lce = ember.nn.LinearCrossEntropyLoss(5, 4, out_features=(3,), bias=True)
    assert list(lce.state_dict()) == ["linear.weight", "linear.bias"]
    assert tuple(lce.linear.weight.shape) == (12, 5)
    inp = ember.randn(6, 5, requires_grad=True)
    loss = lce(inp, ember.randint(0, 4, (6, 3)))
    assert loss.grad_fn.name() == "NllLoss2DBackward0" and loss.shape == ()
    with pytest.raises(RuntimeError, match="last dimensions"):
        lce(ember.randn(6, 3), ember.randint(0, 4, (6, 3)))
    with pytest.raises(RuntimeError, match="label_smoothing to be in range"):
        ember.nn.LinearCrossEntropyLoss(5, 4, label_smoothing=2.0)
    assert repr(ember.nn.LinearCrossEntropyOptions()) == repr(
        torch.nn.LinearCrossEntropyOptions())


def test_linear_cross_entropy_matches_torch_beyond_the_table():
    """Unbatched input, probability targets, ignore_index and weights, against torch."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((7, 5)).astype(np.float32)
    w = rng.standard_normal((4, 2, 5)).astype(np.float32)
    b = rng.standard_normal((4, 2)).astype(np.float32)
    t = rng.integers(0, 4, (7, 2))
    t[1, 0] = -100
    cw = rng.random(4).astype(np.float32)
    res = []
    for lib in (torch, ember):
        xs = lib.from_numpy(x.copy()).requires_grad_()
        ws = lib.from_numpy(w.copy()).requires_grad_()
        loss = lib.nn.functional.linear_cross_entropy(
            xs, ws, lib.from_numpy(t.copy()), linear_bias=lib.from_numpy(b.copy()),
            weight=lib.from_numpy(cw.copy()), reduction="mean")
        loss.backward()
        u = lib.from_numpy(x[0].copy()).requires_grad_()
        p = lib.softmax(lib.from_numpy(rng.standard_normal(4).astype(np.float32)), 0) \
            if lib is torch else lib.from_numpy(res[0][4])
        loss1 = lib.nn.functional.linear_cross_entropy(u, ws[:, 0], p, label_smoothing=0.2)
        loss1.backward()
        res.append([loss.item(), xs.grad.numpy(), ws.grad.numpy(), loss1.item(),
                    p.detach().numpy(), u.grad.numpy(), loss.grad_fn.name()])
    (tl, tgx, tgw, tl1, _, tgu, tn), (el, egx, egw, el1, _, egu, en) = res
    assert tn == en
    np.testing.assert_allclose([el, el1], [tl, tl1], rtol=1e-5)
    for e, t_ in ((egx, tgx), (egw, tgw), (egu, tgu)):
        np.testing.assert_allclose(e, t_, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fractional_max_pool_special_values_match_torch(dtype):
    """NaN (the last of a window wins), inf, ties and -0.0, batched and not, against
    torch: values, indices, node name and the input gradient."""
    a = np.random.default_rng(5).standard_normal((2, 3, 7, 6)).astype(dtype)
    a[0, 0, 1:3, 1:3] = np.nan
    a[0, 1, 2, 2] = np.nan
    a[1, 1, :3, :] = np.inf
    a[1, 2] = 0.5  # every window a tie
    a[0, 2, :, :3] = -0.0
    r = np.random.default_rng(6).random((2, 3, 2)).astype(dtype)
    g = np.random.default_rng(7).standard_normal((2, 3, 4, 3)).astype(dtype)
    for batched in (True, False):
        res = []
        for lib in (torch, ember):
            x = lib.from_numpy(a.copy() if batched else a[0].copy()).requires_grad_()
            y, idx = lib.nn.functional.fractional_max_pool2d(
                x, (2, 3), output_size=(4, 3), return_indices=True,
                _random_samples=lib.from_numpy(r.copy() if batched else r[:1].copy()))
            y.backward(lib.from_numpy(g.copy() if batched else g[0].copy()))
            res.append((y.detach().numpy(), idx.numpy(), y.grad_fn.name(), x.grad.numpy()))
        (ty, ti, tn, tg), (ey, ei, en, eg) = res
        np.testing.assert_array_equal(ey, ty)
        assert np.array_equal(np.signbit(ey), np.signbit(ty))
        np.testing.assert_array_equal(ei, ti)
        assert en == tn == "FractionalMaxPool2DBackward0"
        np.testing.assert_allclose(eg, tg, rtol=1e-6)


def main():
    """Print module: cases, equal, documented, differing, then the undocumented ones."""
    print(f"{'module':28s} cases equal documented differing")
    totals, lines = [0, 0, 0], []
    for name in PRESENT:
        cases = _cases(name)
        n = len(cases)
        k = sum(1 for _, msgs in cases if msgs and all(_known(name, m) for m in msgs))
        u = sum(1 for _, msgs in cases if msgs) - k
        totals = [totals[0] + n, totals[1] + k, totals[2] + u]
        print(f"{name:28s} {n:5d} {n - k - u:5d} {k:10d} {u:9d}")
        lines += [f"  {name} {line}" for line in _undocumented(name)]
    n, k, u = totals
    print(f"{'total':28s} {n:5d} {n - k - u:5d} {k:10d} {u:9d}")
    print(f"float32 value differences weighed as rounding no worse than torch's: {WEIGHED[0]}")
    print(f"missing: {sorted(MISSING)}")
    print("\n".join(lines))
    return 1 if u else 0


if __name__ == "__main__":
    sys.exit(main())
