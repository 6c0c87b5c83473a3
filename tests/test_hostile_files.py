"""The hostile-file corpus: no file can change ember, exhaust the machine, run code, or
read differently from the reference loader.

``hostile_corpus.py`` makes the files (checkpoints, TorchScript archives, ONNX models,
safetensors files: the published attack classes, memory bombs, zip tricks and sweeps of
bit flips and truncations of good files); ``hostile_runner.py`` loads each one in a
forked child under an address-space limit and an alarm, and proves afterwards that the
process is intact. Here every outcome is held to the rules below, and the counts are
printed (``pytest -s tests/test_hostile_files.py``).
"""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent

# What a refusal may raise, per kind of file: ember's named errors, never a stray
# KeyError/TypeError/MemoryError from deep inside a parser.
ALLOWED_ERRORS = {
    "ckpt": {"CheckpointError", "UnpicklingError"},
    "jit": {"ArchiveError", "ScriptSafetyError", "ScriptError", "CheckpointError",
            "UnpicklingError"},
    "onnx": {"InvalidOnnxModel", "UnsupportedOnnxOp", "DecodeError", "ValidationError"},
    "st": {"SafetensorError"},
}

# refusals of one file with another error type, as the reference refuses it
ALLOWED_FOR = {
    "ckpt/torchscript_archive": "RuntimeError",  # torch's "use torch.jit.load" RuntimeError
}

# Files ember refuses on purpose although the reference loads them, and why.
STRICTER = {
    "ckpt/zip_duplicate_data_pkl": "two records named data.pkl: torch reads the first, "
                                   "zip tools the last; one file must not mean two things",
    "ckpt/zip_duplicate_storage": "two records for one storage, as above",
    "ckpt/bomb_deflated_pickle": "checkpoints are written stored; a compressed data.pkl "
                                 "is refused rather than inflated",
    "jit/header_import": "archive code that imports a module is refused, not ignored",
    "jit/code_path_traversal": "a record name that leaves the archive's folder",
    "jit/duplicate_code_file": "two records with one name, as for checkpoints",
    "jit/body_huge_constant_fold": "a constant whose evaluation would take hours is refused "
                                   "at load; torch folds it lazily at run time",
}
# a flipped bit or truncation that ember catches and the reference does not: ember checks
# each record's CRC-32 and the zip headers' agreement, the reference reads past them
FLIP_PREFIXES = ("flip_", "truncated_")


def _run(kind, tmp_path):
    proc = subprocess.run([sys.executable, str(HERE / "hostile_runner.py"), kind,
                           str(tmp_path)], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def _close(a, b):
    """Two summaries agree: tensors bit-equal (files) or within float32 rounding (runs)."""
    if isinstance(a, list) and a[:1] == ["tensor"] and isinstance(b, list) \
            and b[:1] == ["tensor"]:
        if a[1:3] != b[1:3]:
            return False
        return a[3] == b[3] or (len(a[4]) == len(b[4]) and all(
            math.isclose(x, y, rel_tol=1e-5, abs_tol=1e-6) or (x != x and y != y)
            for x, y in zip(a[4], b[4])))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    return a == b


def _judge(kind, rows):
    good = next(r for r in rows if r["name"].endswith("/good"))
    problems, counts = [], {"files": len(rows), "refused": 0, "same_as_reference": 0,
                            "stricter": 0}
    for r in rows:
        name, mine, ref = r["name"], r["ember"], r["reference"]
        short = name.split("/", 1)[1]
        if mine["outcome"] not in ("ok", "error"):
            problems.append(f"{name}: ember's load {mine}")
            continue
        if mine.get("marker"):
            problems.append(f"{name}: the payload ran (marker file created)")
        if mine.get("damaged"):
            problems.append(f"{name}: process damaged afterwards: {mine['damaged']}")
        if mine.get("seconds", 0) > 10:
            problems.append(f"{name}: took {mine['seconds']} s")
        if mine["outcome"] == "error":
            counts["refused"] += 1
            allowed = ALLOWED_ERRORS[kind] | {ALLOWED_FOR.get(name)}
            if not allowed & set(mine["types"]):
                problems.append(f"{name}: refused with {mine['types'][0]}: "
                                f"{mine['message'][:200]}")
        ref_ok = ref["outcome"] == "ok"
        if mine["outcome"] == "ok" and ref_ok:
            if _close(mine["result"], ref["result"]):
                counts["same_as_reference"] += 1
            else:
                problems.append(f"{name}: loads differently from the reference")
        elif mine["outcome"] != "ok" and not ref_ok:
            counts["same_as_reference"] += 1
        elif mine["outcome"] == "ok":
            # ember loads what the reference refuses: only a flip in metadata that does
            # not change what the file means (the result is the good file's)
            if not (short.startswith(FLIP_PREFIXES) and _close(mine["result"],
                                                              good["ember"]["result"])):
                problems.append(f"{name}: ember loads it, the reference refuses "
                                f"({ref.get('message', ref)!s:.200})")
        else:
            counts["stricter"] += 1
            if name not in STRICTER and not short.startswith(FLIP_PREFIXES):
                problems.append(f"{name}: ember refuses ({mine['message'][:150]}) what the "
                                "reference loads")
    return problems, counts


@pytest.mark.parametrize("kind", ["ckpt", "jit", "onnx", "st"])
def test_hostile_corpus(kind, tmp_path):
    rows = _run(kind, tmp_path)
    assert len(rows) >= 25
    assert any(r["name"].endswith("/good") and r["ember"]["outcome"] == "ok" for r in rows)
    problems, counts = _judge(kind, rows)
    print(f"\nhostile corpus {kind}: {counts}")
    assert not problems, "\n".join(problems)
