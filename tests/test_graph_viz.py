"""Pictures of the graph: ember.viz.make_dot against the real torchviz on torch, the real
torchviz run on ember (``python -m ember run``), draw_module, and rendering with
Graphviz's ``dot`` (required: CI installs it, and a missing ``dot`` fails here)."""
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import torch
import torchviz

import ember
from ember.viz import draw_module, make_dot

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# the same model for both libraries: `lib` is torch or ember
_MODEL = r"""
class Net(lib.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = lib.nn.Parameter(lib.tensor(W))
        self.b = lib.nn.Parameter(lib.tensor(B))
        self.conv = lib.nn.Conv2d(1, 2, 3)

    def forward(self, x, img):
        h = lib.tanh(x @ self.w + self.b) * 2
        c = self.conv(img).relu().flatten(1).sum(1, keepdim=True)
        return (h.relu() + c).exp().mean()
"""


def _net(lib):
    rng = np.random.default_rng(0)
    ns = {"lib": lib, "W": rng.standard_normal((4, 3)).astype(np.float32),
          "B": rng.standard_normal(3).astype(np.float32)}
    exec(_MODEL, ns)
    m = ns["Net"]()
    x = lib.tensor(rng.standard_normal((5, 4)).astype(np.float32))
    img = lib.tensor(rng.standard_normal((5, 1, 6, 6)).astype(np.float32))
    return m, m(x, img)


def _norm(src):
    # node ids are object ids: number them in order of first appearance
    ids = {}
    return re.sub(r"\b\d{6,}\b", lambda m: ids.setdefault(m.group(0), f"n{len(ids)}"), src)


def test_make_dot_equals_torchviz_on_torch():
    tm, ty = _net(torch)
    em, ey = _net(ember)
    want = _norm(torchviz.make_dot(ty, params=dict(tm.named_parameters())).source)
    got = _norm(make_dot(ey, params=dict(em.named_parameters())).source)
    assert got == want
    assert "ConvolutionBackward0" in got and "w\n (4, 3)" in got
    assert _norm(make_dot(ey).source) == _norm(torchviz.make_dot(ty).source)


_SCRIPT = """import numpy as np
import torch
from torchviz import make_dot
lib = torch
rng = np.random.default_rng(0)
W = rng.standard_normal((4, 3)).astype(np.float32)
B = rng.standard_normal(3).astype(np.float32)
""" + _MODEL + """
m = Net()
y = m(torch.tensor(rng.standard_normal((5, 4)).astype(np.float32)),
      torch.tensor(rng.standard_normal((5, 1, 6, 6)).astype(np.float32)))
print(make_dot(y, params=dict(m.named_parameters())).source, end="")
"""


def test_real_torchviz_on_ember_equals_torchviz_on_torch(tmp_path):
    # the unmodified torchviz package, its `import torch` answered by ember
    script = tmp_path / "draw.py"
    script.write_text(_SCRIPT)
    e = subprocess.run([sys.executable, "-m", "ember", "run", str(script)], capture_output=True,
                       text=True, timeout=120, env={**os.environ, "PYTHONPATH": ROOT}, cwd=ROOT)
    assert e.returncode == 0, e.stderr
    assert "MulBackward0" in e.stdout and "AccumulateGrad" in e.stdout
    tm, ty = _net(torch)  # the same model and inputs, drawn here by torchviz on torch
    assert _norm(e.stdout) == _norm(torchviz.make_dot(ty, params=dict(tm.named_parameters()))
                                    .source)


def test_node_class_names_and_next_functions_look_like_torch():
    x = ember.randn(3, requires_grad=True)
    y = x * 2
    assert type(y.grad_fn).__name__ == "MulBackward0" == y.grad_fn.name()
    acc = y.grad_fn.next_functions[0][0]
    assert type(acc).__name__ == "AccumulateGrad" and acc.variable is x
    assert not hasattr(y.grad_fn, "saved_tensors")  # as torch's built-in nodes
    assert isinstance(x, ember.autograd.Variable) and not x._is_view()
    assert x[1:]._is_view()


def test_show_saved_and_attrs():
    x = ember.randn(3, requires_grad=True)
    y = (x * x).sum()
    src = make_dot(y, show_saved=True).source
    assert "fillcolor=orange" in src and "saved[0]" in src
    assert "saved[0]" not in make_dot(y).source
    attrs = make_dot(y, show_attrs=True, max_attr_chars=20).source
    assert "MulBackward0\n-" in attrs and "[saved tensor]" in attrs


def test_custom_function_saved_tensors_drawn_as_torchviz():
    class Exp(ember.autograd.Function):
        @staticmethod
        def forward(ctx, i):
            r = i.exp()
            ctx.save_for_backward(r)
            return r

        @staticmethod
        def backward(ctx, g):
            r, = ctx.saved_tensors
            return g * r

    x = ember.randn(2, requires_grad=True)
    src = make_dot(Exp.apply(x)).source
    assert "ExpBackward" in src and src.count("fillcolor=orange") == 1


def _dot_binary():
    path = shutil.which("dot")
    assert path, "Graphviz's dot is not installed (apt-get install graphviz; CI installs it)"
    return path


def test_render_svg_and_png_with_graphviz(tmp_path):
    _dot_binary()
    em, ey = _net(ember)
    dot = make_dot(ey, params=dict(em.named_parameters()))
    svg = dot.render(str(tmp_path / "g"), format="svg")
    text = open(svg).read()
    assert text.lstrip().startswith("<?xml") and "ConvolutionBackward0" in text
    png = dot.render(str(tmp_path / "g"), format="png")
    with open(png, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_draw_module_layers_with_shapes(tmp_path):
    _dot_binary()
    net = ember.nn.Sequential(ember.nn.Conv2d(1, 4, 3), ember.nn.ReLU(), ember.nn.Flatten(),
                              ember.nn.Linear(4 * 6 * 6, 10))
    dot = draw_module(net, ember.randn(2, 1, 8, 8))
    src = dot.source
    for label in ("Conv2d[0]", "ReLU[1]", "Linear[3]", "_convolution\n(2, 4, 6, 6)",
                  "relu\n(2, 4, 6, 6)", "input\n(2, 1, 8, 8)", "output\n(2, 10)",
                  "weight\n(10, 144)"):
        assert label in src, label
    svg = dot.render(str(tmp_path / "net"), format="svg")
    assert "Linear[3]" in open(svg).read()
