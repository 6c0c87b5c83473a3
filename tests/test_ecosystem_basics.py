"""Small PyTorch behaviours that libraries built on torch rely on, compared with torch 2.13.

Optimizers on 0-d parameters (CLIP's ``logit_scale``), bare ``@no_grad`` decorators,
``x in tensor``, NumPy's ``axis=``/``keepdims=`` spellings, device strings, the legacy
``FloatTensor(...)`` constructors, generic ``Dataset[int]`` classes, ``copy_`` into
expanded buffers and the version ``torch.__version__`` reports under ``ember run``.
"""
import copy
import warnings

import numpy as np
import pytest
import torch
from oracle import check_raises
from test_optim import CONFIGS, LBFGS_CONFIGS, assert_same_state_dict, make_opt

import ember

# ----- optimizers on 0-d, 1-d and non-contiguous parameters ------------------------------
_orng = np.random.default_rng(7)
_SCALAR, _VECTOR = 1.3, _orng.standard_normal(4)
_MATRIX = _orng.standard_normal((3, 4))  # the parameter is its (4, 3) transpose
_TARGET = _orng.standard_normal((4, 3))


def _shaped_params(m):
    """A 0-d, a 1-d and a transposed (non-contiguous) 2-d leaf parameter."""
    a = m.tensor(_SCALAR, dtype=m.float64, requires_grad=True)
    b = m.tensor(_VECTOR, dtype=m.float64, requires_grad=True)
    c = m.tensor(_MATRIX, dtype=m.float64).t().requires_grad_()
    return [a, b, c]


def _shaped_loss(m, params):
    a, b, c = params
    t = m.tensor(_TARGET)
    return (a * b - 0.5).pow(2).sum() + (m.tanh(c) * a - t).pow(2).mean() + (a - 2) ** 2


def _train_shaped(m, opt, params, steps, closure=False):
    for _ in range(steps):
        def step_closure():
            opt.zero_grad()
            loss = _shaped_loss(m, params)
            loss.backward()
            return loss
        if closure:
            opt.step(step_closure)
        else:
            step_closure()
            opt.step()


def _assert_shaped_params(ep, tp, rtol=1e-5):
    for i, (e, t) in enumerate(zip(ep, tp)):
        assert tuple(e.shape) == tuple(t.shape) and e.stride() == t.stride(), f"param {i}"
        np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=rtol,
                                   atol=1e-8, err_msg=f"param {i}")


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c[0] + "-" + "-".join(
    f"{k}={'tensor' if callable(v) else v}" for k, v in c[1].items()) + ("+group" if c[2]
                                                                          else ""))
def test_optimizers_on_0d_1d_and_noncontiguous_params(config):
    name, kwargs, groups = config
    tp, ep = _shaped_params(torch), _shaped_params(ember)
    topt = make_opt(torch, name, kwargs, tp, groups)
    eopt = make_opt(ember, name, kwargs, ep, groups)
    _train_shaped(torch, topt, tp, 6)
    _train_shaped(ember, eopt, ep, 6)
    _assert_shaped_params(ep, tp)
    assert_same_state_dict(eopt.state_dict(), topt.state_dict(), rtol=1e-6)
    # the state tensors keep the shape and strides of their parameter
    for (es, ts) in zip(eopt.state_dict()["state"].values(),
                        topt.state_dict()["state"].values()):
        for key, t in ts.items():
            if isinstance(t, torch.Tensor):
                assert es[key].stride() == t.stride(), key
    # a round trip through the state dict continues as torch does
    saved = copy.deepcopy(eopt.state_dict())
    ep2 = _shaped_params(ember)
    for p2, p in zip(ep2, ep):
        p2.data.copy_(p.data)
    eopt2 = make_opt(ember, name, kwargs, ep2, groups)
    eopt2.load_state_dict(saved)
    _train_shaped(ember, eopt2, ep2, 3)
    _train_shaped(torch, topt, tp, 3)
    _assert_shaped_params(ep2, tp)


@pytest.mark.parametrize("kwargs,steps", LBFGS_CONFIGS, ids=str)
def test_lbfgs_on_0d_and_1d_params(kwargs, steps):
    tp, ep = _shaped_params(torch)[:2], _shaped_params(ember)[:2]

    def run(m, params):
        opt = m.optim.LBFGS(params, **kwargs)
        losses = []
        for _ in range(steps):
            def closure():
                opt.zero_grad()
                a, b = params
                loss = (a * b - 0.5).pow(2).sum() + (a - 2) ** 2
                loss.backward()
                return loss
            losses.append(opt.step(closure).item())
        return opt, losses
    topt, tl = run(torch, tp)
    eopt, el = run(ember, ep)
    np.testing.assert_allclose(el, tl, rtol=1e-6)
    _assert_shaped_params(ep, tp)
    ts, es = topt.state_dict()["state"][0], eopt.state_dict()["state"][0]
    assert es["n_iter"] == ts["n_iter"] and es["func_evals"] == ts["func_evals"]


def test_lbfgs_on_noncontiguous_param():
    # torch's LBFGS flattens each gradient with view(-1), which refuses the transposed
    # gradient torch gives a transposed parameter; ember's works on it, and its steps
    # equal torch's on a contiguous parameter holding the same values
    tp, ep = _shaped_params(torch), _shaped_params(ember)
    tp[2] = torch.tensor(_MATRIX.T.copy(), requires_grad=True)
    for m, params in ((torch, tp), (ember, ep)):
        opt = m.optim.LBFGS(params, line_search_fn="strong_wolfe", max_iter=5)
        _train_shaped(m, opt, params, 2, closure=True)
    for e, t in zip(ep, tp):
        np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-6)
    assert ep[2].stride() == (1, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError):
            params = _shaped_params(torch)
            _train_shaped(torch, torch.optim.LBFGS(params), params, 1, closure=True)


# ----- grad modes as bare decorators -------------------------------------------------------
@pytest.mark.parametrize("mode", ["no_grad", "enable_grad", "inference_mode"])
def test_grad_modes_decorate_without_parentheses(mode):
    def observe(m):
        @getattr(m, mode)
        def f(x):
            """doc"""
            return x * 2, m.is_grad_enabled(), m.is_inference_mode_enabled()

        @getattr(m, mode)
        def gen():
            yield m.is_grad_enabled()
            yield m.is_inference_mode_enabled()

        class A:
            @getattr(m, mode)
            def method(self, x):
                return (x * 3).requires_grad

        x = m.ones(2, requires_grad=True)
        results = []
        for outer in (m.enable_grad, m.no_grad):
            with outer():
                y, grad_on, inference = f(x)
                results += [y.requires_grad, grad_on, inference, list(gen()), A().method(x),
                            m.is_grad_enabled()]
        return results + [f.__name__, f.__doc__, type(getattr(m, mode)()).__name__]
    assert observe(ember) == observe(torch)


def test_inference_mode_bool_and_call_forms():
    def observe(m):
        @m.inference_mode(False)
        def f():
            return m.is_inference_mode_enabled(), m.is_grad_enabled()

        @m.inference_mode()
        def g():
            return m.is_inference_mode_enabled(), m.is_grad_enabled()

        @m.no_grad()
        def h():
            return m.is_grad_enabled()
        with m.inference_mode(mode=True):
            inside = m.is_inference_mode_enabled()
        return [f(), g(), h(), inside, m.is_inference_mode_enabled()]
    assert observe(ember) == observe(torch)


# ----- `x in tensor` ------------------------------------------------------------------------
@pytest.mark.parametrize("element", [0, 1, 2.0, 2.5, True, 1 + 0j, np.int64(4), np.float32(3),
                                     "t3", "t34", "t54", "t12_2d", "t99"], ids=str)
def test_contains(element):
    def check(m):
        t = m.tensor([[1, 2], [3, 4]])
        e = element
        if isinstance(e, str):
            e = {"t3": m.tensor(3), "t34": m.tensor([3, 4]), "t54": m.tensor([5, 4]),
                 "t12_2d": m.tensor([[1, 2]]), "t99": m.tensor([9, 9.5])}[e]
        return [e in t, e in t.float(), e in t.t(), e in m.zeros(0, 2), e in t[0, 0]]
    assert check(ember) == check(torch)


def test_contains_nan_and_unsupported():
    for m in (ember, torch):
        assert float("nan") not in m.tensor([float("nan"), 1.0])
        assert 1.0 in m.tensor([float("nan"), 1.0])
    for bad in ["a", None, [1, 2], (1,), {1}]:
        err = check_raises(lambda m, bad=bad: bad in m.tensor([1, 2]))
        assert "only supports Tensor or scalar" in str(err)
    check_raises(lambda m: m.tensor([1, 2, 3]) in m.tensor([[1, 2], [3, 4]]))


# ----- NumPy's axis=/keepdims= spellings ------------------------------------------------------
_A = np.random.default_rng(3).standard_normal((3, 4, 5))
_IDX = np.random.default_rng(4).integers(0, 4, size=(3, 2, 5))

# (name, call taking (m, x, kw) where kw holds the dim-like keywords, keyword sets to try)
_D = [{"dim": 1}, {"dim": -1, "keepdim": True}, {"dim": 0, "keepdim": False}]
_DIM_ONLY = [{"dim": 1}, {"dim": -1}, {"dim": 0}]
AXIS_CASES = [
    ("sum", lambda m, x, kw: m.sum(x, **kw), _D + [{"dim": (0, 2), "keepdim": True}]),
    ("Tensor.sum", lambda m, x, kw: x.sum(**kw), _D),
    ("mean", lambda m, x, kw: m.mean(x, **kw), _D + [{"dim": [0, 1]}]),
    ("Tensor.mean", lambda m, x, kw: x.mean(**kw), _D),
    ("nansum", lambda m, x, kw: m.nansum(x, **kw), _D),
    ("nanmean", lambda m, x, kw: m.nanmean(x, **kw), _D),
    ("prod", lambda m, x, kw: m.prod(x, **kw), _D),
    ("max", lambda m, x, kw: m.max(x, **kw), _D),
    ("Tensor.max", lambda m, x, kw: x.max(**kw), _D),
    ("min", lambda m, x, kw: m.min(x, **kw), _D),
    ("amax", lambda m, x, kw: m.amax(x, **kw), _D + [{"dim": (0, 1), "keepdim": True}]),
    ("amin", lambda m, x, kw: x.amin(**kw), _D),
    ("aminmax", lambda m, x, kw: m.aminmax(x, **kw), _D),
    ("argmax", lambda m, x, kw: m.argmax(x, **kw), _D),
    ("Tensor.argmax", lambda m, x, kw: x.argmax(**kw), _D),
    ("argmin", lambda m, x, kw: x.argmin(**kw), _D),
    ("all", lambda m, x, kw: m.all(x > 0, **kw), _D),
    ("any", lambda m, x, kw: (x > 1).any(**kw), _D),
    ("std", lambda m, x, kw: m.std(x, **kw), _D),
    ("Tensor.std", lambda m, x, kw: x.std(**kw), _D),
    ("var", lambda m, x, kw: m.var(x, **kw), _D),
    ("std_mean", lambda m, x, kw: m.std_mean(x, **kw), _D),
    ("var_mean", lambda m, x, kw: m.var_mean(x, **kw), _D),
    ("logsumexp", lambda m, x, kw: m.logsumexp(x, **kw), _D),
    ("median", lambda m, x, kw: m.median(x, **kw), _D),
    ("nanmedian", lambda m, x, kw: x.nanmedian(**kw), _D),
    ("mode", lambda m, x, kw: m.mode(x.round(), **kw), _D),
    ("kthvalue", lambda m, x, kw: m.kthvalue(x, 2, **kw), _D),
    ("Tensor.kthvalue", lambda m, x, kw: x.kthvalue(2, **kw), _D),
    ("quantile", lambda m, x, kw: m.quantile(x, 0.3, **kw), _D),
    ("count_nonzero", lambda m, x, kw: m.count_nonzero(x > 0, **kw), _DIM_ONLY),
    ("softmax", lambda m, x, kw: m.softmax(x, **kw), _DIM_ONLY),
    ("Tensor.log_softmax", lambda m, x, kw: x.log_softmax(**kw), _DIM_ONLY),
    ("special.softmax", lambda m, x, kw: m.special.softmax(x, **kw), _DIM_ONLY),
    ("cumsum", lambda m, x, kw: m.cumsum(x, **kw), _DIM_ONLY),
    ("Tensor.cumsum_", lambda m, x, kw: x.clone().cumsum_(**kw), _DIM_ONLY),
    ("cumprod", lambda m, x, kw: x.cumprod(**kw), _DIM_ONLY),
    ("cummax", lambda m, x, kw: m.cummax(x, **kw), _DIM_ONLY),
    ("logcumsumexp", lambda m, x, kw: m.logcumsumexp(x, **kw), _DIM_ONLY),
    ("sort", lambda m, x, kw: m.sort(x, **kw), _DIM_ONLY),
    ("Tensor.sort", lambda m, x, kw: x.sort(descending=True, **kw), _DIM_ONLY),
    ("argsort", lambda m, x, kw: x.argsort(**kw), _DIM_ONLY),
    ("topk", lambda m, x, kw: m.topk(x, 2, **kw), _DIM_ONLY),
    ("Tensor.topk", lambda m, x, kw: x.topk(2, **kw), _DIM_ONLY),
    ("cat", lambda m, x, kw: m.cat([x, x * 2], **kw), _DIM_ONLY),
    ("concat", lambda m, x, kw: m.concat([x, x], **kw), _DIM_ONLY),
    ("stack", lambda m, x, kw: m.stack([x, x], **kw), _DIM_ONLY),
    ("squeeze", lambda m, x, kw: m.squeeze(x[:, :1, :1], **kw), _DIM_ONLY),
    ("unsqueeze", lambda m, x, kw: x.unsqueeze(**kw), _DIM_ONLY),
    ("unbind", lambda m, x, kw: x.unbind(**kw), _DIM_ONLY),
    ("chunk", lambda m, x, kw: m.chunk(x, 2, **kw), _DIM_ONLY),
    ("tensor_split", lambda m, x, kw: x.tensor_split(2, **kw), _DIM_ONLY),
    ("select", lambda m, x, kw: m.select(x, index=1, **kw), _DIM_ONLY),
    ("narrow", lambda m, x, kw: x.narrow(start=1, length=2, **kw), _DIM_ONLY),
    ("index_select", lambda m, x, kw: m.index_select(x, index=m.tensor([0, 2]), **kw),
     _DIM_ONLY),
    ("gather", lambda m, x, kw: m.gather(x, index=m.tensor(_IDX)[:, :, :1].clamp(max=0),
                                         **kw), _DIM_ONLY),
    ("take_along_dim", lambda m, x, kw: m.take_along_dim(x, m.tensor(_IDX) % 3, **kw),
     [{"dim": 1}]),
    ("repeat_interleave", lambda m, x, kw: x.repeat_interleave(2, **kw), _DIM_ONLY),
    ("diff", lambda m, x, kw: m.diff(x, **kw), _DIM_ONLY),
    ("movedim-sum", lambda m, x, kw: m.movedim(x, 0, 1).sum(**kw), _D),
    ("size", lambda m, x, kw: x.size(**kw), _DIM_ONLY),
    ("stride", lambda m, x, kw: x.stride(**kw), _DIM_ONLY),
    ("cross", lambda m, x, kw: m.cross(x[:, :3], x[:, 1:], **kw), [{"dim": 1}]),
    ("linalg.vector_norm", lambda m, x, kw: m.linalg.vector_norm(x, **kw), _D),
    ("linalg.norm", lambda m, x, kw: m.linalg.norm(x, **kw), _D),
    ("fft.fft", lambda m, x, kw: m.fft.fft(x, **kw), _DIM_ONLY),
    ("fft.rfftn", lambda m, x, kw: m.fft.rfftn(x, **kw), [{"dim": (0, 2)}]),
    ("F.cosine_similarity", lambda m, x, kw: m.nn.functional.cosine_similarity(x, x + 1, **kw),
     _DIM_ONLY),
]


def _same(e, t):
    if isinstance(t, torch.Tensor):
        assert tuple(e.shape) == tuple(t.shape) and str(e.dtype)[6:] == str(t.dtype)[6:]
        np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-10,
                                   atol=1e-12)
    elif isinstance(t, (tuple, list)):
        assert len(e) == len(t)
        for a, b in zip(e, t):
            _same(a, b)
    else:
        assert e == t


def _numpy_spelling(kw):
    return {{"dim": "axis", "keepdim": "keepdims"}[k]: v for k, v in kw.items()}


@pytest.mark.parametrize("name,call,kwargs", AXIS_CASES, ids=[c[0] for c in AXIS_CASES])
def test_axis_and_keepdims_aliases(name, call, kwargs):
    for kw in kwargs:
        np_kw = _numpy_spelling(kw)
        spellings = [kw, np_kw]
        if len(kw) == 2:  # one of each spelling
            spellings += [{"axis": kw["dim"], "keepdim": kw["keepdim"]},
                          {"dim": kw["dim"], "keepdims": kw["keepdim"]}]
        for spelling in spellings:
            t = call(torch, torch.tensor(_A), spelling)
            e = call(ember, ember.tensor(_A), spelling)
            _same(e, t)
        # the alias given with its own name, or positionally as well, is a TypeError
        both = dict(kw, axis=kw["dim"])
        check_raises(lambda m, both=both: call(m, m.tensor(_A), both), exc=TypeError)


@pytest.mark.parametrize("call", [
    lambda m, x: m.split(x, 1, axis=1),            # torch writes these in Python
    lambda m, x: m.norm(x, axis=1),
    lambda m, x: m.unique(x, axis=0),
    lambda m, x: x.norm(axis=1),
    lambda m, x: x.split(2, axis=0),
    lambda m, x: m.nn.functional.softmax(x, axis=1),
    lambda m, x: m.nn.functional.log_softmax(x, axis=1),
    lambda m, x: m.nn.functional.normalize(x, axis=1),
    lambda m, x: m.sum(x, axes=1),                  # not an alias
    lambda m, x: m.sum(x, 0, axis=1),
    lambda m, x: m.flip(x, axis=0),                 # dims, not dim
    lambda m, x: x.transpose(axis0=0, axis1=1),
])
def test_aliases_rejected_where_torch_rejects_them(call):
    check_raises(lambda m: call(m, m.tensor(_A)), exc=TypeError)


def test_axis_aliases_keep_gradients_and_identity():
    x = ember.tensor(_A, requires_grad=True)
    x.sum(axis=1, keepdims=True).pow(2).sum().backward()
    tx = torch.tensor(_A, requires_grad=True)
    tx.sum(axis=1, keepdims=True).pow(2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())
    # one wrapper per function, wherever it is published, with the op's own metadata
    assert ember.sum.__name__ == "sum" and ember.sum.__doc__ == ember.ops.reduction.sum.__doc__
    import inspect
    assert "dim" in inspect.signature(ember.sum).parameters


# ----- devices ----------------------------------------------------------------------------
_DEVICE_STRINGS = ["cpu", "cuda", "cuda:1", "mps", "mps:0", "xpu", "xpu:3", "meta", "hpu",
                   "xla:2", "mtia", "ipu", "privateuseone", "hip", "ve", "lazy", "vulkan",
                   "fpga", "maia", "opengl", "opencl", "ideep", "cpu:0", "meta:2"]


@pytest.mark.parametrize("spec", _DEVICE_STRINGS)
def test_device_strings(spec):
    e, t = ember.device(spec), torch.device(spec)
    assert (e.type, e.index, str(e), f"{e}") == (t.type, t.index, str(t), f"{t}")
    assert repr(e) == repr(t)
    assert e == ember.device(spec) and hash(e) == hash(ember.device(spec))
    assert ember.device(e) == e and ember.device(e.type, e.index) == e
    assert ember.device(type=e.type, index=e.index) == e
    # a device never equals a string, as in torch
    assert (e == spec) is (t == spec) is False and (e != spec) is (t != spec) is True
    assert (spec in [e]) is (spec in [t])
    import pickle
    assert pickle.loads(pickle.dumps(e)) == e and copy.deepcopy(e) == e
    assert {e: 1}.get(ember.device(spec)) == 1


@pytest.mark.parametrize("args", [
    ("npu",), ("ort",), ("gpu",), ("CUDA",), ("",), ("cuda:",), ("cuda:-1",), ("cuda:01",),
    ("cuda: 1",), (" cuda",), ("cuda:1 ",), ("cuda:+1",), ("cuda:1:2",), ("cuda:x",),
    ("cuda", -1), ("cuda:1", 1), ("cuda", "1"), ("cuda", True), (None,), (3.0,), (True,),
    (-1,), ("mps", 1.0),
], ids=str)
def test_device_errors(args):
    check_raises(lambda m: m.device(*args))


def test_device_comparisons_and_use():
    for m in (ember, torch):
        assert m.device("cuda:0") != m.device("cuda")
        assert m.device("cpu") != m.device("meta") and m.device("mps") != m.device("xpu")
        assert m.device("cuda", 1).index == 1 and m.device("cuda:1") == m.device("cuda", 1)
        assert m.ones(2).device == m.device("cpu") and m.ones(2).device != "cpu"
        assert m.ones(2).device.type == "cpu"
        assert len({m.device("cpu"), m.device("cpu"), m.device("cpu", 0)}) == 2
    # naming a device is fine; holding data there is not (ember computes on cpu and cuda)
    with pytest.raises(RuntimeError, match="mps"):
        ember.ones(2, device="mps")
    with pytest.raises(RuntimeError, match="xpu"):
        ember.ones(2).to(ember.device("xpu"))


# ----- legacy constructors: torch.FloatTensor(...) ---------------------------------------------
_LEGACY = ["FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor", "ShortTensor",
           "CharTensor", "ByteTensor", "BoolTensor"]
_LEGACY_DATA = [
    lambda m: [1, 0, 2], lambda m: [[1.5, 2.7], [3.2, 0.0]], lambda m: (1, 2), lambda m: [],
    lambda m: range(4), lambda m: np.array([[1.25, 2.0]]), lambda m: np.array(3.0),
    lambda m: [[True, False]], lambda m: (),
]


@pytest.mark.parametrize("name", _LEGACY)
def test_legacy_constructors_from_data(name):
    for data in _LEGACY_DATA:
        e, t = getattr(ember, name)(data(ember)), getattr(torch, name)(data(torch))
        assert tuple(e.shape) == tuple(t.shape) and str(e.dtype)[6:] == str(t.dtype)[6:]
        assert not e.requires_grad
        np.testing.assert_array_equal(e.numpy(), t.numpy())
    for m in (ember, torch):
        cls = getattr(m, name)
        x = cls([1, 2])
        assert isinstance(x, cls) and x.type() == f"torch.{name}" and cls.dtype == x.dtype
        assert not cls.is_cuda and not cls.is_sparse
        assert repr(cls) == f"<class 'torch.{name}'>"
        other = m.FloatTensor if name != "FloatTensor" else m.DoubleTensor
        assert not isinstance(x, other) and not isinstance(x, getattr(m.cuda, name))


@pytest.mark.parametrize("sizes", [(2, 3), (0,), (), (4,), (2, 0, 3), (np.int64(2), 3)], ids=str)
def test_legacy_constructors_from_sizes(sizes):
    for name in ("FloatTensor", "LongTensor", "BoolTensor"):
        for make in (lambda m, n=name: getattr(m, n)(*sizes),
                     lambda m, n=name: getattr(m, n)(m.Size([int(s) for s in sizes])),
                     lambda m, n=name: getattr(m, n)(*sizes, device="cpu")):
            e, t = make(ember), make(torch)
            assert tuple(e.shape) == tuple(t.shape) and str(e.dtype)[6:] == str(t.dtype)[6:]
            assert e.is_contiguous()


def test_legacy_constructor_alias_and_storage():
    for m in (ember, torch):
        t = m.tensor([1.0, 2.0], requires_grad=True)
        a = m.FloatTensor(t)
        assert a is not t and a.requires_grad and a.grad_fn is not None
        assert a.data_ptr() == t.data_ptr()
        s = m.tensor([1.5, -2.0, 4.0]).untyped_storage()
        assert m.FloatTensor(s).tolist() == [1.5, -2.0, 4.0]
        assert m.LongTensor(m.tensor([7, -8]).untyped_storage()).tolist() == [7, -8]
        assert m.ByteTensor(m.tensor([1], dtype=m.int16).untyped_storage()).tolist() == [1, 0]


@pytest.mark.parametrize("call", [
    lambda m: m.FloatTensor(m.tensor([1.0], dtype=m.float64)),
    lambda m: m.LongTensor(m.tensor([1.5])),
    lambda m: m.FloatTensor(m.tensor(3)),
    lambda m: m.FloatTensor(2.0), lambda m: m.FloatTensor(True), lambda m: m.FloatTensor(None),
    lambda m: m.FloatTensor(np.float32(2)), lambda m: m.FloatTensor("a"),
    lambda m: m.FloatTensor({1: 2}), lambda m: m.FloatTensor(x for x in [1]),
    lambda m: m.FloatTensor(2, [1]), lambda m: m.FloatTensor([1], 2),
    lambda m: m.FloatTensor(2, 3.0), lambda m: m.FloatTensor(-1), lambda m: m.LongTensor(2, -3),
    lambda m: m.FloatTensor([1], dtype=m.float64), lambda m: m.FloatTensor([1], requires_grad=True),
    lambda m: m.FloatTensor(2, device="meta"), lambda m: m.FloatTensor([1], device="cuda"),
    lambda m: m.FloatTensor([[1], [2, 3]]),
])
def test_legacy_constructor_errors(call):
    check_raises(call)


# ----- generic data classes: Sampler[int], Dataset[T] ---------------------------------------
_DATA_CLASSES = ["Dataset", "IterableDataset", "TensorDataset", "StackDataset", "ConcatDataset",
                 "ChainDataset", "Subset", "Sampler", "SequentialSampler", "RandomSampler",
                 "SubsetRandomSampler", "WeightedRandomSampler", "BatchSampler",
                 "DistributedSampler", "DataLoader", "IterDataPipe", "MapDataPipe"]


@pytest.mark.parametrize("name", _DATA_CLASSES)
def test_data_classes_generic_as_torch(name):
    import typing
    e, t = getattr(ember.utils.data, name), getattr(torch.utils.data, name)
    assert (typing.Generic in e.__mro__) == (typing.Generic in t.__mro__)
    assert [str(p) for p in e.__parameters__] == [str(p) for p in t.__parameters__]
    if t.__parameters__:
        alias = e[int]
        assert typing.get_origin(alias) is e and typing.get_args(alias) == (int,)


def test_generic_subclasses_work():
    import collections.abc
    import typing
    D = ember.utils.data

    class Squares(D.Dataset[int]):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return i * i

    class Evens(D.Sampler[int]):
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return iter(range(0, self.n, 2))

        def __len__(self):
            return (self.n + 1) // 2

    class Stream(D.IterableDataset[int]):
        def __iter__(self):
            return iter(range(3))

    loader: D.DataLoader[int] = D.DataLoader(Squares(), batch_size=2, sampler=Evens(5))
    assert [b.tolist() for b in loader] == [[0, 4], [16]]
    assert [b.tolist() for b in D.DataLoader(Stream(), batch_size=2)] == [[0, 1], [2]]
    assert typing.get_args(Squares.__orig_bases__[0]) == (int,)
    assert isinstance(Stream(), collections.abc.Iterable)
    # __iter__ is abstract, as in torch
    check_raises(lambda m: m.utils.data.IterableDataset())

    class NoIter(D.IterableDataset):
        pass
    with pytest.raises(TypeError):
        NoIter()
    assert isinstance(D.TensorDataset(ember.ones(2)), D.Dataset)
    assert list(D.BatchSampler(D.SequentialSampler(range(3)), 2, False)) == [[0, 1], [2]]


# ----- copy_ into expanded buffers (BERT's position_ids) --------------------------------------
@pytest.mark.parametrize("sizes,expand", [
    ((8,), (1, -1)), ((8,), (1, 1, 8)), ((3, 4), (1, 3, 4)), ((1, 5), (1, 5)), ((), (1,)),
    ((2, 1), (2, 1)), ((4,), (1, 1, -1)), ((2, 1), (1, 2, 1)),
], ids=str)
def test_expand_strides_and_writes_as_torch(sizes, expand):
    def run(m):
        base = m.arange(int(np.prod(sizes)) or 1).reshape(sizes)
        v = base.expand(expand)
        v.copy_(m.arange(v.numel()).reshape(v.shape) * 3 + 1)
        v.add_(1)
        return v.stride(), v.is_contiguous(), v.tolist(), base.tolist()
    assert run(ember) == run(torch)


@pytest.mark.parametrize("sizes,expand", [((1,), (4,)), ((4,), (3, 4)), ((2, 1), (2, 3)),
                                          ((), (2,)), ((), (1, 3))], ids=str)
def test_writes_into_overlapping_expansions_raise_as_torch(sizes, expand):
    def view(m):
        return m.zeros(sizes).expand(expand)
    assert view(ember).stride() == view(torch).stride()
    n = int(np.prod(expand))
    for write in (lambda m: view(m).copy_(m.arange(n).reshape(expand).float()),
                  lambda m: view(m).add_(1), lambda m: view(m).mul_(m.ones(expand)),
                  lambda m: view(m).copy_(m.tensor(5.0)), lambda m: view(m).clamp_(0, 1)):
        check_raises(write)


def test_bert_position_ids_buffer():
    def run(m):
        class Embeddings(m.nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("position_ids", m.arange(8).expand((1, -1)))
                self.register_buffer("token_type_ids", m.zeros(self.position_ids.size(),
                                                                dtype=m.long), persistent=False)

        a, b = Embeddings(), Embeddings()
        with m.no_grad():
            a.position_ids.copy_(m.arange(8).view(1, 8) + 100)
        sd = a.state_dict()
        result = b.load_state_dict(sd)
        return (list(sd), sd["position_ids"].stride(), b.position_ids.tolist(),
                b.position_ids.stride(), str(result), a.position_ids._base.tolist())
    assert run(ember) == run(torch)


# ----- the torch version ember reports -------------------------------------------------------
_VERSIONS = ["2.13.0+ember.0.1.0", "2.13.0", "2.13", "2.0", "2.13.0+cpu", "2.14.0a0",
             "2.13.0.post1", "2.13.0rc1", "2.13.0.dev20250101", "1.13.1", "2.13.0+ember.1",
             "2.13.0+ember.0.1", "2.13.0+ember.0.1.0.1", "3!1.0", "2.13.1a1.dev2", "v2.13.0",
             "parrot", "2.13.0+Ember.0"]
_OTHERS = _VERSIONS + [(2, 13), (2, 13, 0), (2, 14), [2, 0], (1, 9, 9)]


@pytest.mark.parametrize("version", _VERSIONS)
def test_torch_version_compares_as_torch(version):
    import operator

    from torch.torch_version import TorchVersion as TV

    from ember.compat import TorchVersion as EV

    def outcome(op, a, b):
        try:
            return op(a, b)
        except Exception as e:  # noqa: BLE001 - the exception type is the outcome
            return type(e)
    for other in _OTHERS:
        for op in (operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge):
            assert outcome(op, EV(version), other) == outcome(op, TV(version), other), \
                (version, op, other)
            assert outcome(op, other, EV(version)) == outcome(op, other, TV(version)), \
                (other, op, version)
    assert hash(EV(version)) == hash(version) and str(EV(version)) == version
    for bad in (3, 2.5, None):
        check_raises(lambda m, bad=bad: (EV if m is ember else TV)(version) < bad)


def _ember_run(tmp_path, source):
    import subprocess
    import sys
    import textwrap
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent(source))
    return subprocess.run([sys.executable, "-m", "ember", "run", str(prog)],
                          capture_output=True, text=True, timeout=120)


def test_torch_version_under_ember_run(tmp_path):
    r = _ember_run(tmp_path, """
        import importlib.metadata
        import torch
        import torch.version
        from torch.torch_version import TorchVersion
        import ember
        v = torch.__version__
        print(v, type(v).__name__, isinstance(v, TorchVersion), ember.__version__)
        print(v >= "2.0", v < (2, 14), v > "2.13", v.split("+")[0])
        print(torch.version.__version__ == v, torch.version.cuda, torch.version.hip,
              torch.version.debug, bool(torch.version.git_version))
        print(importlib.metadata.version("torch"), importlib.metadata.metadata("torch")["Name"])
        print(torch.nn.Linear is ember.nn.Linear, hasattr(ember, "version"))
        torch.patched_by_program = 1
        print(ember.patched_by_program)
    """)
    assert r.returncode == 0, r.stderr
    import ember
    expected = f"2.13.0+ember.{ember.__version__}"
    assert r.stdout.split("\n")[:6] == [
        f"{expected} TorchVersion True {ember.__version__}",
        "True True True 2.13.0",
        "True None None False True",
        f"{expected} torch",
        "True False",
        "1",
    ]


def test_plain_import_ember_leaves_torch_metadata_alone():
    import subprocess
    import sys
    import textwrap
    code = textwrap.dedent("""
        import importlib.metadata, sys
        import ember
        before = importlib.metadata.version("torch")
        import ember.compat
        ember.compat.alias_torch()
        import torch
        during = (importlib.metadata.version("torch"), str(torch.__version__))
        ember.compat.unalias_torch()
        after = importlib.metadata.version("torch")
        print(before, during, after, "torch" in sys.modules)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    import ember
    mine = f"2.13.0+ember.{ember.__version__}"
    assert r.stdout.split() == [torch.__version__, f"('{mine}',", f"'{mine}')",
                                torch.__version__, "False"]
