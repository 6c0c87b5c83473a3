"""torch.jit's eager API (fork/wait, Future, isinstance, ...), torch.autograd.graph,
autograd's multithreading switch, torch.func.functionalize /
replace_all_batch_norm_modules_ and torch.utils.checkpoint's helpers, against torch."""
import typing

import numpy as np
import pytest
import torch
import torch.utils.checkpoint

import ember
import ember.utils.checkpoint


def test_fork_wait_future():
    for m in (ember, torch):
        fut = m.jit.fork(lambda x, k=1: x + k, m.ones(2), k=2)
        assert fut.done()
        assert m.jit.wait(fut).tolist() == [3.0, 3.0]
        assert fut.value().tolist() == [3.0, 3.0]
        chained = fut.then(lambda f: f.wait() * 2)
        assert chained.wait().tolist() == [6.0, 6.0]
        seen = []
        fut.add_done_callback(lambda f, s=seen: s.append(f.wait().sum().item()))
        assert seen == [6.0]
    bad = ember.jit.fork(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        ember.jit.wait(bad)
    f = ember.jit.Future()
    assert not f.done()
    f.set_result(4)
    assert f.wait() == 4
    with pytest.raises(RuntimeError):
        f.set_result(5)


@pytest.mark.parametrize("obj,typ", [
    ([1, 2], list[int]), ([1, "a"], list[int]), ({"a": 1}, dict[str, int]),
    ({"a": "b"}, dict[str, int]), ((1, "a"), tuple[int, str]),
    ((1, 2), tuple[int, str]), (None, typing.Optional[int]),  # noqa: UP045
    (3, typing.Optional[int]), ("x", typing.Optional[int]),  # noqa: UP045
    (3, int), (3.0, int), ([[1], [2]], list[list[int]]), ((1, 2, 3), tuple[int, ...]),
    (2, typing.Union[int, str]), (2.0, int | None), ([1], typing.List[int]),  # noqa: UP006,UP007
])
def test_jit_isinstance(obj, typ):
    assert ember.jit.isinstance(obj, typ) == torch.jit.isinstance(obj, typ)


def test_jit_isinstance_needs_contained_type():
    for m in (ember, torch):
        with pytest.raises(RuntimeError, match="without a contained type"):
            m.jit.isinstance([1], list)


def test_jit_settings_attribute_interface():
    old = ember.jit.set_fusion_strategy([("STATIC", 3)])
    assert old == torch.jit.set_fusion_strategy([("STATIC", 3)]) == [("STATIC", 2),
                                                                        ("DYNAMIC", 10)]
    assert ember.jit.set_fusion_strategy(old) == [("STATIC", 3)]
    torch.jit.set_fusion_strategy(old)
    assert ember.jit.onednn_fusion_enabled() == torch.jit.onednn_fusion_enabled() is False
    ember.jit.enable_onednn_fusion(True)
    assert ember.jit.onednn_fusion_enabled()
    ember.jit.enable_onednn_fusion(False)
    a = ember.jit.Attribute(3, int)
    assert (a.value, a.type) == (3, int) and tuple(a) == tuple(torch.jit.Attribute(3, int))

    @ember.jit.interface
    class Iface:
        def f(self, x):
            pass
    assert Iface.__name__ == "Iface"
    with pytest.warns(UserWarning, match="Only works in script mode"):
        with ember.jit.strict_fusion():
            pass


def test_script_if_tracing():
    def body(x):
        if x.sum() > 0:
            return x * 2
        return x * 3
    wrapped = ember.jit.script_if_tracing(body)
    assert wrapped(ember.ones(2)).tolist() == [2.0, 2.0]

    def model(x):
        return wrapped(x) + 1
    # ember's trace cannot keep the branch: it says so instead of freezing it silently
    with pytest.warns(ember.jit.TracerWarning, match="script_if_tracing"):
        ember.jit.trace(model, (ember.ones(2),))


def test_autograd_graph_helpers():
    for m in (ember, torch):
        x = m.ones(2, requires_grad=True)
        y = (x * 3).sum()
        edge = m.autograd.graph.get_gradient_edge(y)
        assert edge.node is y.grad_fn and edge.output_nr == 0
        leaf = m.autograd.graph.get_gradient_edge(x)
        assert leaf.node.name() == "torch::autograd::AccumulateGrad"
        assert isinstance(y.grad_fn, m.autograd.graph.Node)
        with pytest.raises(RuntimeError):
            m.autograd.graph.get_gradient_edge(m.ones(1))
        z = m.ones(3)
        v = z._version
        m.autograd.graph.increment_version(z)
        assert z._version == v + 1
        with pytest.raises(RuntimeError, match="torch.compile region"):
            with m.autograd.graph.region_activation_memory_budget(0.5):
                pass
    a = ember.ones(2, requires_grad=True)
    b = a * a
    ember.autograd.graph.increment_version(a)
    ember.autograd.graph.increment_version(a)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        b.sum().backward()


def test_multithreading_switch_and_variable():
    for m in (ember, torch):
        assert m.autograd.is_multithreading_enabled()
        with m.autograd.set_multithreading_enabled(False):
            assert not m.autograd.is_multithreading_enabled()
        assert m.autograd.is_multithreading_enabled()
        with pytest.raises(RuntimeError, match="deprecated"):
            m.autograd.variable(1)


def test_functionalize_matches_eager():
    def f(x):
        y = x.clone()
        y.add_(1)
        x.mul_(2)
        return y * 3
    for m in (ember, torch):
        x = m.arange(3.0)
        out = m.func.functionalize(f)(x)
        assert out.tolist() == [3.0, 6.0, 9.0]
        assert x.tolist() == [0.0, 2.0, 4.0]  # the input mutation is applied


def test_replace_all_batch_norm_modules_():
    outs = []
    for m in (ember, torch):
        net = m.nn.Sequential(m.nn.Linear(2, 3), m.nn.BatchNorm1d(3),
                              m.nn.Sequential(m.nn.BatchNorm1d(3)))
        assert m.func.replace_all_batch_norm_modules_(net) is net
        outs.append([(b.running_mean, b.running_var, b.track_running_stats)
                     for b in (net[1], net[2][0])])
    assert outs[0] == outs[1] == [(None, None, False)] * 2


def test_checkpoint_helpers():
    E, T = ember.utils.checkpoint, torch.utils.checkpoint
    assert [p.name for p in E.CheckpointPolicy] == [p.name for p in T.CheckpointPolicy]
    assert [p.value for p in E.CheckpointPolicy] == [p.value for p in T.CheckpointPolicy]
    assert E.get_device_states(ember.ones(1), 3) == T.get_device_states(torch.ones(1), 3) \
        == ([], [])
    E.set_device_states([], [])
    assert E.DefaultDeviceType.get_device_type() == T.DefaultDeviceType.get_device_type()
    ctx = E.SelectiveCheckpointContext(is_recompute=True)
    assert ctx.is_recompute
    lin = ember.nn.Linear(3, 3)
    x = ember.randn(2, 3, requires_grad=True)
    with E.set_checkpoint_early_stop(False), E.set_checkpoint_debug_enabled(True):
        E.checkpoint(lin, x, use_reentrant=False).sum().backward()
    g = x.grad.clone()
    x.grad = None
    lin(x).sum().backward()
    np.testing.assert_allclose(g.numpy(), x.grad.numpy())
