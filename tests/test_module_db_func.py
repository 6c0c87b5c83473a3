"""Every module of PyTorch's ModuleInfo table through ``ember.func``, against the real
``torch.func`` (tests/module_db_func.py): ``functional_call`` with random parameters and
buffers (strict, tied and untied variants), per-sample gradients
(``vmap(grad(loss), in_dims=(None, None, 0, ...))``), ``vmap`` of the forward over a
leading and over a last batch dim, model ensembling (``stack_module_state`` + ``vmap``
over the stacked state) and ``jacrev`` with respect to a small input, in float32 and
float64, train and eval mode. Values, shapes, dtypes and the buffers after each stage
must be torch's; where torch.func refuses, ember must raise too, unless ember's answer is
what torch's own per-sample loop gives (then the case is listed in :data:`KNOWN`).

CI runs the first :data:`SAMPLES` samples of each module, dtype and mode (2: about a
minute here); ``python tests/test_module_db_func.py`` runs every sample and prints the
counts, the fallbacks to vmap's per-sample loop (exact, slower: recorded, not failed)
and every difference. :data:`KNOWN` is exact: an entry that matches nothing fails.
"""
import collections
import os
import re
import sys
import time
import warnings

import numpy as np
import pytest
import torch
from module_db_func import STAGES, run_case
from module_db_harness import DTYPES, MODES, infos, samples

import ember
from ember import func as efunc

INFOS = infos()
SAMPLES = int(os.environ.get("FUNC_MODULE_DB_SAMPLES", 2))
# modules run with every sample in CI too: their later samples (momentum=None) are where
# torch's vmap refuses and ember's loop answers
EVERY_SAMPLE = {"BatchNorm1d", "BatchNorm2d", "BatchNorm3d"}
# later samples run in CI too (by index): where torch itself is wrong
EXTRA_SAMPLES = {"CTCLoss": (22,), "LinearCrossEntropyLoss": (820,), "Transformer": (25, 33, 57)}
# every n-th sample of a module whose table is very long (the script's full run)
STRIDE = {"LinearCrossEntropyLoss": 10}

_REFUSES_RNN = (r"^(vmap0|vmap_last|ensemble): torch raises RuntimeError: Batching rule not "
                r"implemented for aten::{op}\b.*, ember computes torch's per-sample answer$")
_RNN_PSG = (r"^psg: torch raises RuntimeError: output with shape \[.*\] doesn't match the "
            r"broadcast shape .*, ember computes torch's per-sample answer$",
            "torch's per-sample gradients of its fused RNN fail (an in-place write of a "
            "batched gradient into an unbatched one); ember's equal torch's per-sample loop")
_RNN_WHY = ("torch.func has no batching rule for its fused RNN op (and no fallback); "
            "ember runs its per-sample loop, which gives torch's per-sample answer")
_SIMPLE_AVERAGE = (r"^ensemble: torch raises RuntimeError: vmap: It looks like you're "
                   r"calling \.item\(\).*, ember computes torch's per-sample answer$",
                   "momentum=None reads num_batches_tracked as a number; torch's vmap "
                   "refuses .item(), ember's falls back to its per-sample loop (exact: the "
                   "batched attempt's in-place writes are put back first)")

# module -> [(message pattern, why ember stays different)]
KNOWN = {
    **{name: [(_REFUSES_RNN.format(op=op), _RNN_WHY), _RNN_PSG]
       for name, op in (("GRU", "gru"), ("LSTM", "lstm"), ("RNN", "rnn_(relu|tanh)"))},
    "LSTMCell": [(_REFUSES_RNN.format(op="lstm_cell"), _RNN_WHY)],
    "GaussianNLLLoss": [
        (r"^(psg|vmap0|vmap_last): torch raises RuntimeError: vmap: It looks like you're .*"
         r"data-dependent control flow.*, ember computes torch's per-sample answer$",
         "the loss checks ``var`` for negative values with a Python ``if`` on a tensor; "
         "torch's vmap refuses that control flow, ember's checks every sample at once"),
    ],
    "CTCLoss": [
        (r"^psg: torch raises RuntimeError: Cannot access data pointer of Tensor that "
         r"doesn't have storage, ember computes \(torch's loop raises RuntimeError: Cannot "
         r"access data pointer",
         "torch's ctc_loss backward cannot run under torch.func.grad at all (not even per "
         "sample); ember's per-sample gradients come from its ordinary backward"),
        (r"^vmap_last(\[0\])?: values ",
         "torch is wrong: its CPU ctc_loss reads 1-D (concatenated) targets as if "
         "contiguous; batched at their last dim each sample's targets are a strided view, "
         "and torch reads other labels for every sequence past the first. ember's equals "
         "torch's on contiguous targets (test_ctc_loss_reads_strided_targets)"),
    ],
    "LinearCrossEntropyLoss": [
        (r"^(psg|jacrev): torch raises RuntimeError: In order to use an autograd.Function "
         r"with functorch transforms .*setup_context.*, ember computes (torch's per-sample "
         r"answer$|\(torch's loop raises RuntimeError: In order to use an autograd.Function)",
         "with ``options``, torch runs its chunked op, an autograd.Function without "
         "setup_context, which torch.func refuses (per-sample gradients even one sample at "
         "a time); ember computes the reference path, whose Jacobian is "
         "torch.autograd.functional.jacobian's"),
    ],
    "Transformer": [
        (r"^(psg|vmap0|vmap_last): torch raises RuntimeError: (vmap: It looks like you're "
         r".*(data-dependent control flow|\.item\(\))|Batching rule not implemented for "
         r"aten::_nested_tensor_from_mask_left_aligned).*, ember computes torch's "
         r"per-sample answer$",
         "with a padding mask, torch's encoder checks the mask's values (its nested-tensor "
         "fast path) in Python or packs a nested tensor, which torch's vmap refuses; ember's "
         "encoder has no such path and its answer is torch's per-sample loop's"),
        (r"^ensemble: torch raises NotImplementedError: Could not run 'aten::stack' with "
         r"arguments from the 'NestedTensorCPU' backend.*, ember computes torch's "
         r"per-sample answer$",
         "the same fast path in eval mode returns a nested tensor, which torch's vmap "
         "cannot stack"),
    ],
    "BatchNorm1d": [
        (r"^jacrev: torch raises RuntimeError: During a grad \(vjp, jvp, grad, etc\) "
         r"transform, the function provided attempted to call in-place operation "
         r"\(aten::add_\.Tensor\).*, ember computes torch's per-sample answer$",
         "train mode updates the running statistics in place; torch's grad transforms "
         "refuse writes into captured tensors, ember's jacrev runs the forward once, so "
         "the Jacobian and the running statistics are a plain forward's "
         "(torch.autograd.functional.jacobian's)"),
        _SIMPLE_AVERAGE,
    ],
    "BatchNorm2d": [_SIMPLE_AVERAGE],
    "BatchNorm3d": [_SIMPLE_AVERAGE],
}

_RESULTS = {}


def _cases(name, n_samples=None):
    """``[(case, stage, message)]`` and ``{stage: runs}`` and the fallback warnings of a
    module, run once per process."""
    if n_samples is None:
        n_samples = 10 ** 6 if name in EVERY_SAMPLE else SAMPLES
    key = (name, n_samples)
    if key in _RESULTS:
        return _RESULTS[key]
    info = INFOS[name]
    msgs, runs, fell = [], collections.Counter(), []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for dtype in DTYPES:
            for training in MODES:
                mode = "train" if training else "eval"
                for i, s in enumerate(samples(info, dtype, training)):
                    if (i >= n_samples or i % STRIDE.get(name, 1)) and \
                            i not in EXTRA_SAMPLES.get(name, ()):
                        continue
                    case = f"{str(dtype)[6:]}/{mode}/{i}:{s.desc}"
                    res = run_case(info, s, dtype, training)
                    if isinstance(res, str):
                        runs["not run"] += 1
                        continue
                    for stage, (stage_msgs, stage_fell) in res.items():
                        runs[stage] += 1
                        msgs.extend((case, stage, m) for m in stage_msgs)
                        fell.extend(f"{case} [{stage}] {w}" for w in stage_fell)
    _RESULTS[key] = (msgs, runs, fell)
    return _RESULTS[key]


def _known(name, msg):
    return [i for i, (pat, _) in enumerate(KNOWN.get(name, ())) if re.search(pat, msg)]


@pytest.mark.parametrize("name", sorted(INFOS))
def test_module(name):
    msgs, _, _ = _cases(name)
    bad = [f"{case}: {m[:300]}" for case, _, m in msgs if not _known(name, m)]
    assert not bad, f"nn.{name}: {len(bad)} differences from torch.func:\n" + "\n".join(bad[:20])


def test_known_is_exact():
    """Each KNOWN entry still matches a difference of the swept samples."""
    assert set(KNOWN) <= set(INFOS)
    for name, entries in KNOWN.items():
        used = {i for _, _, m in _cases(name)[0] for i in _known(name, m)}
        stale = [entries[i][0] for i in range(len(entries)) if i not in used]
        assert not stale, f"nn.{name}: KNOWN entries that match nothing now: {stale}"


def test_sweep_is_wide():
    runs = collections.Counter()
    for name in INFOS:
        runs.update(_cases(name)[1])
    print("\n" + "; ".join(f"{s} {runs[s]}" for s in STAGES))
    # floors (SAMPLES=2, the batch norms' every sample: 114 modules, 2 dtypes, 2 modes)
    if SAMPLES == 2:
        assert runs["call"] >= 970 and runs["psg"] >= 970 and runs["vmap0"] >= 970
        assert runs["vmap_last"] >= 970 and runs["strict"] >= 360
        assert runs["ensemble"] >= 300 and runs["tied"] >= 300 and runs["jacrev"] >= 530
    assert runs["not run"] == 0


# ----- the fixes, one by one (each failed on the tree before them) -------------------------
def test_fallback_puts_back_what_the_batched_call_wrote():
    """Ensembling batch norms in train mode: the batched call counts
    ``num_batches_tracked`` before it meets a running-statistics update it has no rule
    for, and the per-sample loop counted again (2 instead of torch's 1; with
    ``momentum=None`` the running statistics came out wrong too)."""
    x = np.random.default_rng(0).standard_normal((4, 3, 2, 2)).astype(np.float32)
    got = {}
    for lib in (torch, ember):
        lib.manual_seed(0)
        models = [lib.nn.BatchNorm2d(3, momentum=None) for _ in range(2)]
        params, buffers = lib.func.stack_module_state(models)

        def run(p, b, xx, m=models[0], lib=lib):
            return lib.func.functional_call(m, (p, b), (xx,))
        if lib is torch:  # torch's vmap refuses .item(): its per-sample loop is the meaning
            out = torch.stack([run({k: v[i] for k, v in params.items()},
                                   {k: v[i] for k, v in buffers.items()},
                                   torch.from_numpy(x)) for i in range(2)])
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = efunc.vmap(run, in_dims=(0, 0, None))(params, buffers,
                                                            ember.from_numpy(x.copy()))
        got[lib] = (out, buffers)
    (t_out, t_buf), (e_out, e_buf) = got[torch], got[ember]
    np.testing.assert_allclose(e_out.detach().numpy(), t_out.detach().numpy(), atol=1e-5)
    assert e_buf["num_batches_tracked"].tolist() == [1, 1]
    for k in ("running_mean", "running_var"):
        np.testing.assert_allclose(e_buf[k].numpy(), t_buf[k].numpy(), atol=1e-6)


def test_fallback_puts_back_writes_into_captured_tensors():
    """A write the batched call made into a tensor from outside, before an op without a
    batching rule: put back before the per-sample loop, which then writes each sample's
    value into its own row."""
    rows = ember.zeros(3, 2)

    def f(x, row):
        row.add_(x)
        return ember.nn.functional.ctc_loss(  # no batching rule: the loop runs
            x.log_softmax(0).reshape(2, 1, 1).expand(2, 1, 2).contiguous(),
            ember.tensor([[1]]), [2], [1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        efunc.vmap(f)(ember.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), rows)
    assert rows.tolist() == [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]


@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
def test_softmax_of_zero_dim_samples_differentiates_per_sample(fn):
    """``vmap(grad(f))`` through softmax over a 0-d sample's dim 0 (nn.Softmax on a
    scalar input): the backward summed over the whole batch (ember gave -4 for torch's 0
    with three samples), and so did log_softmax's with create_graph and its jvp."""
    x = np.array([0.5, 0.4, 0.3], np.float32)
    res = {}
    for lib in (torch, ember):
        F, X = lib.func, lib.from_numpy(x.copy())
        op = getattr(lib, fn)

        def loss(v, op=op):
            o = op(v, 0)
            return (o * o * v).sum()
        res[lib] = [F.vmap(F.grad(loss))(X), F.vmap(F.grad(F.grad(loss)))(X),
                    F.vmap(lambda v, op=op, F=F: F.jvp(lambda u: op(u, 0), (v,), (3 * v,))[1])(X)]
    for e, t in zip(res[ember], res[torch]):
        np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), atol=1e-6)


def test_weighted_smoothed_cross_entropy_under_vmap():
    """Per-sample gradients of ``linear_cross_entropy`` with class weights, label
    smoothing and ``ignore_index``: the mean's denominator took the kept targets' weights
    with a boolean mask, which vmap refuses (torch's computes)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 8, 5)).astype(np.float32)
    t = rng.integers(0, 4, (3, 8))
    t[:, 2] = 1
    w = rng.standard_normal((4, 5)).astype(np.float32)
    cw = np.array([4.6, 0.7, 0.1, 1.7], np.float32)
    res = {}
    for lib in (torch, ember):
        weight, class_weight = lib.from_numpy(w.copy()), lib.from_numpy(cw.copy())

        def loss(lw, xx, tt, lib=lib, class_weight=class_weight):
            return lib.nn.functional.linear_cross_entropy(
                xx, lw, tt, weight=class_weight, ignore_index=1, label_smoothing=0.1)
        res[lib] = lib.func.vmap(lib.func.grad(loss), in_dims=(None, 0, 0))(
            weight, lib.from_numpy(x.copy()), lib.from_numpy(t.copy()))
    np.testing.assert_allclose(res[ember].numpy(), res[torch].numpy(), atol=1e-6)


def test_ctc_loss_reads_strided_targets():
    """1-D (concatenated) targets given as a strided view, as vmap over a last dim gives
    them: ember reads the view's labels (torch 2.13's CPU kernel reads them as if
    contiguous and gives other losses for every sequence past the first)."""
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.standard_normal((20, 3, 6)).astype(np.float32)).log_softmax(2)
    t = torch.from_numpy(rng.integers(1, 6, 24))
    wide = torch.stack([t, torch.ones_like(t)], -1)
    args = ((20,) * 3, (10, 8, 6))
    expected = torch.nn.functional.ctc_loss(x, t, *args, reduction="none")
    torch_strided = torch.nn.functional.ctc_loss(x, wide[:, 0], *args, reduction="none")
    ex = ember.from_numpy(x.numpy().copy())
    ew = ember.from_numpy(wide.numpy().copy())
    got = ember.nn.functional.ctc_loss(ex, ew[:, 0], *args, reduction="none")
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-5)
    assert not np.allclose(torch_strided.numpy(), expected.numpy())  # torch's misreading
    batched = efunc.vmap(lambda tt: ember.nn.functional.ctc_loss(ex, tt, *args,
                                                                 reduction="none"),
                         in_dims=-1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        per_sample = batched(ember.stack([ember.from_numpy(t.numpy().copy())] * 2, -1))
    np.testing.assert_allclose(per_sample.numpy(), np.stack([expected.numpy()] * 2),
                               rtol=1e-5)


def test_functional_call_restores_a_module_held_twice():
    """torch 2.13 leaves the replacement in a module held under two names after
    ``functional_call`` (default ``tie_weights=True``) with values for the second name;
    ember restores the module's own parameters (docs/differences.md)."""
    for lib in (torch, ember):
        m = lib.nn.Linear(2, 2)
        w0 = m.weight.detach().clone()

        class Holder(lib.nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.a, self.b = inner, inner

            def forward(self, x):
                return self.a(x)
        given = {"b.weight": lib.zeros(2, 2), "b.bias": lib.zeros(2)}
        out = lib.func.functional_call(Holder(m), given, (lib.ones(1, 2),))
        assert out.tolist() == [[0.0, 0.0]]
        assert bool((m.weight == w0).all()) is (lib is ember), lib.__name__


def main(first=""):
    """Every sample of every module (from the module named ``first`` on, in name
    order): each difference, the counts and the fallbacks."""
    start = time.process_time()
    runs, fell, total = collections.Counter(), [], []
    for name in sorted(n for n in INFOS if n >= first):
        msgs, r, f = _cases(name, n_samples=10 ** 6)
        runs.update(r)
        fell.extend(f"{name} {w}" for w in f)
        for case, _, m in msgs:
            tag = "known" if _known(name, m) else "DIFFERS"
            total.append(tag)
            print(f"{tag:8s} {name} {case} {m[:220]}")
    print("\nstages run: " + "; ".join(f"{s} {runs[s]}" for s in STAGES)
          + f"; cases not run {runs['not run']}")
    print(f"differences: {total.count('DIFFERS')} unlisted, {total.count('known')} known")
    kinds = collections.Counter(re.sub(r".*\] ", "", w).split(";")[0] for w in fell)
    print(f"fallbacks to vmap's per-sample loop: {len(fell)}")
    for k, n in kinds.most_common():
        print(f"  {n:4d}  {k[:150]}")
    print(f"CPU time {time.process_time() - start:.1f} s")
    return 1 if "DIFFERS" in total else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:2]))
