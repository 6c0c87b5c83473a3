"""Real models from the libraries' own registries give torch's numbers under ember: one
small variant of each of timm's model families (library_drivers/timm_zoo.py, float64)
and tiny random configs of transformers' model classes (library_drivers/
transformers_zoo.py, float32: encoders, decoders, encoder-decoders, vision, speech),
each run once on torch and once under ``python -m ember run``: seeded initial weights,
a training-mode forward with a loss, every gradient, an eval-mode forward, greedy
generation.

CI runs a fixed sample of each sweep (``TIMM_SAMPLE``, ``TRANSFORMERS_SAMPLE``);
``python tests/test_library_zoo.py --all`` runs every model of both sweeps and prints
the table docs/compatibility.md keeps. What still differs is listed in ``KNOWN`` with the
reason, and asserted both ways: an entry that starts to pass must be removed."""
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

DRIVERS = Path(__file__).parent / "library_drivers"
_ENV = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
        "PYTHONWARNINGS": "ignore"}

# timm in float64: each array within 1e-6 of its largest value: a few models compute
# parts in float32 on purpose (EfficientViT's linear attention calls .float(), Gemma 4's
# rotary frequencies and the ViTs' position-embedding resampling are float32), 1.2e-7
# of their size at most, gradients included; the rest agree to 1e-10
TIMM_TOL = (1e-6, 1e-12)
# transformers in float32: within 2e-5 of each array's largest value (float32 rounding
# through two layers); the speech models' CTC loss runs in float32 over 48 frames
# (log_softmax(dtype=float32) in their code), whose gradients differ with the order of
# its log-space sums (1.5e-5 seen): 5e-5
TRANSFORMERS_TOL = (2e-5, 1e-6)
CTC_TOL = (5e-5, 1e-6)
CTC_MODELS = {"wav2vec2", "hubert", "wavlm", "data2vec-audio"}

# what still differs: "timm/FAMILY" or "transformers/KEY" -> (the start of its status,
# the reason)
KNOWN = {
    "timm/cpubone": (
        "differs: cpubone/48/",
        "dropout after layers whose output torch lays out channels-last (torch carries a "
        "tensor's memory format through convolutions, GELU, GroupNorm and residual adds; "
        "ember's outputs are row-major), so its mask is drawn in another order: the "
        "training-mode values at 48 pixels (3x3 maps) differ; at 32 pixels (1x1 maps) "
        "both orders are one"),
}

TIMM_SAMPLE = ("resnet", "convnext", "efficientnet", "byobnet", "mambaout", "nfnet", "cpubone")
TRANSFORMERS_SAMPLE = ("bert", "gpt2", "llama", "phi", "t5", "vit", "swin", "wav2vec2")


def _run(args, timeout=900):
    r = subprocess.run([sys.executable, *args], capture_output=True, text=True,
                       timeout=timeout, env=_ENV, cwd=DRIVERS)
    assert r.returncode == 0, f"{args}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout


def _status(key, want, got, tol, grad_tol=None):
    """``ok``, or what differs for one model: ``raises: ...`` (ember raises where torch
    does not), ``differs: ARRAY`` (the first array off by more than ``tol``, relative to
    its largest value; gradients by ``grad_tol`` when given), ``keys: ...``; ``torch
    raises`` when torch itself refuses."""
    if f"{key}/error" in want:
        return f"torch raises: {want[f'{key}/error']}"
    if f"{key}/error" in got:
        return f"raises: {got[f'{key}/error']}"
    wk = sorted(k for k in want if k.startswith(f"{key}/"))
    gk = sorted(k for k in got if k.startswith(f"{key}/"))
    if wk != gk:
        return f"keys: {sorted(set(wk) ^ set(gk))[:3]}"
    for k in wk:
        rtol, atol = grad_tol if grad_tol and k.endswith("/grad") else tol
        w, g = want[k], got[k]
        if (w.shape, w.dtype) != (g.shape, g.dtype):
            return f"differs: {k} {g.shape} {g.dtype} for {w.shape} {w.dtype}"
        if w.dtype.kind in "USbiu":
            if not (w == g).all():
                return f"differs: {k}"
            continue
        scale = np.abs(w).max(initial=0.0)
        error = np.abs(g.astype(np.float64) - w).max(initial=0.0)
        if not error <= atol + rtol * scale:  # NaN where torch has a number: differs too
            return f"differs: {k} by {error:.1e} of {scale:.1e}"
    return "ok"


def sweep(driver, keys, tol_of, tmp):
    """Run ``driver`` for ``keys`` (all when empty) on torch and on ember; each model's
    status. ``tol_of(model)`` gives its (tolerance, gradient tolerance)."""
    on_torch, on_ember = Path(tmp) / "torch.npz", Path(tmp) / "ember.npz"
    _run([str(DRIVERS / driver), str(on_torch), *keys])
    out = _run(["-m", "ember", "run", str(DRIVERS / driver), str(on_ember), *keys])
    assert "+ember." in out  # the library really ran on ember
    want, got = np.load(on_torch), np.load(on_ember)
    models = sorted({k.split("/")[0] for k in want})
    assert not keys or models == sorted(keys), models
    return {m: _status(m, want, got, *tol_of(m)) for m in models}


def _check(library, statuses):
    """Each model passes, or is KNOWN with its status; a KNOWN model that passes fails."""
    wrong = {}
    for m, s in statuses.items():
        known = KNOWN.get(f"{library}/{m}")
        if (s != "ok") if known is None else not s.startswith(known[0]):
            wrong[m] = s
    assert not wrong, wrong


def _transformers_tol(key):
    return (CTC_TOL if key in CTC_MODELS else TRANSFORMERS_TOL), None


def _timm_tol(key):
    return TIMM_TOL, None


def test_timm_families_sample(tmp_path):
    _check("timm", sweep("timm_zoo.py", TIMM_SAMPLE, _timm_tol, tmp_path))


def test_transformers_classes_sample(tmp_path):
    _check("transformers", sweep("transformers_zoo.py", TRANSFORMERS_SAMPLE,
                                 _transformers_tol, tmp_path))


def test_status_names_the_first_array_that_differs():
    want = {"m/a": np.ones(3), "m/b": np.array([1.0, 2.0])}
    got = {"m/a": np.ones(3), "m/b": np.array([1.0, 2.1])}
    assert _status("m", want, want, TIMM_TOL) == "ok"
    assert _status("m", want, got, TIMM_TOL).startswith("differs: m/b by 1.0e-01")
    assert _status("m", want, {"m/error": np.array("E: x")}, TIMM_TOL) == "raises: E: x"


# ----- what the sweeps found, each on its own ---------------------------------------------
def test_dropout_of_a_transposed_input_draws_torch_mask():
    # torch's dropout draws its mask into empty_like(input): a transposed input's mask
    # is filled in the input's memory order (WavLM drops out an attention output that
    # is a transposed view; ember's masks were drawn in logical order)
    import torch

    import ember
    masks = []
    for m in (torch, ember):
        m.manual_seed(0)
        x = m.ones(3, 40, dtype=m.float64).t()
        masks.append((m.nn.functional.dropout(x, 0.5).numpy(),
                      m.nn.Dropout(0.3)(m.ones(2, 5, 7).permute(2, 0, 1)).numpy(),
                      m.nn.functional.dropout(m.ones(4, 6)[:, ::2], 0.5).numpy(),
                      m.nn.functional.dropout(m.ones(2, 3, 4, 5).contiguous(
                          memory_format=m.channels_last), 0.5).numpy()))
    for want, got in zip(*masks):
        np.testing.assert_array_equal(got, want)


def test_dropout_mask_under_the_profiler_and_under_a_trace():
    # the profiler only watches: a transposed input's mask is still torch's; a trace must
    # record the draw (a replay draws a new mask), not keep the example's as a constant
    import torch

    import ember
    masks = []
    for m in (torch, ember):
        m.manual_seed(0)
        x = m.ones(3, 40).t()
        with m.profiler.profile():
            masks.append(m.nn.functional.dropout(x, 0.5).numpy())
    np.testing.assert_array_equal(masks[1], masks[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = ember.jit.trace(lambda x: ember.nn.functional.dropout(x.t(), 0.5),
                                 ember.ones(40, 3), check_trace=False)
    a, b = traced(ember.ones(40, 3)), traced(ember.ones(40, 3))
    assert not np.array_equal(a.numpy(), b.numpy())


def test_to_with_none_positionally_is_torch_to_device_none():
    # transformers' rotary embeddings call inv_freq.to(device) with device=None
    import ember
    x = ember.ones(2)
    assert x.to(None) is x
    assert x.to(None, ember.float64).dtype == ember.float64
    assert x.to(None, None) is x


def test_new_factories_take_size_as_keyword():
    # Longformer builds its masks with hidden_states.new_ones(size=..., dtype=...)
    import torch

    import ember
    for m in (torch, ember):
        x = m.ones(2, dtype=m.float64)
        assert x.new_ones(size=(2, 3)).shape == (2, 3)
        assert x.new_zeros(size=[1]).dtype == m.float64
        assert x.new_empty(size=(4,)).shape == (4,)
        with np.testing.assert_raises(TypeError):
            x.new_ones(2, size=(3,))


def test_cudnn_flags_sets_and_restores():
    # the speech models' CTC loss runs inside torch.backends.cudnn.flags(enabled=False)
    import ember.backends.cudnn as cudnn
    assert cudnn.enabled
    with cudnn.flags(enabled=False, deterministic=True):
        assert (cudnn.enabled, cudnn.deterministic) == (False, True)
    assert (cudnn.enabled, cudnn.deterministic) == (True, False)


def main():
    """Run every model of both sweeps; print each status and the counts."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, driver, tol_of in (("timm", "timm_zoo.py", _timm_tol),
                                     ("transformers", "transformers_zoo.py",
                                      _transformers_tol)):
            statuses = sweep(driver, (), tol_of, tmp)
            for m, s in statuses.items():
                rows.append((name, m, s))
                print(f"{name:13s} {m:24s} {s[:150]}", flush=True)
    for name in ("timm", "transformers"):
        mine = [s for n, _, s in rows if n == name]
        tried = [s for s in mine if not s.startswith("torch raises")]
        print(f"{name}: {len(mine)} tried, {len(tried)} run on torch, "
              f"{sum(s == 'ok' for s in tried)} agree, "
              f"{sum(f'{n}/{m}' in KNOWN for n, m, _ in rows if n == name)} KNOWN")
    for name in ("timm", "transformers"):
        _check(name, {m: s for n, m, s in rows
                      if n == name and not s.startswith("torch raises")})


if __name__ == "__main__":
    if "--all" not in sys.argv:
        sys.exit("usage: python tests/test_library_zoo.py --all")
    main()
