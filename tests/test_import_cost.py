"""``import ember`` stays light: no optional dependency is imported until it is used
(each extra is imported on first use), checked in fresh child processes."""
import json
import os
import subprocess
import sys

import pytest

# top-level modules of every optional extra in pyproject.toml (and torch, the oracle)
EXTRAS = ["ml_dtypes", "onnx", "onnxruntime", "tensorboard", "google.protobuf", "PIL",
          "graphviz", "mpi4py", "threadpoolctl", "numba", "llvmlite", "scipy", "cupy",
          "matplotlib", "tqdm", "sklearn", "requests", "mnist1d", "torch", "safetensors"]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _child(code):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_ember_imports_no_extra():
    loaded = _child(
        "import sys, json, ember\n"
        f"print(json.dumps([m for m in {EXTRAS!r} if m in sys.modules]))")
    assert loaded == []


@pytest.mark.parametrize("name", ["ml_dtypes", "numba", "onnx"])
def test_each_extra_is_importable_here(name):
    # the test above means something only where the extras are installed
    __import__(name)


def test_ml_dtypes_loaded_on_first_use():
    got = _child(
        "import sys, json, ember\n"
        "before = 'ml_dtypes' in sys.modules\n"
        "x = ember.ones(3, dtype=ember.bfloat16)\n"
        "print(json.dumps([before, 'ml_dtypes' in sys.modules, str(x.dtype),\n"
        "                  type(ember.bfloat16) is type(ember.float32),\n"
        "                  ember.tensor([500.0]).to(ember.float8_e4m3fn).item()]))")
    assert got == [False, True, "ember.bfloat16", True, 448.0]


def test_array_of_ml_dtypes_reaches_ember_first():
    # ml_dtypes imported by the user (or by onnx), not yet by ember
    got = _child(
        "import json, numpy as np, ml_dtypes, ember\n"
        "t = ember.from_numpy(np.array([1.5, 2.0], dtype=ml_dtypes.bfloat16))\n"
        "print(json.dumps([str(t.dtype), t.float().tolist()]))")
    assert got == ["ember.bfloat16", [1.5, 2.0]]
