"""Programs run under torch and under ``python -m ember run``, their printed output split
into sections (a line ``#### name`` starts one), for the tests that compare what the two
print (TorchScript code and graphs, the TorchScript tutorial)."""
import os
import re
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_sections(cmd, cwd, line=lambda ln: ln):
    """``({section: [lines]}, stderr)`` of ``cmd`` run in ``cwd`` with ember importable;
    each line passed through ``line``."""
    env = dict(os.environ, PYTHONPATH=ROOT, OPENBLAS_NUM_THREADS="1")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env, cwd=cwd)
    assert p.returncode == 0, p.stderr[-3000:]
    out, name = {}, None
    for ln in p.stdout.splitlines():
        if ln.startswith("#### "):
            name = ln[5:]
            out[name] = []
        elif name is not None:
            out[name].append(line(ln))
    return out, p.stderr


def renumbered(lines):
    """``lines`` with the graph values named by number (``%12``) renumbered in order of
    appearance (``%v0``, ``%v1``...): equal texts up to PyTorch's value counter."""
    ids = {}
    return [re.sub(r"%(\d+)\b", lambda m: "%v" + ids.setdefault(m.group(1), str(len(ids))),
                   ln) for ln in lines]
