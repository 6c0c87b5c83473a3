"""jit.load does bounded work on archives it did not write.

Each hostile archive is built here (ember's Linear archive with its code file replaced)
and loaded in a child process with a timeout and a 2 GiB address-space limit, by ember
and by torch: ember must refuse each one with a clear error and without computing
it; torch's accept/refuse on the same bytes is checked against the table below.
"""
import io
import json
import math
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import test_jit_safety
import torch

import ember
from ember.jit import ScriptError, _builtins
from ember.jit._module import create_script_module

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _archive(params="", body="return torch.linear(x, self.weight, self.bias)"):
    """ember's Linear archive whose forward takes ``params`` after x and runs ``body``."""
    return test_jit_safety._with_code(body, params=params)


NOT_LITERAL = "is not a literal"
# case: (forward's extra parameters, body, what ember raises, torch accepts?)
# ember refuses every one while loading; torch refuses all but two, which it evaluates
LOAD_CASES = {
    "default 9 ** 9 ** 8": (",\n    n: int=9 ** 9 ** 8", "return x", NOT_LITERAL, False),
    "default 9 ** 9 ** 9": (",\n    n: int=9 ** 9 ** 9", "return x", NOT_LITERAL, False),
    "default torch.ones([2 ** 31])": (",\n    t: Tensor=torch.ones([2 ** 31])", "return x",
                                      NOT_LITERAL, False),
    # torch evaluates this one while loading and fails to allocate 8 GiB under the limit
    "default torch.ones([2147483648])": (",\n    t: Tensor=torch.ones([2147483648])",
                                         "return x", NOT_LITERAL, False),
    "default 'a' * 10 ** 10": (',\n    s: str="a" * 10 ** 10', "return x", NOT_LITERAL, False),
    "default [1] * 10 ** 10": (",\n    s: List[int]=[1] * 10 ** 10", "return x", NOT_LITERAL,
                               False),
    "default 1 << 10 ** 10": (",\n    n: int=1 << 10 ** 10", "return x", NOT_LITERAL, False),
    "default len(range(10 ** 18))": (",\n    n: int=len(range(10 ** 18))", "return x",
                                     NOT_LITERAL, False),
    "default 30-digit int": (",\n    n: int=" + "9" * 30, "return x", "out of range", False),
    # small expressions torch evaluates; ember evaluates no default expression at all
    "default 1 + 2": (",\n    n: int=1 + 2", "return x", NOT_LITERAL, True),
    "default torch.ones([2])": (",\n    t: Tensor=torch.ones([2])", "return x", NOT_LITERAL,
                                True),
    "torch.mro(dict)": ("", "a = torch.mro(dict)\nreturn x", "Unknown builtin op: aten::mro",
                        False),
    "torch.mro(x)": ("", "a = torch.mro(x)\nreturn x", "Unknown builtin op: aten::mro", False),
    "ops.prim.mro(x)": ("", "a = ops.prim.mro(x)\nreturn x", "Unknown builtin op: prim::mro",
                        False),
    "x.mro()": ("", "a = x.mro()\nreturn x", "has a method 'mro'", False),
    "x.__class__": ("", "a = x.__class__\nreturn x", "dunder", False),
}

# loaded fine; the call must stop before computing (torch's int is 64 bits, its str has
# no repetition): (body, what ember raises)
CALL_CASES = {
    "9 ** 9 ** 8": ("a = 9 ** 9 ** 8\nreturn x", "more than"),
    "'a' * 10 ** 10": ('a = "a" * 10 ** 10\nreturn x', "repeating a str"),
    "[0] * 10 ** 10": ("a = [0] * 10 ** 10\nreturn x", "repeating a list"),
    "l *= 10 ** 10": ("l = [0, 1]\nl *= 10 ** 10\nreturn x", "repeating a list"),
    "1 << 10 ** 10": ("a = 1 << 10 ** 10\nreturn x", "bit int <<"),
    "torch.pow(9, 9 ** 8)": ("a = torch.pow(9, 9 ** 8)\nreturn x", "more than"),
    "torch.mul([0], 10 ** 10)": ("a = torch.mul([0], 10 ** 10)\nreturn x", "repeating a list"),
    "format width": ('a = torch.format("{:>999999999}", 1)\nreturn x', "more than"),
}

_CHILD = r"""
import io, json, resource, sys, warnings
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
warnings.simplefilter("ignore")
lib = __import__(sys.argv[1])
call = sys.argv[2] == "call"
for path in sys.argv[3:]:
    print(json.dumps({"path": path, "started": True}), flush=True)
    out = {"path": path, "loaded": False}
    try:
        with open(path, "rb") as f:
            m = lib.jit.load(io.BytesIO(f.read()))
        out["loaded"] = True
        if call:
            m(lib.ones(1, 3))
    except BaseException as e:
        out.update(type=type(e).__name__, message=str(e)[-400:])
    print(json.dumps(out), flush=True)
"""


def _run(lib, cases, tmp_path, call=False, timeout=60):
    """{case: result} from child processes; a case that hung or crashed maps to None.

    One child runs every case; if one hangs past ``timeout`` (or the child dies), a
    fresh child goes on with the cases after it.
    """
    folder = tmp_path / lib
    folder.mkdir()
    paths = {}
    for i, (case, data) in enumerate(cases.items()):
        path = folder / f"{i:02d}.pt"
        path.write_bytes(data)
        paths[str(path)] = case
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONPATH=ROOT)
    results = dict.fromkeys(cases)
    todo = list(paths)
    while todo:
        try:
            out = subprocess.run([sys.executable, "-c", _CHILD, lib,
                                  "call" if call else "load", *todo],
                                 capture_output=True, text=True, timeout=timeout,
                                 env=env, cwd=ROOT).stdout
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else e.stdout or ""
        done = set()
        for line in out.splitlines():
            r = json.loads(line)
            done.add(r["path"])
            if "started" not in r:
                results[paths[r.pop("path")]] = r
        todo = [p for p in todo if p not in done] if done else []
    return results


@pytest.fixture(scope="module")
def load_results(tmp_path_factory):
    archives = {case: _archive(params, body)
                for case, (params, body, _, _) in LOAD_CASES.items()}
    tmp = tmp_path_factory.mktemp("bounds")
    return _run("ember", archives, tmp), _run("torch", archives, tmp)


@pytest.mark.parametrize("case", list(LOAD_CASES))
def test_hostile_archive_is_refused_while_loading(case, load_results):
    ours, theirs = (r[case] for r in load_results)
    _, _, message, torch_accepts = LOAD_CASES[case]
    assert ours is not None, f"ember did not finish loading {case!r} in time"
    assert not ours["loaded"]
    assert ours["type"] in ("ScriptSafetyError", "ScriptError"), ours
    assert message in ours["message"]
    assert "linear.py, line " in ours["message"]  # names the file and the line
    assert theirs is not None, f"torch did not finish loading {case!r} in time"
    assert theirs["loaded"] is torch_accepts, theirs
    if "2147483648" in case:
        assert "can't allocate memory" in theirs["message"]  # torch did evaluate it


def test_hostile_runtime_arithmetic_stops_before_computing(tmp_path):
    archives = {case: _archive("", body) for case, (body, _) in CALL_CASES.items()}
    results = _run("ember", archives, tmp_path, call=True)
    for case, (_, message) in CALL_CASES.items():
        r = results[case]
        assert r is not None, f"ember did not finish calling {case!r} in time"
        assert r["loaded"], r
        assert r["type"] in ("ScriptError", "ValueError"), (case, r)
        assert message in r["message"], (case, r)


def test_names_resolve_only_through_torchscript_operators():
    assert _builtins.lookup("torch.mro") is None
    assert not _builtins.known("torch.mro") and not _builtins.known("ops.prim.mro")
    assert _builtins.lookup_method("mro") is None
    assert _builtins.known("torch.relu") and _builtins.known("ops.prim.NumToTensor")
    assert _builtins.known("ops.quantized.linear")  # a real operator ember lacks
    assert _builtins.lookup_method("view") is not None
    assert _builtins.lookup_method("float") is not None  # TorchScript's dtype casts
    with pytest.raises(TypeError, match="expects a Tensor"):  # never a method of a class
        _builtins.lookup_method("float")(dict)


def test_stored_operator_names_are_torchs():
    from ember.jit import _schema_names as names
    by_ns, methods = {}, set()
    for s in torch._C._jit_get_all_schemas():
        ns, _, name = s.name.partition("::")
        by_ns.setdefault(ns, set()).add(name)
        a = s.arguments
        if ns == "aten" and a and a[0].name == "self" and str(a[0].type) == "Tensor":
            methods.add(name)
    assert names.ATEN_METHODS == methods
    assert names.ATEN_FUNCTIONS == by_ns["aten"] - methods
    assert names.PRIM == by_ns["prim"]
    assert "mro" not in by_ns["aten"]


def test_deeply_nested_code_is_refused_cleanly():
    data = _archive("", "a = " + "+".join(["1"] * 5000) + "\nreturn x")
    with pytest.raises(ScriptError, match="nested too deeply"):
        ember.jit.load(io.BytesIO(data))


def test_out_of_range_int_constants_are_refused_like_torch():
    data = _archive("", "a = " + "9" * 30 + "\nreturn x")
    with pytest.raises(ScriptError, match="out of range"):
        ember.jit.load(io.BytesIO(data))
    with pytest.raises(RuntimeError, match="out of range"):
        torch.jit.load(io.BytesIO(data))
    m = ember.jit.load(io.BytesIO(_archive("", "a = -9223372036854775808\nreturn x")))
    m(ember.ones(1, 3))


_CPU, _W = torch.device("cpu"), torch.tensor([1.5, -2.0])


class _Defaults(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor | None = None,
                eps: float = 1e-5, t3: tuple[int, int, int] = (1, 2, 3),
                t2: tuple[int, int] = (3, -4), s: str = "me'a\"n\n", b: bool = True,
                n: int = -1, f: float = float("inf"), g: float = -float("inf"),
                d: int | None = None, dev: torch.device = _CPU,
                c: complex = 1 + 2j, nn: float = float("nan"), big: int = 2 ** 62,
                w: torch.Tensor = _W,
                nest: tuple[tuple[int, float], str] = ((1, -2.5), "x")):
        out = x * eps + w
        if y is not None:
            out = out + y
        return (out, t3, t2, s, b, n, f, g, d, dev.type, c, math.isnan(nn), big, nest)


def test_defaults_torch_writes_load_and_match_torch(tmp_path):
    sm = torch.jit.script(_Defaults())
    sm.save(str(tmp_path / "d.pt"))
    ref = sm(torch.ones(2))
    got = ember.jit.load(tmp_path / "d.pt")(ember.ones(2))
    np.testing.assert_allclose(got[0].numpy(), ref[0].numpy())
    assert got[1:] == ref[1:]
    with zipfile.ZipFile(tmp_path / "d.pt") as z:  # the spellings this test is about
        code = next(z.read(n).decode() for n in z.namelist() if n.endswith(".py"))
    for spelling in ("=None", "=1.0000000000000001e-05", "=(3, -4)", "=-inf", "=1.+2.j",
                     "=nan", "=CONSTANTS.c0", '=torch.device("cpu")'):
        assert spelling in code


def test_hand_written_list_and_dict_defaults_persist_across_calls_like_torch():
    # one default object per function, as in Python and torch: mutations persist
    data = _archive(",\n    l: List[int]=[1, 2],\n    d: Dict[str, int]={\"a\": 1}",
                    "l.append(3)\nd[\"b\"] = 2\n"
                    "return torch.add(x, torch.len(l) + torch.len(d))")
    ours, theirs = ember.jit.load(io.BytesIO(data)), torch.jit.load(io.BytesIO(data))
    for _ in range(3):
        np.testing.assert_allclose(ours(ember.ones(1, 3)).numpy(),
                                   theirs(torch.ones(1, 3)).numpy())


def _with_attribute(value):
    """ember's Linear archive with one more attribute ``x`` (type ``Any``) in data.pkl."""
    lin = ember.nn.Linear(3, 2)
    sm = create_script_module(lin, {"": {"forward": """
        def forward(self, x: Tensor) -> Tensor:
          return torch.linear(x, self.weight, self.bias)
    """}}, qualnames={"": "__torch__.torch.nn.modules.linear.Linear"})
    sm._jit_class.attributes["x"] = "Any"
    sm.__dict__["x"] = value
    buf = io.BytesIO()
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(20000)  # the pickler recurses; writing a deep value needs room
    try:
        sm.save(buf)
    finally:
        sys.setrecursionlimit(limit)
    return buf.getvalue()


def test_values_shared_or_nested_in_data_pkl(tmp_path):
    dag = [1]
    for _ in range(64):  # 2 KiB of pickle; walked as a tree it would be 2**64 lists
        dag = [dag, dag]
    deep = [1]
    for _ in range(3000):
        deep = [deep]
    archives = {"shared 64 deep": _with_attribute(dag), "nested 3000 deep": _with_attribute(deep)}
    assert len(archives["shared 64 deep"]) < 4096
    ours = _run("ember", archives, tmp_path)
    theirs = _run("torch", archives, tmp_path)
    assert ours["shared 64 deep"] == {"loaded": True}
    assert theirs["shared 64 deep"]["loaded"] and theirs["nested 3000 deep"]["loaded"]
    # torch builds the deep one; ember refuses it cleanly instead of a RecursionError
    assert ours["nested 3000 deep"]["type"] == "ArchiveError"
    assert "nests its values deeper" in ours["nested 3000 deep"]["message"]
    m = ember.jit.load(io.BytesIO(archives["shared 64 deep"]))
    assert m.x[0] is m.x[1]  # still shared, as the pickle has it



def test_oversized_code_record_is_refused_before_reading(monkeypatch):
    import ember.jit._archive as archive_module
    data = _archive("", "a = 1\n" * 200 + "return x")
    monkeypatch.setattr(archive_module, "_MAX_CODE_BYTES", 1000)
    with pytest.raises(ember.jit.ScriptSafetyError, match="ember parses at most 1000"):
        ember.jit.load(io.BytesIO(data))
    monkeypatch.undo()
    ember.jit.load(io.BytesIO(data))
