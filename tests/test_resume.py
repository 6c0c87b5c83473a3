"""Train, stop, save, resume in a new process: the numbers of an uninterrupted run."""
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "resume.py"


def _run(*args):
    r = subprocess.run([sys.executable, str(EXAMPLE), *args], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return [line for line in r.stdout.splitlines() if line.startswith("epoch")]


def test_resumed_run_ends_exactly_like_an_uninterrupted_one(tmp_path):
    ckpt = str(tmp_path / "run.pt")
    whole = _run("--epochs", "5")
    first = _run("--epochs", "5", "--stop-after", "2", "--ckpt", ckpt)
    second = _run("--epochs", "5", "--resume", ckpt)
    assert len(whole) == 5
    assert first + second == whole


def test_checkpoint_of_the_run_loads_in_torch(tmp_path):
    import torch
    ckpt = str(tmp_path / "run.pt")
    _run("--epochs", "2", "--stop-after", "1", "--ckpt", ckpt)
    state = torch.load(ckpt, weights_only=True)
    assert state["epoch"] == 1
    model = torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.ReLU(), torch.nn.Dropout(0.1),
                                torch.nn.Linear(32, 3))
    model.load_state_dict(state["model"])
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    opt.load_state_dict(state["optimizer"])
    assert state["rng"].dtype == torch.uint8
