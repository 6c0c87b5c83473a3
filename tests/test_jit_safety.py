"""jit.load runs no Python from the file: hostile code and pickles are refused before
anything runs, and damaged archives name the damaged part."""
import io
import pickletools
import zipfile

import numpy as np
import pytest

import ember
from ember.jit import ArchiveError, ScriptSafetyError
from ember.jit._module import create_script_module

LINEAR = "code/__torch__/torch/nn/modules/linear.py"


def _archive():
    lin = ember.nn.Linear(3, 2)
    sm = create_script_module(lin, {"": {"forward": """
        def forward(self, x: Tensor) -> Tensor:
          return torch.linear(x, self.weight, self.bias)
    """}}, qualnames={"": "__torch__.torch.nn.modules.linear.Linear"})
    buf = io.BytesIO()
    sm.save(buf)
    return buf.getvalue()


def _records(data):
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return {n: z.read(n) for n in z.namelist()}


def _rebuild(records):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for n, v in records.items():
            z.writestr(n, v)
    return buf.getvalue()


def _with_code(forward_body, header="", params=""):
    """The Linear archive whose forward takes ``params`` after x and runs the body."""
    recs = _records(_archive())
    code = header + (
        "class Linear(Module):\n"
        '  __parameters__ = ["weight", "bias", ]\n'
        "  __buffers__ = []\n"
        "  weight : Tensor\n"
        "  bias : Tensor\n"
        "  training : bool\n"
        "  def forward(self: __torch__.torch.nn.modules.linear.Linear,\n"
        f"    x: Tensor{params}) -> Tensor:\n"
        + "".join(f"    {line}\n" for line in forward_body.splitlines()))
    recs["archive/" + LINEAR] = code.encode()
    return _rebuild(recs)


def test_the_base_archive_loads_and_runs():
    m = ember.jit.load(io.BytesIO(_with_code("return torch.linear(x, self.weight, self.bias)")))
    assert m(ember.ones(1, 3)).shape == (1, 2)


HOSTILE = {
    "import": ("return x", "import os\n"),
    "from-import": ("return x", "from os import system\n"),
    "os-name": ('os.system("touch {m}")\nreturn x', ""),
    "eval": ('eval("__import__(\'os\').system(\'touch {m}\')")\nreturn x', ""),
    "exec": ('exec("open(\'{m}\', \'w\')")\nreturn x', ""),
    "__import__": ('__import__("os").system("touch {m}")\nreturn x', ""),
    "open": ('open("{m}", "w")\nreturn x', ""),
    "getattr-dunder": ('c = getattr(x, "__class__")\nreturn x', ""),
    "subclasses": ("s = x.__class__.__subclasses__()\nreturn x", ""),
    "tuple-escape": ("s = ().__class__.__bases__[0].__subclasses__()\nreturn x", ""),
    "self-dict": ("d = self.__dict__\nreturn x", ""),
    "globals": ('g = globals()["os"]\nreturn x', ""),
    "lambda": ("f = lambda: 1\nreturn x", ""),
    "comprehension": ("s = [c for c in [1]]\nreturn x", ""),
    "with": ('with open("{m}", "w") as f:\n  pass\nreturn x', ""),
    "torch-dunder": ("s = torch.__builtins__\nreturn x", ""),
    "ops-dunder": ("s = ops.__class__\nreturn x", ""),
    "mangle-lookalike": ("s = __torch__.__builtins__\nreturn x", ""),
    "torch.save": ('torch.save(x, "{m}")\nreturn x', ""),
    "torch.load": ('y = torch.load("{m}")\nreturn x', ""),
    "as_strided": ("return torch.as_strided(x, [1000000], [1])", ""),
    "manual_seed": ("_0 = torch.manual_seed(0)\nreturn x", ""),
    "method-as_strided": ("return x.as_strided([1000000], [1])", ""),
    "method-register_hook": ("_0 = x.register_hook(torch.relu)\nreturn x", ""),
    "module-level-call": ("return x", 'ops.prim.RaiseException("boom")\n'),
    "class-decorator": ("return x", "@staticmethod\nclass Other(Module):\n  pass\n"),
    "fstring": ('s = f"{{x}}"\nreturn x', ""),
    "starargs": ("return torch.add(*[x, x])", ""),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_code_is_refused_and_nothing_runs(case, tmp_path):
    marker = tmp_path / "marker"
    body, header = HOSTILE[case]
    data = _with_code(body.replace("{m}", str(marker)), header)
    with pytest.raises((ScriptSafetyError, NotImplementedError)) as info:
        ember.jit.load(io.BytesIO(data))
    assert "linear.py" in str(info.value)  # names the file (and line)
    assert not marker.exists()


def _os_system_pickle(marker):
    # protocol 0: os.system("touch marker") when unpickled by a plain unpickler
    return f"cos\nsystem\n(Vtouch {marker}\ntR.".encode()


@pytest.mark.parametrize("record", ["data.pkl", "constants.pkl"])
def test_hostile_pickle_is_refused(record, tmp_path):
    marker = tmp_path / "marker"
    recs = _records(_archive())
    recs["archive/" + record] = _os_system_pickle(marker)
    with pytest.raises(ScriptSafetyError, match=r"os\.system") as info:
        ember.jit.load(io.BytesIO(_rebuild(recs)))
    assert record in str(info.value)
    assert not marker.exists()
    # the bytes really call os.system under a plain unpickler (so the check is meaningful)
    ops = [(op.name, arg) for op, arg, _ in pickletools.genops(_os_system_pickle(marker))]
    assert ("GLOBAL", "os system") in ops and ("REDUCE", None) in ops


@pytest.mark.parametrize("fmt", ["{0.__class__}", "{0.shape}", "{0[0]}", "{:{}}"])
def test_format_strings_cannot_walk_attributes(fmt):
    m = ember.jit.load(io.BytesIO(_with_code(
        f"s = torch.format({fmt!r}, x, 3)\nt = {fmt!r}.format(x, 3)\nreturn x")))
    with pytest.raises(ValueError, match="not supported"):
        m(ember.ones(1, 3))


def test_format_strings_that_torch_writes_work():
    from ember.jit._builtins import safe_format
    assert safe_format("got {}D input, {} {!r} {:.2f}", 4, [1, 2], "a", 0.5) == \
        "got 4D input, [1, 2] 'a' 0.50"
    assert safe_format("{1}{0}", "a", "b") == "ba"


@pytest.mark.parametrize("body", [
    "h = self._forward_hooks\nreturn x",
    "h = self._jit_cu\nreturn x",
    "h = getattr(self, '_jit_class')\nreturn x",
    "self._forward_hooks = 1\nreturn x",
])
def test_private_module_state_is_out_of_reach(body):
    m = ember.jit.load(io.BytesIO(_with_code(body)))
    with pytest.raises(ember.jit.ScriptError, match="has no attribute"):
        m(ember.ones(1, 3))


def test_missing_op_names_op_file_and_line():
    # fbgemm_pack_quantized_matrix is a TorchScript operator that ember does not have
    data = _with_code("y = torch.fbgemm_pack_quantized_matrix(x)\nreturn y")
    with pytest.warns(UserWarning, match=r"torch\.fbgemm_pack_quantized_matrix "
                      r"\(.*linear\.py, line 9\)"):
        m = ember.jit.load(io.BytesIO(data))
    with pytest.raises(NotImplementedError, match=r"torch\.fbgemm_pack_quantized_matrix") \
            as info:
        m(ember.ones(1, 3))
    assert "linear.py, line 9" in str(info.value)
    assert "y = torch.fbgemm_pack_quantized_matrix(x)" in str(info.value)


def test_runtime_error_names_torchscript_line():
    m = ember.jit.load(io.BytesIO(_with_code("y = torch.view(x, [5, 7])\nreturn y")))
    with pytest.raises(Exception) as info:
        m(ember.ones(2, 3))
    assert any("linear.py" in n and "in forward" in n for n in info.value.__notes__)


def test_truncated_archive_names_the_damage():
    data = _archive()
    for cut in (len(data) // 2, len(data) - 10, 100):
        with pytest.raises(ArchiveError, match="TorchScript archive damaged"):
            ember.jit.load(io.BytesIO(data[:cut]))


def test_damaged_records_are_named():
    recs = _records(_archive())
    bad = dict(recs)
    bad["archive/data/0"] = recs["archive/data/0"][:-4]
    with pytest.raises(ArchiveError, match=r"data/0"):
        ember.jit.load(io.BytesIO(_rebuild(bad)))
    bad = dict(recs)
    bad["archive/data.pkl"] = recs["archive/data.pkl"][:20]
    with pytest.raises(ArchiveError, match=r"data\.pkl"):
        ember.jit.load(io.BytesIO(_rebuild(bad)))
    bad = {k: v for k, v in recs.items() if not k.endswith("data.pkl")}
    with pytest.raises(ArchiveError, match=r"data\.pkl"):
        ember.jit.load(io.BytesIO(_rebuild(bad)))
    bad = {k: v for k, v in recs.items() if not k.endswith(LINEAR)}
    with pytest.raises(ArchiveError, match=r"code/"):
        ember.jit.load(io.BytesIO(_rebuild(bad)))
    bad = dict(recs)
    bad["archive/" + LINEAR] = recs["archive/" + LINEAR] + b"\n  def oops(self:\n"
    with pytest.raises(ember.jit.ScriptError, match=r"linear\.py, line \d+"):
        ember.jit.load(io.BytesIO(_rebuild(bad)))
    bad = dict(recs)
    bad["archive/version"] = b"99\n"
    with pytest.raises(ArchiveError, match="version 99"):
        ember.jit.load(io.BytesIO(_rebuild(bad)))


def test_flipped_storage_bytes_fail_the_crc_check():
    data = bytearray(_archive())
    recs = _records(bytes(data))
    payload = recs["archive/data/0"]
    at = bytes(data).index(payload)
    data[at] ^= 0xFF
    with pytest.raises(ArchiveError, match=r"data/0"):
        ember.jit.load(io.BytesIO(bytes(data)))


def test_checkpoints_are_not_archives(tmp_path):
    ember.save({"w": ember.ones(2)}, tmp_path / "ckpt.pt")
    with pytest.raises(ArchiveError, match="no code/"):
        ember.jit.load(tmp_path / "ckpt.pt")
    np.testing.assert_array_equal(ember.load(tmp_path / "ckpt.pt")["w"].numpy(), [1, 1])
