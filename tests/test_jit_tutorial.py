"""The steps of PyTorch's "Introduction to TorchScript" tutorial, as one program run by
torch and by ``python -m ember run``: eager modules and their printing, tracing a cell,
a traced submodule's ``.code`` (a control-flow gate, frozen with a ``TracerWarning``),
scripting, a scripted loop over a traced cell, tracing through that scripted loop,
saving it and loading it back. The printed outputs must be torch's (the random values
agree: ember's generator draws torch's numbers for the same seed; a printed graph's
numbered values are compared once renumbered in order), and torch must load ember's
archive and run it at other lengths."""
import sys

import numpy as np
import torch
from printed_sections import renumbered, run_sections

PROGRAM = r'''
import os, sys
import numpy as np
import torch

out_dir = sys.argv[1]
torch.manual_seed(0)


def section(name):
    print("#### " + name)


class Cell(torch.nn.Module):
    def forward(self, x, h):
        new_h = torch.tanh(x + h)
        return new_h, new_h


x = torch.rand(3, 4)
h = torch.rand(3, 4)
section("plain cell")
print(Cell()(x, h))


class LinearCell(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x, h):
        new_h = torch.tanh(self.linear(x) + h)
        return new_h, new_h


cell = LinearCell()
section("linear cell")
print(cell)
print(cell(x, h))


class Gate(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x
        else:
            return -x


class GatedCell(torch.nn.Module):
    def __init__(self, gate):
        super().__init__()
        self.dg = gate
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x, h):
        new_h = torch.tanh(self.dg(self.linear(x)) + h)
        return new_h, new_h


gated = GatedCell(Gate())
section("gated cell")
print(gated)
print(gated(x, h))

cell = LinearCell()
x, h = torch.rand(3, 4), torch.rand(3, 4)
traced_cell = torch.jit.trace(cell, (x, h))
section("traced cell")
print(traced_cell)
section("traced graph")
print(traced_cell.graph)
section("traced code")
print(traced_cell.code)
print(traced_cell.linear.code)
section("traced outputs")
print(cell(x, h))
print(traced_cell(x, h))

traced_gated = torch.jit.trace(GatedCell(Gate()), (x, h))
section("traced gate code")
print(traced_gated.dg.code)
print(traced_gated.code)

scripted_gate = torch.jit.script(Gate())
scripted_cell = torch.jit.script(GatedCell(scripted_gate))
section("scripted code")
print(scripted_gate.code)
print(scripted_cell.code)
section("scripted repr")
print(scripted_cell)
x, h = torch.rand(3, 4), torch.rand(3, 4)
section("scripted outputs")
print(scripted_cell(x, h))
print(scripted_cell(-x, h))


class Loop(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = torch.jit.trace(GatedCell(scripted_gate), (x, h))

    def forward(self, xs):
        h, y = torch.zeros(3, 4), torch.zeros(3, 4)
        for i in range(xs.size(0)):
            y, h = self.cell(xs[i], h)
        return y, h


loop = torch.jit.script(Loop())
section("loop code")
print(loop.code)


class Wrap(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.loop = torch.jit.script(Loop())

    def forward(self, xs):
        y, h = self.loop(xs)
        return torch.relu(y)


traced = torch.jit.trace(Wrap(), (torch.rand(10, 3, 4)))
section("wrapped code")
print(traced.code)
path = os.path.join(out_dir, "wrapped_rnn.pt")
traced.save(path)
loaded = torch.jit.load(path)
section("loaded")
print(loaded)
print(loaded.code)
section("other lengths")
for n in (10, 4):
    xs = torch.rand(n, 3, 4)
    np.save(os.path.join(out_dir, f"xs{n}.npy"), xs.numpy())
    np.save(os.path.join(out_dir, f"y{n}.npy"), traced(xs).detach().numpy())
    print(torch.allclose(traced(xs), loaded(xs)))
'''

# a printed graph: the same text once values named by number are renumbered in order
NUMBERED = {"traced graph"}


_renumbered = renumbered


def _run(cmd, out_dir):
    return run_sections(cmd + [out_dir], out_dir)


def test_the_tutorial_prints_what_torch_prints(tmp_path):
    prog = tmp_path / "intro.py"
    prog.write_text(PROGRAM)
    (tmp_path / "t").mkdir()
    (tmp_path / "e").mkdir()
    ref, ref_err = _run([sys.executable, str(prog)], str(tmp_path / "t"))
    got, got_err = _run([sys.executable, "-m", "ember", "run", str(prog)], str(tmp_path / "e"))
    assert list(got) == list(ref)
    for name in ref:
        if name in NUMBERED:
            assert _renumbered(got[name]) == _renumbered(ref[name]), name
        else:
            assert got[name] == ref[name], name
    # the gate's branch is frozen with PyTorch's warning, at the user's line
    for err in (ref_err, got_err):
        assert "TracerWarning: Converting a tensor to a Python boolean" in err
    # the sections this compares hold what they should
    assert any("aten::tanh" in ln for ln in got["traced graph"])
    assert "    _0 = torch.neg(x)" in got["scripted code"]          # SSA form of a branch
    assert "    y0, h0 = y1, h1" in got["loop code"]                 # loop-carried names
    assert "  _0, y, = (loop).forward(xs, )" in got["wrapped code"]  # a traced local's name
    assert "grad_fn=<DifferentiableGraphBackward>" in "\n".join(got["scripted outputs"])
    assert got["other lengths"] == ["True", "True"]

    # torch loads ember's archive (a traced module calling a scripted loop over a traced
    # cell with a scripted gate) and runs it at the traced length and another one
    loaded = torch.jit.load(str(tmp_path / "e" / "wrapped_rnn.pt"))
    for n in (10, 4):
        xs = torch.from_numpy(np.load(tmp_path / "e" / f"xs{n}.npy"))
        want = np.load(tmp_path / "e" / f"y{n}.npy")
        np.testing.assert_allclose(loaded(xs).detach().numpy(), want, rtol=1e-5, atol=1e-6)
