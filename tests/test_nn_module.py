"""nn.Module behaviour against torch: registration, iteration, hooks, state_dict, repr,
containers, Parameter, init and utils."""
import copy
import pickle
from collections import OrderedDict

import numpy as np
import pytest
import torch

import ember


def both(fn):
    """``fn(m)`` for ember and torch."""
    return fn(ember), fn(torch)


def same_error(fn):
    """Both libraries raise the same exception type with the same message (Size spelled out)."""
    with pytest.raises(Exception) as t_err:
        fn(torch)
    with pytest.raises(Exception) as e_err:
        fn(ember)
    assert type(e_err.value) is type(t_err.value), (e_err.value, t_err.value)
    norm = str(t_err.value).replace("torch.Size", "ember.Size").replace("=torch.", "=ember.")
    assert str(e_err.value) == norm, f"\nember: {e_err.value}\ntorch: {norm}"


def copy_weights(e_mod, t_mod):
    e_mod.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in
                           t_mod.state_dict().items()})
    return e_mod


def _block_class(m):
    class Block(m.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = m.nn.Linear(3, 4)
            self.register_buffer("running", m.zeros(4))
            self.register_buffer("scratch", m.ones(2), persistent=False)
            self.scale = m.nn.Parameter(m.ones(1))
            self.act = m.nn.Tanh()

        def forward(self, x):
            return self.act(self.fc(x)) * self.scale + self.running

    return Block


EmberBlock = _block_class(ember)
EmberBlock.__qualname__ = "EmberBlock"  # pickled by this name, printed as Block
TorchBlock = _block_class(torch)
TorchBlock.__qualname__ = "TorchBlock"


def block(m):
    return EmberBlock() if m is ember else TorchBlock()


def model(m):
    shared = m.nn.Linear(4, 4)
    return m.nn.Sequential(OrderedDict([
        ("block", block(m)), ("drop", m.nn.Dropout(0.1)), ("shared1", shared),
        ("shared2", shared),
        ("heads", m.nn.ModuleDict({"a": m.nn.Linear(4, 2), "b": m.nn.Sequential(
            m.nn.ReLU(), m.nn.Linear(4, 2, bias=False))})),
        ("stack", m.nn.ModuleList([m.nn.Identity(), m.nn.GELU(approximate="tanh")])),
        ("embed", m.nn.Embedding(10, 3, padding_idx=0)),
    ]))


# ----- registration and iteration --------------------------------------------------------
def test_named_members_match_torch():
    e, t = both(model)
    for fn in (lambda mm: [n for n, _ in mm.named_parameters()],
               lambda mm: [n for n, _ in mm.named_parameters(remove_duplicate=False)],
               lambda mm: [n for n, _ in mm.named_parameters(prefix="net", recurse=True)],
               lambda mm: [n for n, _ in mm.block.named_parameters(recurse=False)],
               lambda mm: [n for n, _ in mm.named_buffers()],
               lambda mm: [n for n, _ in mm.named_children()],
               lambda mm: [n for n, _ in mm.named_modules()],
               lambda mm: [n for n, _ in mm.named_modules(remove_duplicate=False)],
               lambda mm: [n for n, _ in mm.named_modules(prefix="root")],
               lambda mm: len(list(mm.modules())), lambda mm: len(list(mm.children())),
               lambda mm: [tuple(p.shape) for p in mm.parameters()],
               lambda mm: list(mm.state_dict().keys()),
               lambda mm: list(mm.state_dict(prefix="p.").keys())):
        assert fn(e) == fn(t)
    assert {"fc", "running", "scratch", "scale", "act", "forward", "state_dict"} <= set(
        dir(e.block))
    assert not any(k[0].isdigit() for k in dir(e))


def test_shared_parameters_are_deduplicated():
    e = model(ember)
    params = list(e.parameters())
    assert len(params) == len({id(p) for p in params})
    assert e.shared1.weight is e.shared2.weight
    assert e.get_parameter("shared2.weight") is e.shared1.weight
    assert e.get_submodule("heads.b.1") is e.heads["b"][1]
    assert e.get_buffer("block.running") is e.block.running


def test_registration_routing_and_order():
    for m in (ember, torch):
        mod = m.nn.Module()
        mod.b = m.nn.Parameter(m.zeros(1))
        mod.register_buffer("a", m.zeros(2))
        mod.c = m.nn.Linear(1, 1)
        mod.plain = 3
        assert list(mod._parameters) == ["b"] and list(mod._buffers) == ["a"]
        assert list(mod._modules) == ["c"] and mod.__dict__["plain"] == 3
        mod.a = m.ones(2)  # assigning a tensor to a buffer name updates the buffer
        assert mod._buffers["a"].sum().item() == 2
        mod.b = None
        assert mod._parameters["b"] is None and "b" not in dict(mod.named_parameters())
        with pytest.raises(TypeError, match="cannot assign .* as parameter 'b'"):
            mod.b = m.nn.Linear(1, 1)
        mod.d = m.nn.Linear(1, 1)
        mod.d = m.nn.Parameter(m.zeros(1))  # a name moves from modules to parameters
        assert "d" not in mod._modules and "d" in mod._parameters
        del mod.c
        assert "c" not in mod._modules
        mod.buf = m.nn.Buffer(m.ones(3), persistent=False)
        assert "buf" in mod._buffers and "buf" not in mod.state_dict()
        assert type(mod.buf) is m.Tensor
        mod.requires_grad_(False)
        assert not any(p.requires_grad for p in mod.parameters())


REGISTRATION_ERRORS = [
    lambda m: m.nn.Linear(2, 2).foo,
    lambda m: m.nn.Module().register_buffer("a.b", m.zeros(1)),
    lambda m: m.nn.Module().register_buffer("", m.zeros(1)),
    lambda m: m.nn.Module().register_buffer("x", 3),
    lambda m: m.nn.Module().register_parameter("x", m.zeros(1)),
    lambda m: m.nn.Module().register_parameter("x", m.nn.Parameter(m.zeros(1)) * 2),
    lambda m: m.nn.Module().add_module("a.b", m.nn.ReLU()),
    lambda m: m.nn.Module().add_module("x", 3),
    lambda m: m.nn.Module().add_module("training", m.nn.ReLU()),
    lambda m: setattr(m.nn.Linear(1, 1), "weight", m.zeros(1)),
    lambda m: setattr(m.nn.Sequential(m.nn.ReLU()), "0", 5),
    lambda m: m.nn.Linear(2, 2).get_submodule("fc"),
    lambda m: m.nn.Sequential(m.nn.Linear(2, 2)).get_submodule("0.weight"),
    lambda m: m.nn.Sequential(m.nn.Linear(2, 2)).get_parameter("0.nope"),
    lambda m: m.nn.Sequential(m.nn.Linear(2, 2)).get_buffer("0.weight"),
    lambda m: m.nn.Module()(1),
    lambda m: m.nn.Linear(2, 2).train("yes"),
    lambda m: m.nn.Linear(2, 2).to(m.int64),
    lambda m: m.nn.Sequential(m.nn.ReLU())[3],
    lambda m: m.nn.ModuleList([m.nn.ReLU()])[-2],
    lambda m: m.nn.Module().load_state_dict([1]),
    lambda m: m.nn.ParameterList()(),
]


@pytest.mark.parametrize("fn", REGISTRATION_ERRORS, ids=range(len(REGISTRATION_ERRORS)))
def test_registration_errors_match_torch(fn):
    same_error(fn)


def test_assign_before_init():
    for m in (ember, torch):
        class Bad(m.nn.Module):
            def __init__(self):
                self.w = m.nn.Parameter(m.zeros(1))  # noqa: B023
        with pytest.raises(AttributeError, match="before Module.__init__"):
            Bad()


# ----- modes, conversion, copies -----------------------------------------------------------
def test_train_eval_zero_grad_apply():
    e = model(ember)
    e.eval()
    assert not any(mm.training for mm in e.modules())
    e.train()
    assert all(mm.training for mm in e.modules())
    x = ember.randn(2, 3)
    e[:1](x).sum().backward()
    assert e.block.fc.weight.grad is not None
    g = e.block.fc.weight.grad
    e.zero_grad(set_to_none=False)
    assert e.block.fc.weight.grad is g and not g.numpy().any()
    e.zero_grad()
    assert e.block.fc.weight.grad is None
    seen = []
    e.apply(lambda mm: seen.append(type(mm).__name__))
    t_seen = []
    model(torch).apply(lambda mm: t_seen.append(type(mm).__name__))
    assert seen == t_seen


def test_to_and_casts_keep_parameter_identity():
    e = model(ember)
    w = e.block.fc.weight
    e.block.fc(ember.randn(2, 3)).sum().backward()
    assert e.double() is e
    assert w is e.block.fc.weight and w.dtype == ember.float64
    assert w.grad.dtype == ember.float64 and e.block.running.dtype == ember.float64
    e.to(ember.float32)
    assert w.dtype == ember.float32
    e.half()
    assert w.dtype == ember.float16
    e.float().to("cpu").cpu()
    assert w.dtype == ember.float32
    e.to(ember.zeros(1, dtype=ember.float64))
    assert w.dtype == ember.float64
    m = ember.nn.Module()
    m.register_buffer("idx", ember.arange(3))
    m.double()
    assert m.idx.dtype == ember.int64


def test_deepcopy_and_pickle_round_trip():
    e = model(ember)
    x = ember.randn(2, 3)
    for clone in (copy.deepcopy(e), pickle.loads(pickle.dumps(e))):
        assert repr(clone) == repr(e)
        assert isinstance(clone.block.fc.weight, ember.nn.Parameter)
        assert clone.shared1.weight is clone.shared2.weight
        np.testing.assert_array_equal(clone[:1](x).detach().numpy(), e[:1](x).detach().numpy())
        assert clone.block.fc.weight is not e.block.fc.weight


def test_repr_matches_torch():
    e, t = both(model)
    assert repr(e) == repr(t)
    e, t = both(lambda m: m.nn.ModuleList([m.nn.Linear(2, 2)] * 3 + [m.nn.ReLU()] * 2 +
                                          [m.nn.Linear(2, 2)]))
    assert repr(e) == repr(t)
    e, t = both(lambda m: m.nn.Sequential())
    assert repr(e) == repr(t)


# ----- state dict ------------------------------------------------------------------------
def test_state_dict_round_trip_with_torch():
    t = model(torch).double()
    e = copy_weights(model(ember).double(), t)
    x = np.random.default_rng(0).standard_normal((2, 3))
    e.eval(), t.eval()
    np.testing.assert_allclose(e[:4](ember.tensor(x)).detach().numpy(),
                               t[:4](torch.tensor(x)).detach().numpy())
    # and back: ember's state dict loads into torch
    t2 = model(torch).double()
    t2.load_state_dict({k: torch.tensor(v.numpy()) for k, v in e.state_dict().items()})
    for (k1, v1), (k2, v2) in zip(t.state_dict().items(), t2.state_dict().items()):
        assert k1 == k2
        np.testing.assert_array_equal(v1.numpy(), v2.numpy())
    sd = e.state_dict()
    assert not sd["block.fc.weight"].requires_grad
    assert e.state_dict(keep_vars=True)["block.fc.weight"] is e.block.fc.weight
    assert sd._metadata[""] == {"version": 1}


def _sd(m, mod):
    return {k: v.clone() for k, v in mod.state_dict().items()}


LOAD_ERRORS = [
    lambda m: m.nn.Linear(2, 3).load_state_dict({"weight": m.zeros(3, 2)}),
    lambda m: m.nn.Linear(2, 3).load_state_dict({"weight": m.zeros(3, 2), "bias": m.zeros(3),
                                                 "extra": m.zeros(1), "sub.x": m.zeros(1)}),
    lambda m: m.nn.Linear(2, 3).load_state_dict({"weight": m.zeros(2, 2), "bias": m.zeros(4)}),
    lambda m: m.nn.Sequential(m.nn.Linear(2, 3)).load_state_dict(
        {"weight": m.zeros(3, 2), "0.bias": m.zeros(3)}),
    lambda m: m.nn.Linear(2, 3).load_state_dict({"weight": 3, "bias": m.zeros(3)}),
]


@pytest.mark.parametrize("fn", LOAD_ERRORS, ids=range(len(LOAD_ERRORS)))
def test_load_state_dict_errors_match_torch(fn):
    same_error(fn)


def test_load_state_dict_non_strict_assign_and_prefix_hint():
    e = ember.nn.Linear(2, 3)
    res = e.load_state_dict({"weight": ember.ones(3, 2), "junk": ember.ones(1)}, strict=False)
    t_res = torch.nn.Linear(2, 3).load_state_dict({"weight": torch.ones(3, 2),
                                                   "junk": torch.ones(1)}, strict=False)
    assert res == t_res and repr(res) == repr(t_res)
    assert res.missing_keys == ["bias"] and res.unexpected_keys == ["junk"]
    assert repr(e.load_state_dict(e.state_dict())) == "<All keys matched successfully>"
    w = ember.full((3, 2), 2.0)
    e.load_state_dict({"weight": w, "bias": ember.zeros(3)}, assign=True)
    assert e.weight.data_ptr() == w.data_ptr() and isinstance(e.weight, ember.nn.Parameter)
    assert e.weight.requires_grad
    w2 = ember.full((3, 2), 5.0)
    old = e.weight
    e.load_state_dict({"weight": w2, "bias": ember.zeros(3)})
    assert e.weight is old and e.weight.data_ptr() != w2.data_ptr()
    assert e.weight.sum().item() == 30
    wrapped = {"module." + k: v for k, v in e.state_dict().items()}
    with pytest.raises(RuntimeError, match="'module.'") as err:
        ember.nn.Linear(2, 3).load_state_dict(wrapped)
    assert 'Missing key(s) in state_dict: "weight", "bias"' in str(err.value)
    assert "size mismatch" not in str(err.value)
    with pytest.raises(RuntimeError, match=r"size mismatch for weight: copying a param with "
                                           r"shape ember.Size\(\[2, 2\]\) from checkpoint, "
                                           r"the shape in current model is "
                                           r"ember.Size\(\[3, 2\]\)"):
        e.load_state_dict({"weight": ember.zeros(2, 2), "bias": ember.zeros(3)})


def test_state_dict_hooks_and_extra_state():
    calls = []
    for m in (ember, torch):
        class WithExtra(m.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = m.nn.Linear(1, 1)  # noqa: B023
                self.note = "x"

            def get_extra_state(self):
                return {"note": self.note}

            def set_extra_state(self, state):
                self.note = state["note"]

        a = WithExtra()
        a.register_state_dict_pre_hook(lambda mod, prefix, keep: calls.append(("pre", prefix)))
        a.register_state_dict_post_hook(lambda mod, sd, prefix, meta: calls.append(("post",)))
        a.register_load_state_dict_pre_hook(lambda mod, sd, prefix, *rest: calls.append("lpre"))
        a.register_load_state_dict_post_hook(lambda mod, keys: calls.append(("lpost", tuple(
            keys.missing_keys))))
        sd = a.state_dict()
        assert list(sd) == ["_extra_state", "lin.weight", "lin.bias"]
        b = WithExtra()
        b.note = "y"
        b.load_state_dict(sd)
        assert b.note == "x"
        a.load_state_dict(sd)
    half = len(calls) // 2
    assert calls[:half] == calls[half:]


# ----- hooks -----------------------------------------------------------------------------
def _hook_trace(m):
    """Record every hook event of a two-level model, with gradients, through a backward."""
    events = []
    inner = m.nn.Linear(3, 2).double()
    outer = m.nn.Sequential(inner, m.nn.Tanh())
    inner.weight.data = m.tensor([[0.1, -0.2, 0.3], [0.4, 0.5, -0.6]], dtype=m.float64)
    inner.bias.data = m.full((2,), 0.1, dtype=m.float64)

    def rec(name):
        def fwd_pre(mod, args):
            events.append((name, "fwd_pre", tuple(args[0].shape)))
            return (args[0] * 2,)

        def fwd(mod, args, out):
            events.append((name, "fwd", tuple(out.shape)))
            return out + 1

        def bwd_pre(mod, gout):
            events.append((name, "bwd_pre", [g.numpy().round(6).tolist() for g in gout]))
            return (gout[0] * 3,)

        def bwd(mod, gin, gout):
            events.append((name, "bwd", [None if g is None else g.numpy().round(6).tolist()
                                         for g in gin],
                           [g.numpy().round(6).tolist() for g in gout]))
            return tuple(None if g is None else g * 0.5 for g in gin)
        return fwd_pre, fwd, bwd_pre, bwd

    handles = []
    for name, mod in (("inner", inner), ("outer", outer)):
        fp, f, bp, b = rec(name)
        handles += [mod.register_forward_pre_hook(fp), mod.register_forward_hook(f),
                    mod.register_full_backward_pre_hook(bp), mod.register_full_backward_hook(b)]
    handles.append(inner.register_forward_hook(
        lambda mod, args, kwargs, out: events.append(("inner", "fwd_kw", sorted(kwargs))),
        with_kwargs=True, prepend=True))
    x = m.tensor([[1.0, 2.0, 3.0], [0.5, -1.0, 0.0]], dtype=m.float64, requires_grad=True)
    y = outer(x)
    y.sum().backward()
    events.append(("x.grad", x.grad.numpy().round(6).tolist()))
    for h in handles:
        h.remove()
    z = outer(x)
    events.append(("after_remove", z.detach().numpy().round(6).tolist()))
    return events


def test_hooks_fire_in_torch_order_with_replacements():
    e, t = both(_hook_trace)
    assert len(e) == len(t)
    for a, b in zip(e, t):
        assert a == b


def test_forward_pre_hook_with_kwargs_and_always_call():
    for m in (ember, torch):
        lin = m.nn.Linear(2, 2)

        def pre(mod, args, kwargs):
            return (args[0] * 0,), kwargs
        h = lin.register_forward_pre_hook(pre, with_kwargs=True)
        assert not lin(m.ones(1, 2)).sub(lin.bias).abs().sum().item()
        h.remove()
        seen = []
        lin.register_forward_hook(lambda mod, args, out: seen.append(out),  # noqa: B023
                                  always_call=True)
        with pytest.raises(RuntimeError):
            lin(m.ones(1, 3))
        assert seen == [None]


def test_full_backward_hook_when_inputs_do_not_require_grad():
    res = []
    for m in (ember, torch):
        lin = m.nn.Linear(2, 2)
        got = []
        lin.register_full_backward_hook(
            lambda mod, gi, go: got.append((gi, go[0].shape)))  # noqa: B023
        with pytest.warns(UserWarning, match="Full backward hook is firing"):
            lin(m.ones(3, 2)).sum().backward()
        res.append((got[0][0], tuple(got[0][1])))
    assert res[0] == res[1] == ((None,), (3, 2))


def test_module_global_hooks():
    seen = []
    h1 = ember.nn.modules.module.register_module_forward_hook(
        lambda mod, args, out: seen.append(type(mod).__name__))
    h2 = ember.nn.register_module_forward_pre_hook(lambda mod, args: None)
    try:
        ember.nn.Sequential(ember.nn.ReLU(), ember.nn.Tanh())(ember.ones(2))
    finally:
        h1.remove()
        h2.remove()
    assert seen == ["ReLU", "Tanh", "Sequential"]


# ----- containers ------------------------------------------------------------------------
def _seq_ops(m):
    s = m.nn.Sequential(m.nn.Linear(1, 2), m.nn.ReLU(), m.nn.Linear(2, 3))
    out = [len(s), type(s[-1]).__name__, type(s[1:]).__name__, list(s[1:]._modules)]
    s.append(m.nn.Tanh())
    s.insert(1, m.nn.Sigmoid())
    s.extend([m.nn.Identity()])
    out.append(s.pop(0).out_features)
    del s[1]
    s[0] = m.nn.GELU()
    out += [repr(s), list(s._modules), len(s + s), len(s * 2)]
    s += m.nn.Sequential(m.nn.ReLU())
    out.append(repr(s))
    od = m.nn.Sequential(OrderedDict([("a", m.nn.ReLU()), ("b", m.nn.Tanh())]))
    out += [repr(od), repr(od[1:]), [type(x).__name__ for x in od]]
    ml = m.nn.ModuleList([m.nn.ReLU(), m.nn.Tanh()])
    ml.append(m.nn.Sigmoid())
    ml.insert(0, m.nn.Identity())
    ml.extend([m.nn.GELU()])
    ml += [m.nn.ReLU()]
    del ml[1]
    out += [repr(ml), repr(ml[1:3]), len(ml), type(ml.pop(-1)).__name__, repr(ml + ml)]
    md = m.nn.ModuleDict({"x": m.nn.ReLU(), "a": m.nn.Tanh()})
    md["z"] = m.nn.Sigmoid()
    md.update([("q", m.nn.Identity())])
    out += [list(md.keys()), "x" in md, type(md.pop("x")).__name__, len(md), repr(md)]
    return out


def test_container_operations_match_torch():
    e, t = both(_seq_ops)
    assert e == t


def _param_containers(m):
    pl = m.nn.ParameterList([m.nn.Parameter(m.zeros(2)), m.ones(3)])
    pl.append(m.zeros(1, 2, dtype=m.float64))
    pl.extend([m.zeros(4)])
    out = [len(pl), [type(p).__name__ for p in pl], [n for n, _ in pl.named_parameters()],
           len(pl[1:]), repr(pl)]
    pd = m.nn.ParameterDict({"b": m.zeros(2), "a": m.nn.Parameter(m.ones(1))})
    pd["c"] = m.zeros(3)
    pd.update(OrderedDict([("z", m.zeros(1))]))
    out += [list(pd.keys()), [n for n, _ in pd.named_parameters()], "a" in pd,
            tuple(pd.pop("b").shape), len(pd), repr(pd), list(pd.copy().keys())]
    return out


def test_parameter_containers_match_torch():
    e, t = both(_param_containers)
    assert [str(x).replace("torch.", "ember.") for x in t] == [str(x).replace(
        "torch.", "ember.") for x in e]


# ----- Parameter -------------------------------------------------------------------------
def test_parameter():
    d = ember.tensor([1.0, 2.0])
    p = ember.nn.Parameter(d)
    assert isinstance(p, ember.Tensor) and p.requires_grad and p.is_leaf
    assert p.data_ptr() == d.data_ptr()
    assert repr(p) == repr(torch.nn.Parameter(torch.tensor([1.0, 2.0]))).replace(
        "torch", "ember")
    assert not ember.nn.Parameter(d, requires_grad=False).requires_grad
    assert ember.nn.Parameter().shape == (0,)
    q = copy.deepcopy(p)
    assert isinstance(q, ember.nn.Parameter) and q.data_ptr() != p.data_ptr()
    r = pickle.loads(pickle.dumps(p))
    assert isinstance(r, ember.nn.Parameter) and r.tolist() == [1.0, 2.0] and r.requires_grad
    with pytest.raises(TypeError):
        ember.nn.Parameter([1.0])


# ----- init ------------------------------------------------------------------------------
INITS = [
    ("uniform_", lambda m, t: m.nn.init.uniform_(t, -0.3, 0.7)),
    ("normal_", lambda m, t: m.nn.init.normal_(t, 0.5, 2.0)),
    ("constant_", lambda m, t: m.nn.init.constant_(t, 0.25)),
    ("ones_", lambda m, t: m.nn.init.ones_(t)),
    ("zeros_", lambda m, t: m.nn.init.zeros_(t)),
    ("eye_", lambda m, t: m.nn.init.eye_(t)),
    ("xavier_uniform_", lambda m, t: m.nn.init.xavier_uniform_(t, gain=1.5)),
    ("xavier_normal_", lambda m, t: m.nn.init.xavier_normal_(t)),
    ("kaiming_uniform_", lambda m, t: m.nn.init.kaiming_uniform_(t)),
    ("kaiming_uniform_fan_out_relu", lambda m, t: m.nn.init.kaiming_uniform_(
        t, mode="fan_out", nonlinearity="relu")),
    ("kaiming_normal_", lambda m, t: m.nn.init.kaiming_normal_(t, a=0.2)),
    ("trunc_normal_", lambda m, t: m.nn.init.trunc_normal_(t, 0.1, 0.5, -0.4, 0.6)),
    ("trunc_normal_narrow", lambda m, t: m.nn.init.trunc_normal_(t, 0.0, 1.0, 0.5, 0.8)),
    ("orthogonal_", lambda m, t: m.nn.init.orthogonal_(t, gain=2.0)),
    ("orthogonal_wide", lambda m, t: m.nn.init.orthogonal_(t.t())),
    ("sparse_", lambda m, t: m.nn.init.sparse_(t, 0.5)),
    ("generator", lambda m, t: m.nn.init.normal_(t, generator=m.Generator().manual_seed(5))),
]


@pytest.mark.parametrize("name,fn", INITS, ids=[i[0] for i in INITS])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_init_matches_torch(name, fn, dtype):
    out = []
    for m in (ember, torch):
        m.manual_seed(7)
        p = m.nn.Parameter(m.empty(6, 4, dtype=getattr(m, dtype)))
        with m.no_grad():
            r = fn(m, p)
        assert p.requires_grad and p.is_leaf and p.grad_fn is None
        out.append(r.detach().numpy().copy())
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(out[0], out[1], rtol=tol, atol=tol)


def test_init_helpers_and_errors():
    for nl, param in [("linear", None), ("conv2d", None), ("sigmoid", None), ("tanh", None),
                      ("relu", None), ("leaky_relu", None), ("leaky_relu", 0.3), ("selu", None)]:
        assert ember.nn.init.calculate_gain(nl, param) == torch.nn.init.calculate_gain(nl, param)
    w = ember.empty(5, 3, 2, 2)
    assert ember.nn.init._calculate_fan_in_and_fan_out(w) == (12, 20)
    d = ember.nn.init.dirac_(ember.empty(4, 2, 3, 3), groups=2)
    np.testing.assert_array_equal(d.numpy(), torch.nn.init.dirac_(torch.empty(4, 2, 3, 3),
                                                                  groups=2).numpy())
    for fn in (lambda m: m.nn.init.calculate_gain("softmax"),
               lambda m: m.nn.init.calculate_gain("leaky_relu", "x"),
               lambda m: m.nn.init.xavier_uniform_(m.empty(3)),
               lambda m: m.nn.init.kaiming_uniform_(m.empty(3, 3), mode="fan"),
               lambda m: m.nn.init.eye_(m.empty(3, 3, 3)),
               lambda m: m.nn.init.orthogonal_(m.empty(3))):
        same_error(fn)
    with pytest.warns(UserWarning, match="zero-element"):
        ember.nn.init.kaiming_uniform_(ember.empty(0, 3))
    with pytest.warns(FutureWarning):
        ember.nn.init.uniform(ember.empty(2))


# ----- utils -----------------------------------------------------------------------------
def _with_grads(m, scale=1.0):
    rng = np.random.default_rng(0)
    ps = [m.nn.Parameter(m.tensor(rng.standard_normal(s))) for s in [(3, 4), (5,), (2, 2)]]
    for p in ps:
        p.grad = m.tensor(rng.standard_normal(tuple(p.shape)) * scale)
    return ps


@pytest.mark.parametrize("norm_type", [2.0, 1, 3.5, float("inf")])
@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clip_grad_norm_matches_torch(norm_type, max_norm):
    res = []
    for m in (ember, torch):
        ps = _with_grads(m)
        total = m.nn.utils.clip_grad_norm_(ps, max_norm, norm_type=norm_type, foreach=None)
        res.append([total.item()] + [p.grad.numpy() for p in ps])
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_clip_grad_value_and_errors():
    res = []
    for m in (ember, torch):
        ps = _with_grads(m)
        m.nn.utils.clip_grad_value_(ps, 0.3)
        res.append([p.grad.numpy() for p in ps])
    for a, b in zip(*res):
        np.testing.assert_array_equal(a, b)
    ps = _with_grads(ember, scale=np.inf)
    with pytest.raises(RuntimeError, match="non-finite"):
        ember.nn.utils.clip_grad_norm_(ps, 1.0, error_if_nonfinite=True)
    assert ember.nn.utils.clip_grad_norm_([], 1.0).item() == 0.0
    single = ember.nn.Parameter(ember.ones(3))
    single.grad = ember.full((3,), 2.0)
    ember.nn.utils.clip_grad_norm_(single, 1.0)
    np.testing.assert_allclose(single.grad.numpy(), np.full(3, 1 / np.sqrt(3)), rtol=1e-5)


def test_parameters_vector_round_trip():
    for m in (ember, torch):
        net = m.nn.Sequential(m.nn.Linear(3, 2), m.nn.Linear(2, 1, bias=False))
        vec = m.nn.utils.parameters_to_vector(net.parameters())
        assert tuple(vec.shape) == (10,) and vec.requires_grad
        m.nn.utils.vector_to_parameters(m.arange(10.0), net.parameters())
        assert net[0].weight.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
        assert net[1].weight.tolist() == [[8.0, 9.0]]
    same_error(lambda m: m.nn.utils.vector_to_parameters([1.0], []))
