"""Export spellings are part of each op's record: every primitive has an ONNX and a
TorchScript spelling (its class's ``onnx``/``torchscript``) or an explicit exemption,
the string-keyed tables left hold only calls the capture records by name, and what the
spellings write runs in onnxruntime and in torch's TorchScript loader with the right
numbers."""
import importlib
import inspect
import io
import pkgutil
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

import ember
import ember.jit
import ember.onnx
from ember._graph import capture as _capture
from ember._graph.names import RECORDED_CALLS, spelling
from ember.autograd.node import Primitive
from ember.jit import _codegen
from ember.jit._op_exempt import NO_TORCHSCRIPT
from ember.nn import functional as F
from ember.onnx import _export_ops
from ember.onnx._op_exempt import NO_ONNX
from ember.ops import (
    activations,
    bitwise,
    complex_numbers,
    elementwise,
    linalg,
    linalg_solve,
    quantization,
    unary,
)

_SKIP_MODULES = ("ember.examples", "ember.datasets", "ember.__main__")


def _all_primitives():
    for m in pkgutil.walk_packages(ember.__path__, "ember."):
        if not m.name.startswith(_SKIP_MODULES):
            try:
                importlib.import_module(m.name)
            except ImportError:  # optional extras (cupy, numba...) absent here
                pass
    out, stack = set(), [Primitive]
    while stack:
        for sub in stack.pop().__subclasses__():
            if sub not in out:
                out.add(sub)
                stack.append(sub)
    return sorted(out, key=lambda c: (c.__module__, c.__qualname__))


PRIMITIVES = _all_primitives()


# ----- (a) the string-keyed tables name only calls the capture records -------------------
def _composite_names():
    """The literal op names of ``*.composite(...)``/``*.composite_locals(...)`` calls in
    ember's source."""
    import ast
    import pathlib
    names = set()
    for path in pathlib.Path(ember.__file__).parent.rglob("*.py"):
        for n in ast.walk(ast.parse(path.read_text())):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                    n.func.attr in ("composite", "composite_locals") and n.args and \
                    isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str):
                names.add(n.args[0].value)
    return names


def test_recorded_call_names_are_the_captures():
    """``RECORDED_CALLS`` is what the capture records by name: the names every composite
    passes to the capture (``m.composite("view", ...)`` in ember's source), its random
    calls, ``setitem`` and the size arithmetic of a real trace."""
    recorded = _composite_names() | set(_capture.RANDOM_OPS) | {"setitem"}

    def sizes(x):
        n = x.size(0)
        return x.view(((-n) + n * 3 - 1) // 2 % 5, -1)

    graph = ember.jit.trace(sizes, (ember.randn(4, 3),)).graph
    recorded |= {n.op for n in graph.nodes if not isinstance(n.target, type)}
    assert {"size", "int.mul", "int.add", "int.sub", "int.neg", "int.floordiv",
            "int.mod"} <= recorded
    assert recorded == RECORDED_CALLS


@pytest.mark.parametrize("table", [_export_ops.EXPORTERS, _codegen.EMIT],
                         ids=["onnx", "torchscript"])
def test_every_table_key_names_a_recorded_call(table):
    live_ops = {c._op_name for c in PRIMITIVES}
    dead = sorted(k for k in table if k not in RECORDED_CALLS)
    assert not dead, f"keys naming no call the capture records: {dead}"
    shadowing = sorted(k for k in table if k in live_ops)
    assert not shadowing, f"primitives belong on their class, not in the table: {shadowing}"


def test_scripted_f_rows_name_f_functions():
    """``F.*`` calls in scripted code are written by rows keyed by the function's name."""
    from ember.jit._script_functional import _TABLE
    dead = sorted(k for k in _TABLE if not callable(getattr(F, k, None)))
    assert not dead, dead
    builtins = {spec[0][len("torch."):] for spec in _TABLE.values() if spec is not None}
    missing = sorted(b for b in builtins
                     if not torch._C._jit_get_schemas_for_operator(f"aten::{b}"))
    assert not missing, missing


def test_a_string_key_for_a_primitive_is_refused():
    with pytest.raises(ValueError, match="not a call the capture records"):
        _export_ops.exports("LogicalAnd")(lambda g, node, a, b: None)
    with pytest.raises(ValueError, match="not a call the capture records"):
        _codegen.emits("LogicalAnd")(lambda em, node, a, b: None)
    with pytest.raises(TypeError, match="already has"):
        _export_ops.exports(unary.Relu)(lambda g, node, x: None)


# ----- (b) every primitive has each spelling or an exemption -----------------------------
@pytest.mark.parametrize("kind,exempt", [("onnx", NO_ONNX), ("torchscript", NO_TORCHSCRIPT)])
def test_every_primitive_has_a_spelling_or_an_exemption(kind, exempt):
    missing = [f"{c.__module__}.{c.__qualname__}" for c in PRIMITIVES
               if spelling(c, kind) is None and c not in exempt]
    assert not missing, f"no {kind} spelling and no exemption: {missing}"
    stale = [f"{c.__module__}.{c.__qualname__}" for c in exempt
             if spelling(c, kind) is not None]
    assert not stale, f"exempt from {kind} but spelled: {stale}"
    assert all(isinstance(c, type) and issubclass(c, Primitive) and reason.strip()
               for c, reason in exempt.items())


def test_string_spellings_name_real_operators():
    for c in PRIMITIVES:
        s = c.__dict__.get("onnx")
        if isinstance(s, str):
            assert onnx.defs.get_schema(s).name == s, c
        s = c.__dict__.get("torchscript")
        if isinstance(s, str):
            assert torch._C._jit_get_schemas_for_operator(f"aten::{s}"), (c, s)


def test_a_string_spelling_stays_with_its_op():
    """A subclass that is another op does not inherit its base's one-node spelling;
    one that is the same op under another node name does."""
    class Other(unary.Relu):
        pass
    assert spelling(Other, "onnx") is None
    assert spelling(linalg.Mm, "torchscript") == "mm"
    from ember.ops.reduction import Mean, MeanDim
    assert spelling(MeanDim, "onnx") is spelling(Mean, "onnx")


# ----- (c) behaviour -----------------------------------------------------------------------
def _module(fn):
    class M(ember.nn.Module):
        def forward(self, *xs):
            return fn(*xs)
    return M()


def _onnx_run(fn, xs):
    """(node op types, outputs) of ``fn`` exported and run by onnxruntime."""
    f = io.BytesIO()
    ember.onnx.export(_module(fn), tuple(xs), f)
    data = f.getvalue()
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    feeds = {i.name: x.numpy() for i, x in zip(sess.get_inputs(), xs)}
    return [n.op_type for n in onnx.load_from_string(data).graph.node
            if n.op_type != "Constant"], sess.run(None, feeds)


def _torchscript_run(fn, xs):
    """``fn`` traced, saved, loaded by ``torch.jit.load`` and run on the same inputs."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = ember.jit.trace(_module(fn), tuple(xs))
    f = io.BytesIO()
    ember.jit.save(traced, f)
    f.seek(0)
    loaded = torch.jit.load(f)
    return loaded(*[torch.from_numpy(x.numpy().copy()) for x in xs])


def _same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got, want)
    if want.dtype.kind in "fc":
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


_A = np.array([[0.3, -0.6, 0.0], [0.9, 0.45, -0.15]], np.float32)
_B = np.array([[0.5, -0.6, 0.2], [0.0, 0.45, 0.7]], np.float32)


@pytest.mark.parametrize("name", ["logical_and", "logical_or", "logical_xor"])
def test_logical_ops_export_and_save(name):
    a, b = ember.tensor(_A), ember.tensor(_B)
    want = getattr(torch, name)(torch.from_numpy(_A), torch.from_numpy(_B)).numpy()
    fn = getattr(ember, name)
    types, (got,) = _onnx_run(fn, (a, b))
    assert {"And", "Or", "Xor"} & set(types)
    _same(got, want)
    _same(_torchscript_run(fn, (a, b)).numpy(), want)
    # bool operands (a mask combination) too
    types, (got,) = _onnx_run(lambda x, y: fn(x > 0, y > 0), (a, b))
    _same(got, getattr(torch, name)(torch.from_numpy(_A) > 0, torch.from_numpy(_B) > 0))
    _same(ember.logical_not(a).numpy(), _onnx_run(ember.logical_not, (a,))[1][0])
    _same(_torchscript_run(ember.logical_not, (a,)).numpy(),
          torch.logical_not(torch.from_numpy(_A)).numpy())


def _torch_onnx_types(fn, x):
    class M(torch.nn.Module):
        def forward(self, x):
            return fn(x)
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(M(), (x,), f, dynamo=False, opset_version=18)
    return [n.op_type for n in onnx.load_from_string(f.getvalue()).graph.node
            if n.op_type != "Constant"]


@pytest.mark.parametrize("kw", [{}, {"beta": 2.0}, {"beta": 0.5, "threshold": 30.0}])
def test_softplus_is_one_onnx_node_as_torch_writes_it(kw):
    x = np.linspace(-25, 25, 24, dtype=np.float32).reshape(4, 6)
    want = torch.nn.functional.softplus(torch.from_numpy(x), **kw).numpy()
    types, (got,) = _onnx_run(lambda t: ember.nn.functional.softplus(t, **kw),
                              (ember.tensor(x),))
    assert types == _torch_onnx_types(lambda t: torch.nn.functional.softplus(t, **kw),
                                      torch.from_numpy(x))
    assert types.count("Softplus") == 1
    _same(got, want)
    saved = _torchscript_run(lambda t: ember.nn.functional.softplus(t, **kw),
                             (ember.tensor(x),))
    _same(saved.numpy(), want)


def test_softplus_below_the_default_threshold_keeps_embers_values():
    """ONNX's Softplus has no threshold; below PyTorch's default one a Where keeps the
    linear part (PyTorch's own exporter drops it and changes the values)."""
    x = np.linspace(-8, 8, 12, dtype=np.float32)
    want = torch.nn.functional.softplus(torch.from_numpy(x), 1.0, 2.0).numpy()
    types, (got,) = _onnx_run(lambda t: ember.nn.functional.softplus(t, 1.0, 2.0),
                              (ember.tensor(x),))
    assert types.count("Softplus") == 1 and "Where" in types
    _same(got, want)


@pytest.mark.parametrize("name", ["tril", "triu"])
@pytest.mark.parametrize("k", [0, 1, -2])
def test_tril_triu_export_as_trilu(name, k):
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    types, (got,) = _onnx_run(lambda t: getattr(ember, name)(t, k), (ember.tensor(x),))
    assert types == ["Trilu"]
    _same(got, getattr(torch, name)(torch.from_numpy(x), k).numpy())


# ----- the sweep: every one-node spelling, one small input each ---------------------------
def _t(a):
    return ember.tensor(np.asarray(a))


_SQ = np.array([[2.0, 0.5, 0.1], [0.3, 1.5, -0.2], [0.1, 0.4, 1.2]], np.float32)
_C = (_A + 1j * _B).astype(np.complex64)
_I = np.array([[3, -6, 0], [9, 4, 12]], np.int64)
_J = np.array([[1, 2, 0], [3, 1, 2]], np.int64)
_RECIPES = {  # the op's arguments where the default (one float tensor per input) won't do
    unary.LeakyRelu: lambda: [_t(_A), 0.1],
    activations.Threshold: lambda: [_t(_A), 0.1, -2.0],
    activations.Elu: lambda: [_t(_A), 1.5, 1.2, 0.8],
    activations.Celu: lambda: [_t(_A), 1.5],
    unary.Logit: lambda: [_t(np.abs(_A) + 0.05), None],
    unary.NanToNum: lambda: [_t(np.array([np.nan, np.inf, -np.inf, 1], np.float32)), 0.0,
                             None, None],
    unary.Softplus: lambda: [_t(_A * 30), 2.0, 5.0],
    unary.acosh.primitive: lambda: [_t(np.abs(_A) + 1)],
    unary.isnan.primitive: lambda: [_t(np.array([np.nan, np.inf, -np.inf, 0], np.float32))],
    unary.isinf.primitive: lambda: [_t(np.array([np.nan, np.inf, -np.inf, 0], np.float32))],
    unary.isfinite.primitive: lambda: [_t(np.array([np.nan, np.inf, 0], np.float32))],
    unary.isposinf.primitive: lambda: [_t(np.array([np.nan, np.inf, -np.inf], np.float32))],
    unary.isneginf.primitive: lambda: [_t(np.array([np.nan, np.inf, -np.inf], np.float32))],
    linalg.MatMul: lambda: [_t(_A), _t(_SQ)],
    linalg.Mm: lambda: [_t(_A), _t(_SQ)],
    linalg.Bmm: lambda: [_t(_A[None]), _t(_SQ[None])],
    linalg.Mv: lambda: [_t(_SQ), _t(_A[0])],
    linalg.Dot: lambda: [_t(_A[0]), _t(_B[0])],
    linalg.Cross: lambda: [_t(_A), _t(_B), 1],
    elementwise.Where: lambda: [_t(_A > 0), _t(_A), _t(_B)],
    linalg.Cdist: lambda: [_t(_A), _t(_B), 2.0],
    linalg_solve.Det: lambda: [_t(_SQ)],
    linalg_solve.Inv: lambda: [_t(_SQ)],
    complex_numbers.Real: lambda: [_t(_C)],
    complex_numbers.Imag: lambda: [_t(_C)],
    complex_numbers.Angle: lambda: [_t(_C)],
    complex_numbers.Conj: lambda: [_t(_C)],
    complex_numbers.ConjPhysical: lambda: [_t(_C)],
    complex_numbers.ConjPhysicalInplace: lambda: [_t(_C)],
    complex_numbers.ViewAsReal: lambda: [_t(_C)],
    complex_numbers.ViewAsComplex: lambda: [_t(np.stack([_A, _B], -1))],
    complex_numbers.Polar: lambda: [_t(np.abs(_A)), _t(_B)],
    bitwise.BitwiseNot: lambda: [_t(_I)],
    bitwise.LeftShift: lambda: [_t(_I), _t(_J)],
    bitwise.RightShift: lambda: [_t(_I), _t(_J)],
    quantization.FakeQuantizePerTensorAffine: lambda: [_t(_A), 0.1, 3, -8, 7],
    quantization.FakeQuantizePerTensorAffineTensorQparams: lambda: [
        _t(_A), _t(np.float32(0.1)), _t(np.int32(3)), -8, 7],
    quantization.FakeQuantizePerChannelAffine: lambda: [
        _t(_A), _t(np.float32([0.1, 0.2, 0.05])), _t(np.int32([0, 3, -1])), 1, -8, 7],
}


def _arguments(cls):
    recipe = _RECIPES.get(cls)
    if recipe is not None:
        return recipe()
    if issubclass(cls, bitwise._Bitwise):
        return [_t(_I), _t(_J)]
    params = list(inspect.signature(cls.forward).parameters)[1:]
    extra = {"k": 0, "shape": (3, 2), "shifts": (1,), "dims": (1,), "axis": 1,
             "axes": (1,), "keepdim": False, "weight": 0.3}
    args = []
    for i, p in enumerate(params):
        if p in extra:
            args.append(extra[p])
        else:
            base = _A if i % 2 == 0 else _B
            if cls.__name__.startswith(("Igamma", "Zeta", "Polygamma")):
                base = np.abs(base) + 1.5
            args.append(_t(base))
    return args


def _spelled(kind):
    return [c for c in PRIMITIVES if isinstance(c.__dict__.get(kind), str)]


def _split(args):
    pos = [i for i, a in enumerate(args) if isinstance(a, ember.Tensor)]

    def fn(*tensors):
        full = list(args)
        for i, t in zip(pos, tensors):
            full[i] = t
        return cls_holder[0].apply(*full)
    cls_holder = [None]
    return fn, [args[i] for i in pos], cls_holder


@pytest.mark.parametrize("cls", _spelled("onnx"), ids=lambda c: c._op_name)
def test_onnx_string_spelling_runs_in_onnxruntime(cls):
    args = _arguments(cls)
    fn, tensors, holder = _split(args)
    holder[0] = cls
    want = fn(*tensors).numpy()
    types, (got,) = _onnx_run(fn, tensors)
    assert cls.onnx in types
    _same(got, want)


@pytest.mark.parametrize("cls", _spelled("torchscript"), ids=lambda c: c._op_name)
def test_torchscript_string_spelling_loads_in_torch(cls):
    args = _arguments(cls)
    fn, tensors, holder = _split(args)
    holder[0] = cls
    want = fn(*tensors)
    got = _torchscript_run(fn, tensors)
    if want.dtype.is_complex:
        got, want = torch.view_as_real(got.resolve_conj()), ember.view_as_real(want)
    _same(got.numpy(), want.numpy())


# ----- nn layers without a TorchScript template ---------------------------------------------
def _scripted_in_torch(module, *xs):
    scripted = ember.jit.script(module)
    f = io.BytesIO()
    ember.jit.save(scripted, f)
    f.seek(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = torch.jit.load(f)
    return scripted, loaded(*[torch.from_numpy(x.numpy().copy()) for x in xs])


class _NewLayer(ember.nn.Module):
    """A layer as ember.nn would add it: ``F`` calls only, no template."""
    __module__ = "ember.nn.modules.activation"

    def __init__(self, beta=2.0):
        super().__init__()
        self.beta = beta

    def forward(self, input):
        return F.softshrink(F.softplus(input, self.beta, 20.0), 0.5) * F.silu(input)


@pytest.mark.parametrize("make,shapes", [
    (lambda: _NewLayer(), [(2, 5)]),
    (lambda: ember.nn.CosineSimilarity(dim=1), [(3, 4), (3, 4)]),
    (lambda: ember.nn.PairwiseDistance(), [(3, 4), (3, 4)]),
    (lambda: ember.nn.Hardshrink(0.3), [(2, 5)]),
    (lambda: ember.nn.ChannelShuffle(2), [(1, 4, 2, 2)]),
    (lambda: ember.nn.PixelUnshuffle(2), [(1, 1, 4, 4)]),
], ids=["new_layer", "CosineSimilarity", "PairwiseDistance", "Hardshrink", "ChannelShuffle",
        "PixelUnshuffle"])
def test_a_layer_of_f_calls_scripts_without_a_template(make, shapes):
    from ember.jit._script_templates import template_for
    module = make()
    assert template_for(module, type(module)) is None
    xs = [ember.tensor(np.linspace(-2, 2, int(np.prod(s)), dtype=np.float32).reshape(s))
          for s in shapes]
    want = module(*xs).detach().numpy()
    scripted, got = _scripted_in_torch(module, *xs)
    _same(got.numpy(), want)
    _same(scripted(*xs).detach().numpy(), want)


def test_a_layer_whose_forward_does_not_compile_names_itself():
    from ember.jit._frontend import NotSupportedError
    with pytest.raises(NotSupportedError, match="ember.nn.Bilinear .*no TorchScript template"):
        ember.jit.script(ember.nn.Bilinear(2, 2, 3))
