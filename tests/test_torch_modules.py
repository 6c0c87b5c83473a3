"""torch's modules and names that pure-Python libraries import at import time
(``torch.compiler``, ``torch.utils._pytree``, ``torch._dynamo``, ``torch.fx``,
``torch.library``, ``torch.overrides``, ``torch.utils.benchmark``, ``torch.xpu``,
``functorch``, ``torch._C``...), compared with torch 2.13.
"""
import collections
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
import torch.utils._pytree as tpytree
from oracle import check_raises

import ember
import ember.utils._pytree as epytree


# ----- torch.compiler ------------------------------------------------------------------
def test_compiler_outside_and_inside_capture():
    import torch.compiler

    import ember.compiler
    assert ember.compiler.is_compiling() is torch.compiler.is_compiling() is False
    assert ember.compiler.is_dynamo_compiling() is False
    assert ember.compiler.is_exporting() is torch.compiler.is_exporting() is False
    seen = []

    def f(x):
        seen.append(ember.compiler.is_compiling())
        return x * 2

    g = ember.compile(f)
    assert g(ember.ones(2)).tolist() == [2.0, 2.0]
    assert seen == [True]  # the capture run; replays run the plan

    def h(x):
        return x + 1
    for m in (torch, ember):  # decorator with and without arguments returns the function
        assert m.compiler.disable(h)(1) == 2
        assert m.compiler.disable(recursive=False)(h)(1) == 2
        assert m.compiler.allow_in_graph(h)(1) == 2
    outs = []
    for m in (torch, ember):  # a NumPy function on tensors
        f = m.compiler.wrap_numpy(lambda a, b: np.sum(a * b, axis=0))
        outs.append(f(m.ones(2, 3), m.ones(2, 3) * 2))
        assert type(f(m.ones(2), m.ones(2))) is np.float32
    assert outs[1].tolist() == outs[0].tolist() and outs[1].dtype == ember.float32
    assert ember.compiler.get_default_backend() == "inductor"
    with pytest.raises(NotImplementedError, match="set_stance"):
        ember.compiler.set_stance("force_eager")


def test_compiler_is_exporting_inside_export():
    import ember.compiler
    import ember.export
    seen = []

    class M(ember.nn.Module):
        def forward(self, x):
            seen.append(ember.compiler.is_exporting())
            return x * 2

    ember.export.export(M(), (ember.ones(2),))
    assert True in seen


# ----- torch.utils._pytree -------------------------------------------------------------
_NT = collections.namedtuple("_NT", "a b")
_TREES = [[1, (2, 3), {"x": 4, "a": [5, None]}], _NT(1, [2]),
          collections.OrderedDict(b=1, a=2), 7, None, (), collections.deque([1, 2], maxlen=3),
          collections.defaultdict(list, {"k": [1, 2]}), {"z": (), "y": [[]]}]


@pytest.mark.parametrize("tree", _TREES, ids=lambda t: type(t).__name__)
def test_pytree_matches_torch(tree):
    el, es = epytree.tree_flatten(tree)
    tl, ts = tpytree.tree_flatten(tree)
    assert el == tl
    assert (es.num_leaves, es.num_nodes, es.num_children, es.is_leaf()) == \
        (ts.num_leaves, ts.num_nodes, ts.num_children, ts.is_leaf())
    assert es.context == ts.context
    rebuilt = epytree.tree_unflatten(el, es)
    assert rebuilt == tpytree.tree_unflatten(tl, ts) and type(rebuilt) is type(tree)
    assert [epytree.keystr(p) for p, _ in epytree.tree_flatten_with_path(tree)[0]] == \
        [tpytree.keystr(p) for p, _ in tpytree.tree_flatten_with_path(tree)[0]]
    assert epytree.tree_leaves(tree) == tpytree.tree_leaves(tree)
    assert epytree.tree_structure(tree) == es


def test_pytree_map_and_registration():
    a, b = [1, {"x": 2, "y": (3,)}], [10, {"x": 20, "y": (30,)}]
    assert epytree.tree_map(lambda p, q: p + q, a, b) == tpytree.tree_map(lambda p, q: p + q,
                                                                         a, b)
    assert epytree.tree_map_only(int, str, [1, "a", 2.5]) == \
        tpytree.tree_map_only(int, str, [1, "a", 2.5])
    assert epytree.tree_all(lambda x: x > 0, a) and not epytree.tree_any(lambda x: x > 5, a)
    # a spec's flatten_up_to keeps subtrees where the spec has leaves
    spec = epytree.tree_structure([0, 0])
    assert spec.flatten_up_to([[1, 2], {"q": 3}]) == \
        tpytree.tree_structure([0, 0]).flatten_up_to([[1, 2], {"q": 3}])
    with pytest.raises(ValueError):
        epytree.tree_unflatten([1, 2, 3], spec)
    check_raises(lambda m: (epytree if m is ember else tpytree).tree_unflatten([1], [1]))

    class Pair:
        def __init__(self, x, y):
            self.x, self.y = x, y

    for mod in (epytree, tpytree):
        mod.register_pytree_node(Pair, lambda p: ([p.x, p.y], None),
                                 lambda c, _: Pair(*c))
        leaves, spec = mod.tree_flatten({"p": Pair(1, [2, 3])})
        assert leaves == [1, 2, 3]
        out = mod.tree_unflatten([4, 5, 6], spec)["p"]
        assert (out.x, out.y) == (4, [5, 6])
    with pytest.raises(ValueError):
        epytree.register_pytree_node(Pair, lambda p: ([], None), lambda c, _: Pair(0, 0))
    # torch's per-type helpers, which libraries register their dict-like classes with
    class Record(dict):
        pass
    for mod in (epytree, tpytree):
        mod.register_pytree_node(Record, mod._dict_flatten,
                                 lambda v, c, mod=mod: Record(mod._dict_unflatten(v, c)),
                                 flatten_with_keys_fn=mod._dict_flatten_with_keys)
    tree = [Record(a=1, b=(2, 3))]
    assert [epytree.keystr(p) for p, _ in epytree.tree_flatten_with_path(tree)[0]] == \
        [tpytree.keystr(p) for p, _ in tpytree.tree_flatten_with_path(tree)[0]]
    assert epytree.tree_map(lambda x: x * 2, tree) == tpytree.tree_map(lambda x: x * 2, tree)
    assert type(epytree.tree_map(lambda x: x, tree)[0]) is Record
    for name in ("_list_flatten", "_tuple_flatten"):
        assert getattr(epytree, name)((1, 2)) == getattr(tpytree, name)((1, 2))
    # ember.Size flattens as torch.Size does
    assert epytree.tree_leaves(ember.Size([2, 3])) == tpytree.tree_leaves(torch.Size([2, 3]))


# ----- torch._dynamo -------------------------------------------------------------------
def test_dynamo_names():
    import torch._dynamo
    from torch._dynamo._trace_wrapped_higher_order_op import trace_wrapped as t_tw

    import ember._dynamo
    import ember.overrides
    from ember._dynamo._trace_wrapped_higher_order_op import trace_wrapped as e_tw
    compiled = ember.compile(ember.nn.Linear(2, 2))
    assert isinstance(compiled, ember._dynamo.eval_frame.OptimizedModule)
    assert ember._dynamo.eval_frame.innermost_fn(compiled) is compiled._orig_mod
    assert ember._dynamo.is_compiling() is torch._dynamo.is_compiling() is False
    # the config module reaches ember.compile's settings
    before = ember._compile.config.cache_size_limit
    try:
        ember._dynamo.config.cache_size_limit = 3
        assert ember._compile.config.cache_size_limit == 3
    finally:
        ember._dynamo.config.cache_size_limit = before
    assert ember._dynamo.config.suppress_errors is torch._dynamo.config.suppress_errors

    def f(x):
        return x * 3 + 1
    x = np.array([1.0, 2.0])
    te, tt = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    oe, ot = e_tw(te, fn=f), t_tw(tt, fn=f)
    assert oe.tolist() == ot.tolist() and oe.requires_grad is ot.requires_grad is False
    assert ember._dynamo.optimize("eager")(f)(ember.ones(1)).item() == 4.0
    for name in ("explain", "export"):
        with pytest.raises(RuntimeError, match="dynamo"):
            getattr(ember._dynamo, name)(f)(ember.ones(1))
    assert ember._dynamo.eval_frame.is_dynamo_supported() is False
    from ember._dynamo._trace_wrapped_higher_order_op import TransformGetItemToIndex
    assert issubclass(TransformGetItemToIndex, ember.overrides.TorchFunctionMode)
    a = ember.arange(12.0).reshape(3, 4)
    with TransformGetItemToIndex():
        got = a[ember.tensor(1), 2]
    assert got.item() == 6.0 and not got._is_view() and a[ember.tensor(1), 2]._is_view()


# ----- torch.fx ------------------------------------------------------------------------
def test_fx_wrap_and_missing_tracer():
    import ember.fx
    for m in ("torch", "ember"):  # as a decorator and by name, at a module's top level
        ns = {}
        exec(f"import {m}.fx\n@{m}.fx.wrap\ndef leaf(x):\n    return x + 1\n"
             f"{m}.fx.wrap('len')\n", ns)
        assert ns["leaf"](1) == 2
    check_raises(lambda m: m.fx.wrap(len))  # not at a module's top level
    ns = {}
    for m in ("torch", "ember"):
        with pytest.raises(RuntimeError, match="Unsupported type"):
            exec(f"import {m}.fx\n{m}.fx.wrap(3)\n", ns)
    with pytest.raises(NotImplementedError, match="symbolic_trace"):
        ember.fx.symbolic_trace(ember.nn.Linear(2, 2))
    with pytest.raises(NotImplementedError, match="GraphModule"):
        ember.fx.GraphModule(ember.nn.Linear(2, 2), None)
    assert issubclass(ember.fx.GraphModule, ember.nn.Module)
    assert not isinstance(ember.ones(1), ember.fx.Proxy)
    from ember.fx._symbolic_trace import is_fx_tracing
    assert is_fx_tracing() is False


# ----- torch.library -------------------------------------------------------------------
def _define_op(m, ns):
    @m.library.custom_op(f"{ns}::scaled_sin", mutates_args=())
    def scaled_sin(x: m.Tensor, scale: float) -> m.Tensor:
        return x.sin() * scale

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.scale = inputs[1]

    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x.cos() * ctx.scale, None

    scaled_sin.register_autograd(backward, setup_context=setup_context)

    @m.library.custom_op(f"{ns}::twice", mutates_args=())
    def twice(x: m.Tensor) -> m.Tensor:
        return x * 2
    return scaled_sin, twice


def test_library_custom_op_matches_torch():
    e_op, e_twice = _define_op(ember, "embertest")
    t_op, t_twice = _define_op(torch, "embertest")
    x = np.array([0.3, -1.2, 2.0])
    results = []
    for m, op in ((ember, e_op), (torch, t_op)):
        t = m.tensor(x, requires_grad=True)
        y = m.ops.embertest.scaled_sin(t, scale=1.5)
        y2 = m.ops.embertest.scaled_sin.default(t, 1.5)
        (y.sum() + y2.sum()).backward()
        results.append((y.detach().numpy(), t.grad.numpy(), op(t, 2.0).detach().numpy()))
    for e, t in zip(*results):
        np.testing.assert_allclose(e, t, rtol=1e-12)
    # an op without a derivative: the forward runs, backward raises RuntimeError
    for m, twice in ((ember, e_twice), (torch, t_twice)):
        t = m.tensor(x, requires_grad=True)
        out = twice(t)
        assert out.requires_grad and out.detach().numpy().tolist() == (2 * x).tolist()
        with pytest.raises(RuntimeError, match="register_autograd"):
            out.sum().backward()
    with pytest.raises(AttributeError):
        getattr(ember.ops.embertest, "missing_op")  # noqa: B009
    with pytest.raises(AttributeError):
        getattr(ember.ops, "no_such_namespace")  # noqa: B009
    def ident(x: torch.Tensor) -> torch.Tensor:
        return x
    check_raises(lambda m: m.library.custom_op("no_namespace", ident, mutates_args=()))


def test_library_define_impl():
    for m in (ember, torch):
        lib = m.library.Library("embertestdef", "DEF")
        lib.define("addone(Tensor x) -> Tensor")
        lib.impl("addone", lambda x: x + 1, "CPU")
        assert m.ops.embertestdef.addone(m.tensor([1.0, 2.0])).tolist() == [2.0, 3.0]


# ----- torch.overrides -----------------------------------------------------------------
def _tensor_like(m):
    class Wrapped:
        def __init__(self, v):
            self.v = v

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return ("handled", func.__name__, len(args))
    return Wrapped


def test_overrides_protocol_matches_torch():
    import torch.overrides

    import ember.overrides
    for mod in (ember.overrides, torch.overrides):
        Wrapped = _tensor_like(None)

        def api(a, b=None, mod=mod):
            if mod.has_torch_function((a, b)):
                return mod.handle_torch_function(api, (a, b), a, b)
            return "plain"
        assert api(1, 2) == "plain"
        assert api(Wrapped(1), 2) == ("handled", "api", 2)
        assert mod.has_torch_function_unary(Wrapped(1))
        assert mod.is_tensor_like(Wrapped(1)) and not mod.is_tensor_like(3)
    assert ember.overrides.is_tensor_like(ember.ones(1))

    class Mode(ember.overrides.TorchFunctionMode):  # a mode that answers nothing raises
        pass
    with pytest.raises(NotImplementedError):
        with Mode():
            ember.ones(1) + 1


def test_flop_counter_registry():
    import ember.utils.flop_counter as fc

    @fc.register_flop_formula("embertest_op")
    def formula(*args, **kwargs):
        return 1
    assert fc.flop_registry["embertest_op"] is formula


# ----- jit.annotations, nn.modules.batchnorm -------------------------------------------
def test_jit_annotations_and_batchnorm_module():
    from typing import Optional, Union

    import torch.jit.annotations as ta
    import torch.nn.modules.batchnorm as tbn

    import ember.jit.annotations as ea
    import ember.nn.modules.batchnorm as ebn
    assert ea.BroadcastingList2[int] is ta.BroadcastingList2[int] is None
    for ann in (Optional[int], Union[int, str], list[int], tuple[int, int], dict[str, int],  # noqa: UP007, UP045
                int, ea.List[int]):
        for pred in ("is_optional", "is_union", "is_list", "is_tuple", "is_dict"):
            assert getattr(ea, pred)(ann) == getattr(ta, pred)(ann), (ann, pred)
    for name in ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm",
                 "LazyBatchNorm1d", "_BatchNorm", "_NormBase"):
        assert hasattr(tbn, name) and hasattr(ebn, name)
    assert issubclass(ebn.BatchNorm2d, ebn._BatchNorm) and ebn.BatchNorm1d is ember.nn.BatchNorm1d


# ----- utils.benchmark -----------------------------------------------------------------
def test_benchmark_timer_measures():
    import torch.utils.benchmark as tb

    import ember.utils.benchmark as eb
    for mod in (eb, tb):
        timer = mod.Timer(stmt="time.sleep(0.002)", setup="import time", label="sleep")
        m = timer.timeit(number=3)
        assert m.number_per_run == 3 and len(m.times) == 1
        assert m.median >= 0.002  # a lower bound: sleeping takes at least that long
        b = mod.Timer(stmt="y = x * 2", globals={"x": 3}).blocked_autorange(min_run_time=0.02)
        assert sum(b.raw_times) >= 0.02 and b.mean > 0
    assert "sleep" in repr(eb.Timer("pass", label="sleep").timeit(10))
    with pytest.raises(ValueError):
        eb.Timer(stmt="pass", language=eb.Language.CPP)


# ----- xpu, cuda, hub, _C, data loader and module names --------------------------------
def test_xpu_as_torch_without_xpu():
    import ember.xpu
    assert ember.xpu.is_available() is torch.xpu.is_available() is False
    assert ember.xpu.device_count() == torch.xpu.device_count() == 0
    for name in ("current_device", "synchronize", "get_device_name"):
        check_raises(lambda m, name=name: (m.xpu if m is torch else ember.xpu).__dict__[
            name]())


def test_small_names():
    import torch.utils.data.dataloader as tdl

    import ember._C
    import ember.utils.data.dataloader as edl
    assert ember.cuda.get_rng_state_all() == torch.cuda.get_rng_state_all() == []
    ember.cuda.set_rng_state_all([])
    torch.cuda.set_rng_state_all([])
    check_raises(lambda m: m.cuda.CUDAGraph())
    check_raises(lambda m: m.cuda.Stream())
    check_raises(lambda m: m.cuda.Event())
    assert ember.hub.HASH_REGEX.pattern == torch.hub.HASH_REGEX.pattern
    assert ember.hub.HASH_REGEX.search("resnet18-f37072fd.pth").group(1) == "f37072fd"
    loader = edl.DataLoader(ember.arange(6.0), batch_size=2)
    assert isinstance(iter(loader), edl._BaseDataLoaderIter)
    assert isinstance(iter(tdl.DataLoader(torch.arange(6.0), batch_size=2)),
                      tdl._BaseDataLoaderIter)
    from ember.nn.modules.module import _IncompatibleKeys
    keys = ember.nn.Linear(2, 2).load_state_dict({"weight": ember.zeros(2, 2)}, strict=False)
    assert isinstance(keys, _IncompatibleKeys) and keys.missing_keys == ["bias"]
    assert issubclass(ember.jit.ScriptModule, ember.nn.Module)
    ember._C._log_api_usage_once("embertest.usage")
    torch._C._log_api_usage_once("embertest.usage")
    assert "embertest.usage" in ember._C._api_usage
    assert isinstance(ember.Tensor, ember._C._TensorMeta)
    assert ember._C._get_tracing_state() is torch._C._get_tracing_state() is None
    cases = [(("cpu", "float64"), {}), (("i32",), {}), (("float16",), {}),
             ((), {"device": "cpu"}), (("cpu",), {"non_blocking": True}),
             ((), {"dtype": "float32", "memory_format": "channels_last"})]
    for args, kwargs in cases:
        outs = []
        for m in (ember, torch):
            def conv(a, m=m):
                if a == "i32":
                    return m.zeros(1, dtype=m.int32)
                if isinstance(a, str) and a != "cpu":
                    return getattr(m, a)
                return a
            outs.append(m._C._nn._parse_to(*[conv(a) for a in args],
                                           **{k: conv(v) for k, v in kwargs.items()}))
        assert [str(x) for x in outs[0]] == [str(x).replace("torch.", "ember.")
                                             for x in outs[1]], (args, kwargs)


def test_cuda_stream_context_and_graph_without_cuda():
    for m in (torch, ember):
        ctx = m.cuda.StreamContext(None)
        assert ctx.__enter__() is None and ctx.idx == -1
        ctx.__exit__(None, None, None)
        with m.cuda.stream(None) as entered:
            assert entered is None
        assert isinstance(m.cuda.stream(None), m.cuda.StreamContext)
    check_raises(lambda m: m.cuda.graph(None))
    e = check_raises(lambda m: m.cuda.graph(None))
    assert "requires CUDA support" in str(e)


def test_untyped_storage_from_file(tmp_path):
    path = tmp_path / "bytes.bin"
    path.write_bytes(np.arange(64, dtype=np.float32).tobytes())
    for shared in (False, True):
        got, want = (m.UntypedStorage.from_file(str(path), shared=shared, nbytes=40)
                     for m in (ember, torch))
        assert got.nbytes() == want.nbytes() == 40 and got.tolist() == want.tolist()
        assert got.untyped() is got and want.untyped() is want
        assert got.is_shared() is want.is_shared() is True
        piece = got[8:24]  # a slice shares the bytes, as in torch
        piece[0] = 7
        assert got[8] == 7
        t = ember.asarray(got[8:24], dtype=ember.uint8).view(dtype=ember.float32)
        tt = torch.asarray(want[8:24], dtype=torch.uint8).view(dtype=torch.float32)
        assert t.shape == tt.shape and t[1:].tolist() == tt[1:].tolist()
    # shared: writes reach the file; not shared: they stay in this process
    s = ember.UntypedStorage.from_file(str(path), shared=True, nbytes=8)
    s[0] = 65
    del s
    s = ember.UntypedStorage.from_file(str(path), shared=False, nbytes=8)
    s[1] = 66
    del s
    assert path.read_bytes()[:2] == b"A\x00"
    assert ember.UntypedStorage.from_file(str(path), False).nbytes() == \
        torch.UntypedStorage.from_file(str(path), False).nbytes() == 0
    for args in ((str(path), False, 1000), (str(tmp_path / "missing"), False, 4)):
        e = check_raises(lambda m, args=args: m.UntypedStorage.from_file(*args))
        assert str(e).split(" ")[0] in ("file", "unable"), e


def test_safetensors_loads_through_storage_from_file(tmp_path):
    # safetensors' "pt" loader maps the file with UntypedStorage.from_file
    from safetensors.torch import save_file
    path = str(tmp_path / "w.safetensors")
    arrays = {"a": np.arange(6, dtype=np.float32).reshape(2, 3),
              "b": np.array([1, -2], dtype=np.int64), "c": np.ones((2, 2), np.float16)}
    save_file({k: torch.tensor(v) for k, v in arrays.items()}, path)
    prog = tmp_path / "load.py"
    prog.write_text("import sys, numpy as np, torch\n"
                    "from safetensors import safe_open\n"
                    "with safe_open(sys.argv[1], framework='pt') as f:\n"
                    "    t = {k: f.get_tensor(k) for k in f.keys()}\n"
                    "assert all(type(v) is torch.Tensor for v in t.values())\n"
                    "np.savez(sys.argv[2], **{k: v.numpy() for k, v in t.items()})\n")
    r = subprocess.run([sys.executable, "-m", "ember", "run", str(prog), path,
                        str(tmp_path / "out.npz")], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    got = np.load(tmp_path / "out.npz")
    for k, v in arrays.items():
        assert got[k].dtype == v.dtype
        np.testing.assert_array_equal(got[k], v)


# ----- under `ember run`: lazily reachable modules, functorch --------------------------
def test_modules_under_ember_run(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent("""
        import sys
        import torch
        # `import torch` loads no optional extra and none of these modules yet
        assert "onnx" not in sys.modules and "ember.onnx" not in sys.modules
        for name in ("onnx", "multiprocessing", "compiler", "library", "fx", "overrides",
                     "xpu", "_dynamo", "_C"):
            assert getattr(torch, name).__name__ == "ember." + name, name
        assert torch.nn.attention.SDPBackend is not None
        assert torch.utils._pytree.tree_leaves([1, (2,)]) == [1, 2]
        assert torch.ScriptModule is torch.jit.ScriptModule
        import functorch
        from functorch import vmap, grad
        from torch._functorch.apis import vmap as vmap2
        assert vmap is vmap2 is torch.func.vmap
        x = torch.tensor([1.0, 2.0])
        print(grad(lambda t: (t ** 2).sum())(x).tolist())
        from torch._dynamo.eval_frame import OptimizedModule
        from torch.utils._pytree import tree_flatten
        from torch.nn.modules.batchnorm import _BatchNorm
        from torch.jit.annotations import BroadcastingList2
        from torch.utils.benchmark import Timer
        from torch.utils.flop_counter import FlopCounterMode
        from torch.overrides import TorchFunctionMode
        from torch.fx import wrap
        from torch._C._nn import _parse_to
        import torch.nn.modules.module
        print("ok", torch.nn.modules.module._IncompatibleKeys.__name__)
    """))
    r = subprocess.run([sys.executable, "-m", "ember", "run", str(prog)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == ["[2.0, 4.0]", "ok _IncompatibleKeys"]


def test_import_ember_loads_no_extra():
    code = ("import sys, ember; bad = [m for m in ('onnx', 'onnxruntime', 'ember.onnx', "
            "'ember._dynamo', 'ember.fx', 'ember.library') if m in sys.modules]; "
            "print(bad)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stderr
    assert ember.onnx.__name__ == "ember.onnx"


def test_nn_modules_utils_and_model_zoo():
    from collections import OrderedDict

    import torch.nn.modules.utils as tu
    import torch.utils.model_zoo as tz

    import ember.nn.modules.utils as eu
    import ember.utils.model_zoo as ez
    for name in ("_single", "_pair", "_triple", "_quadruple"):
        for arg in (3, [1, 2], "ab", (4,)):
            assert getattr(eu, name)(arg) == getattr(tu, name)(arg)
    assert eu._reverse_repeat_tuple((1, 2, 3), 2) == tu._reverse_repeat_tuple((1, 2, 3), 2)
    assert eu._list_with_default([None, 5], [1, 2, 3]) == \
        tu._list_with_default([None, 5], [1, 2, 3])
    check_raises(lambda m: (eu if m is ember else tu)._list_with_default([1, 2], [3]))
    stripped = []
    for mod in (eu, tu):
        sd = OrderedDict([("module.w", 1), ("b", 2)])
        sd._metadata = OrderedDict([("", {"v": 0}), ("module", {"v": 1}),
                                    ("module.lin", {"v": 2})])
        mod.consume_prefix_in_state_dict_if_present(sd, "module.")
        stripped.append((list(sd.items()), list(sd._metadata.items())))
    assert stripped[0] == stripped[1] and stripped[0][0] == [("b", 2), ("w", 1)]
    assert ez.load_url is ember.hub.load_state_dict_from_url and callable(tz.load_url)
