"""Libraries built on torch run unchanged on ember: each driver in ``library_drivers/``
runs a library's documented basic use once on torch and once under
``python -m ember run`` (the library imports ember as torch), and the numbers agree.

The libraries are test dependencies pinned in pyproject.toml's ``test`` extra
(docs/compatibility.md lists what runs)."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

DRIVERS = Path(__file__).parent / "library_drivers"
_ENV = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
        "PYTHONWARNINGS": "ignore"}


def _run(args, timeout=180):
    r = subprocess.run([sys.executable, *args], capture_output=True, text=True,
                       timeout=timeout, env=_ENV, cwd=DRIVERS)
    assert r.returncode == 0, f"{args}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout


def _compare_driver(name, tmp_path, rtol=1e-5, atol=1e-6, loose=None):
    """Run ``library_drivers/<name>`` on torch and on ember; compare every saved array
    (values, shapes and dtypes). ``loose`` maps a key prefix to its own (rtol, atol)."""
    on_torch, on_ember = tmp_path / "torch.npz", tmp_path / "ember.npz"
    _run([str(DRIVERS / name), str(on_torch)])
    out = _run(["-m", "ember", "run", str(DRIVERS / name), str(on_ember)])
    assert "+ember." in out  # the library really ran on ember
    want, got = np.load(on_torch), np.load(on_ember)
    assert sorted(got) == sorted(want)
    for key in want:
        w, g = want[key], got[key]
        assert (g.shape, g.dtype) == (w.shape, w.dtype), key
        if w.dtype.kind in "USb" or w.dtype.kind in "iu":
            assert (g == w).all(), (key, g, w)
        else:
            tol = next((t for p, t in (loose or {}).items() if key.startswith(p)),
                       (rtol, atol))
            np.testing.assert_allclose(g, w, rtol=tol[0], atol=tol[1], err_msg=key)
    return len(want)


def test_einops_basic_use(tmp_path):
    assert _compare_driver("einops_basic.py", tmp_path) >= 16


def test_einops_own_test_suite_on_ember(tmp_path):
    # einops' tests with its torch backend, each result checked against NumPy's, its
    # layers' jit.script test included
    import xml.etree.ElementTree as ET
    report = tmp_path / "einops.xml"
    _run([str(DRIVERS / "einops_suite.py"), "ember", f"--junitxml={report}"])
    suite = ET.parse(report).getroot().find("testsuite")
    counts = {k: int(suite.get(k)) for k in ("tests", "failures", "errors", "skipped")}
    assert counts["failures"] == counts["errors"] == 0, counts
    # the skips are other frameworks' tests (NumPy-only, TensorFlow, JAX...)
    assert counts["tests"] - counts["skipped"] >= 60, counts


def test_torchmetrics_basic_use(tmp_path):
    assert _compare_driver("torchmetrics_basic.py", tmp_path) >= 20


def test_transformers_basic_use(tmp_path):
    # tiny GPT-2, BERT, Llama, T5 and ViT: initial weights (ember draws torch's numbers
    # for the same seed), forward, gradients, SGD steps, state_dict and
    # save_pretrained/from_pretrained round trips, greedy generate(); the Trainer's logged
    # losses and eval loss. Its final weights get a looser bound: AdamW divides
    # gradients that are zero in exact arithmetic (attention key biases, 1e-10 of
    # rounding) by their own square root, which turns float32 rounding into steps of
    # up to 6e-6 after 4 steps. The logits after the SGD steps (values up to 4) carry
    # the float32 rounding of every product of those steps, which differs with the BLAS
    # kernel (OpenBLAS's Haswell kernels on AMD Zen: 3.4e-6 at most, 1e-6 of their size)
    after_steps = {f"{m}/{k}_logits": (1e-5, 1e-5) for m in ("gpt2", "bert", "llama", "t5", "vit")
                   for k in ("eval", "reloaded", "pretrained")}
    n = _compare_driver("transformers_basic.py", tmp_path,
                        loose={"trainer/final/": (1e-4, 2e-5), **after_steps})
    assert n >= 450


def test_long_float32_einsum_sum_is_as_accurate_as_torch():
    # einops' torch.compile test sums 68880 float32 products in one einsum and compares
    # with float64 at rtol 1e-5; BLAS's float32 dot drifted past that
    import torch

    import ember
    rng = np.random.default_rng(0)
    x = rng.random((40, 41, 42)).astype(np.float32)
    ref = np.einsum("abc,abc->", x.astype(np.float64), x.astype(np.float64) * 2)
    errors = []
    for m in (torch, ember):
        t = m.tensor(x)
        out = m.einsum("abc,abcd->d", t, (t * 2)[..., None].expand(-1, -1, -1, 4))
        assert out.dtype == m.float32
        errors.append(np.abs(out.numpy().astype(np.float64) / ref - 1).max())
    assert errors[1] <= max(errors[0], 1e-6), errors


def test_timm_models(tmp_path):
    # five architectures in float64: every weight, gradient and output within 1e-9
    assert _compare_driver("timm_models.py", tmp_path, rtol=1e-7, atol=1e-9) >= 60


def test_lightning_trainer_fit(tmp_path):
    # seed_everything, shuffling, dropout masks, BatchNorm, Adam + StepLR, logged metrics,
    # validate/predict, a checkpoint round trip
    assert _compare_driver("lightning_fit.py", tmp_path) >= 15


def test_accelerate_prepared_loop(tmp_path):
    # prepare(model, optimizer, dataloaders, scheduler), gradient accumulation, clipping,
    # gather_for_metrics, save_state/load_state
    assert _compare_driver("accelerate_loop.py", tmp_path) >= 10
