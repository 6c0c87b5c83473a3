"""``jit.script`` of modules holding objects of plain Python classes, as PyTorch compiles
them to TorchScript class types: a dict of such objects as a module attribute, attribute
types inferred from ``__init__``, and einops' layers (whose forward indexes a dict of
recipe objects and calls einops' scriptable helper functions).

Each program runs once on torch and once under ``python -m ember run`` (so einops imports
ember as torch); the printed results must agree."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np

_ENV = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}

_PROGRAM = textwrap.dedent('''
    import json, sys
    from typing import Dict, List
    import numpy as np
    import torch
    from einops.layers.torch import EinMix, Rearrange, Reduce

    class Recipe:
        def __init__(self, a: List[int], b: int, scale: float):
            self.a = a
            self.b = b
            self.table: Dict[str, int] = {"x": 2}
            self.scale = scale

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.r = {1: Recipe([1, 2], 3, 0.5), 2: Recipe([4], 5, 2.0)}
            self.one = Recipe([7, 8, 9], 1, 1.5)

        def forward(self, x, k: int):
            r = self.r[k]
            return x * r.b * r.scale + len(r.a) + self.one.a[2] + r.table["x"]

    def arr(*shape):
        return torch.from_numpy((np.arange(np.prod(shape)) % 7 - 3.0).astype("float32")
                                .reshape(shape))

    out = {}
    m = torch.jit.script(M())
    out["plain_1"] = m(torch.ones(2), 1).tolist()
    out["plain_2"] = m(torch.ones(2), 2).tolist()
    layers = {
        "flatten": Rearrange("b c h w -> b (c h w)"),
        "split": Rearrange("b (c h) w -> b c h w", h=2),
        "transpose": Rearrange("b c h w -> b h w c"),
        "mean": Reduce("b c h w -> b c", "mean"),
        "max_pool": Reduce("b c (h h2) (w w2) -> b c h w", "max", h2=2, w2=2),
        "sum_new_axis": Reduce("b c h w -> b c () ()", "sum"),
    }
    for name, layer in layers.items():
        s = torch.jit.script(layer)
        shapes = [(2, 4, 6), (3, 8, 2)] if name == "split" else [(2, 4, 6, 8), (3, 2, 4, 2)]
        for shape in shapes:
            out[f"{name}_{shape}"] = [list(s(arr(*shape)).shape),
                                      s(arr(*shape)).flatten().tolist()]
    mix = EinMix("b t c -> b t d", weight_shape="c d", bias_shape="d", c=4, d=3)
    with torch.no_grad():
        mix.weight.copy_(arr(4, 3) / 10)
        mix.bias.copy_(arr(3))
    s = torch.jit.script(mix)
    for shape in [(2, 5, 4), (1, 3, 4)]:
        out[f"einmix_{shape}"] = s(arr(*shape)).flatten().tolist()
    torch.jit.save(torch.jit.script(M()), sys.argv[1] + "_m.pt")
    torch.jit.save(torch.jit.script(layers["split"]), sys.argv[1] + "_split.pt")
    torch.jit.save(torch.jit.script(mix), sys.argv[1] + "_mix.pt")
    print(json.dumps(out))
''')


def _run(tmp_path, stem, *prefix):
    prog = tmp_path / "prog.py"
    prog.write_text(_PROGRAM)
    r = subprocess.run([sys.executable, *prefix, str(prog), str(tmp_path / stem)],
                       capture_output=True, text=True, timeout=240, env=_ENV)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_plain_objects_and_einops_layers_match_torch(tmp_path):
    want = _run(tmp_path, "torch")
    got = _run(tmp_path, "ember", "-m", "ember", "run")
    assert sorted(got) == sorted(want)
    for key, w in want.items():
        g = got[key]
        if key.startswith(("flatten", "split", "transpose", "mean", "max_pool", "sum_")):
            assert g[0] == w[0], key
            g, w = g[1], w[1]
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6, err_msg=key)
    _archives_cross_load(tmp_path, want)


def _archives_cross_load(tmp_path, want):
    """ember's archives (class types written as TorchScript classes) load and run in
    torch; torch's load and run in ember; both give torch's numbers."""
    import torch

    import ember

    def arr(lib, *shape):
        return lib.from_numpy((np.arange(np.prod(shape)) % 7 - 3.0).astype("float32")
                              .reshape(shape))
    for stem in ("ember", "torch"):
        for lib in (torch, ember):
            m = lib.jit.load(str(tmp_path / f"{stem}_m.pt"))
            for k in (1, 2):
                np.testing.assert_allclose(m(lib.ones(2), k).tolist(), want[f"plain_{k}"],
                                           err_msg=f"{stem} archive on {lib.__name__}")
            split = lib.jit.load(str(tmp_path / f"{stem}_split.pt"))
            for shape in [(2, 4, 6), (3, 8, 2)]:
                y = split(arr(lib, *shape))
                assert list(y.shape) == want[f"split_{shape}"][0]
                np.testing.assert_allclose(y.flatten().tolist(), want[f"split_{shape}"][1])
            mix = lib.jit.load(str(tmp_path / f"{stem}_mix.pt"))
            for shape in [(2, 5, 4), (1, 3, 4)]:
                np.testing.assert_allclose(mix(arr(lib, *shape)).flatten().tolist(),
                                           want[f"einmix_{shape}"], rtol=1e-6, atol=1e-6)


def test_list_of_objects_saves_and_method_calls_raise(tmp_path):
    import pytest

    import ember

    class Box:
        def __init__(self, n: int):
            self.n = n

        def twice(self):
            return 2 * self.n

    class Holder(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.boxes = [Box(2), Box(3)]

        def forward(self, x):
            return x * self.boxes[1].n

    import torch
    sm = ember.jit.script(Holder())
    assert sm(ember.ones(2)).tolist() == [3.0, 3.0]
    ember.jit.save(sm, str(tmp_path / "h.pt"))
    back = torch.jit.load(str(tmp_path / "h.pt"))
    assert back(torch.ones(2)).tolist() == [3.0, 3.0]
    assert "List[__torch__" in back.code or "boxes" in back.code

    class CallsMethod(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.box = Box(2)

        def forward(self, x):
            return x * self.box.twice()

    with pytest.raises(ember.jit.FrontendError, match="twice"):
        ember.jit.script(CallsMethod())


def test_unannotated_init_parameter_is_a_tensor_as_in_torch():
    import pytest
    import torch

    import ember

    class Scaled:
        def __init__(self, scale):
            self.scale = scale

    def holder(lib):
        class Holder(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.s = {0: Scaled(1.5)}

            def forward(self, x):
                return x * self.s[0].scale
        return Holder()

    with pytest.raises(RuntimeError, match="Could not cast attribute 'scale'"):
        torch.jit.script(holder(torch))
    with pytest.raises(RuntimeError, match="Could not cast attribute 'scale'.*Tensor"):
        ember.jit.script(holder(ember))
