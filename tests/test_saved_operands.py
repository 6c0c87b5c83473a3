"""Which operands the product nodes keep for backward, against torch 2.13: ``linear``
(``AddmmBackward0``/``MmBackward0``), ``mm``, ``mv``, ``dot``, ``bmm``, ``matmul`` of every
rank, and the ``add*`` family keep an operand only where the other one needs a gradient.
Each case changes one operand in place after the forward, for every combination of
``requires_grad``, and backward must raise in both libraries or in neither, with the same
gradients where it runs; saved-tensor hooks must pack the same tensors."""
import itertools

import numpy as np
import pytest
import torch

import ember

RNG = np.random.default_rng(7)


def _arr(*shape):
    return RNG.standard_normal(shape)


# name -> (function of (m, *operands), operand shapes)
CASES = {
    "mm": (lambda m, a, b: m.mm(a, b), [(3, 4), (4, 5)]),
    "mv": (lambda m, a, b: m.mv(a, b), [(3, 4), (4,)]),
    "dot": (lambda m, a, b: m.dot(a, b), [(4,), (4,)]),
    "bmm": (lambda m, a, b: m.bmm(a, b), [(2, 3, 4), (2, 4, 5)]),
    "matmul_2_2": (lambda m, a, b: a @ b, [(3, 4), (4, 5)]),
    "matmul_1_2": (lambda m, a, b: a @ b, [(4,), (4, 5)]),
    "matmul_2_1": (lambda m, a, b: a @ b, [(3, 4), (4,)]),
    "matmul_1_1": (lambda m, a, b: a @ b, [(4,), (4,)]),
    "matmul_3_2": (lambda m, a, b: a @ b, [(2, 3, 4), (4, 5)]),
    "matmul_2_3": (lambda m, a, b: a @ b, [(3, 4), (2, 4, 5)]),
    "matmul_3_3": (lambda m, a, b: a @ b, [(2, 3, 4), (2, 4, 5)]),
    "matmul_4_3": (lambda m, a, b: a @ b, [(2, 1, 3, 4), (3, 4, 5)]),
    "matmul_1_3": (lambda m, a, b: a @ b, [(4,), (2, 4, 5)]),
    "matmul_3_1": (lambda m, a, b: a @ b, [(2, 3, 4), (4,)]),
    "linear": (lambda m, x, w, b: m.nn.functional.linear(x, w, b), [(3, 4), (5, 4), (5,)]),
    "linear_nobias": (lambda m, x, w: m.nn.functional.linear(x, w), [(3, 4), (5, 4)]),
    "linear_3d": (lambda m, x, w, b: m.nn.functional.linear(x, w, b),
                  [(2, 3, 4), (5, 4), (5,)]),
    "linear_3d_strided": (lambda m, x, w, b: m.nn.functional.linear(x.transpose(0, 1), w, b),
                          [(3, 2, 4), (5, 4), (5,)]),
    "addmm": (lambda m, c, a, b: m.addmm(c, a, b), [(3, 5), (3, 4), (4, 5)]),
    "addmm_scaled": (lambda m, c, a, b: m.addmm(c, a, b, beta=0.5, alpha=2.0),
                     [(5,), (3, 4), (4, 5)]),
    "addmv": (lambda m, c, a, b: m.addmv(c, a, b), [(3,), (3, 4), (4,)]),
    "addr": (lambda m, c, a, b: m.addr(c, a, b), [(3, 4), (3,), (4,)]),
    "baddbmm": (lambda m, c, a, b: m.baddbmm(c, a, b), [(2, 3, 5), (2, 3, 4), (2, 4, 5)]),
    "addbmm": (lambda m, c, a, b: m.addbmm(c, a, b), [(3, 5), (2, 3, 4), (2, 4, 5)]),
}


def _run(m, name, arrays, needs, changed, through_node):
    """Forward, one operand changed in place, backward: ('raised', None) or
    ('ok', gradients of the operands that require grad)."""
    fn, _ = CASES[name]
    leaves = [m.tensor(a, requires_grad=r) for a, r in zip(arrays, needs)]
    # an operand that requires grad either is the leaf or comes out of a node
    ops = [t * 1 if through_node and t.requires_grad else t for t in leaves]
    out = fn(m, *ops)
    target = ops[changed]
    if target.requires_grad and target.grad_fn is None:
        with m.no_grad():
            target.add_(1.0)
    else:
        target.add_(1.0)
    try:
        (out * m.tensor(np.linspace(0.5, 1.5, out.numel()).reshape(out.shape))).sum() \
            .backward()
    except RuntimeError as e:
        assert "modified by an inplace operation" in str(e)
        return "raised", None
    return "ok", [t.grad.numpy() for t in leaves if t.requires_grad]


def _combos(n):
    return [c for c in itertools.product((False, True), repeat=n) if any(c)]


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("through_node", [False, True])
def test_in_place_change_before_backward_as_torch(name, through_node):
    shapes = CASES[name][1]
    arrays = [_arr(*s) for s in shapes]
    for needs in _combos(len(shapes)):
        for changed in range(len(shapes)):
            want = _run(torch, name, arrays, needs, changed, through_node)
            got = _run(ember, name, arrays, needs, changed, through_node)
            where = f"{name} requires_grad={needs} operand {changed} changed"
            assert got[0] == want[0], where
            if want[0] == "ok":
                for g, w in zip(got[1], want[1]):
                    np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12, err_msg=where)


def test_unchanged_operands_give_torchs_gradients():
    # nothing changed: every combination's gradients as torch's (the unsaved operand's
    # rank inferred from the output's for matmul's vectors)
    for name, (fn, shapes) in CASES.items():
        arrays = [_arr(*s) for s in shapes]
        for needs in _combos(len(shapes)):
            res = []
            for m in (torch, ember):
                leaves = [m.tensor(a, requires_grad=r) for a, r in zip(arrays, needs)]
                out = fn(m, *leaves)
                out.sum().backward()
                res.append([t.grad.numpy() for t in leaves if t.requires_grad])
            for w, g in zip(*res):
                np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12,
                                           err_msg=f"{name} {needs}")


def _packed(m, name, arrays, needs):
    fn, _ = CASES[name]
    log = []

    def pack(t):
        log.append(tuple(t.shape))
        return t

    leaves = [m.tensor(a, requires_grad=r) for a, r in zip(arrays, needs)]
    with m.autograd.graph.saved_tensors_hooks(pack, lambda p: p):
        out = fn(m, *leaves)
    out.sum().backward()
    return sorted(log), [t.grad.numpy() for t in leaves if t.requires_grad]


@pytest.mark.parametrize("name", ["mm", "mv", "dot", "bmm", "matmul_3_2", "matmul_1_3",
                                  "linear", "linear_nobias", "addmm", "addr", "baddbmm"])
def test_saved_tensor_hooks_pack_what_torch_packs(name):
    shapes = CASES[name][1]
    arrays = [_arr(*s) for s in shapes]
    for needs in _combos(len(shapes)):
        want = _packed(torch, name, arrays, needs)
        got = _packed(ember, name, arrays, needs)
        assert got[0] == want[0], f"{name} {needs}"
        for g, w in zip(got[1], want[1]):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def test_frozen_input_layer_weight_changed_before_backward():
    # an MLP's first layer: the input needs no gradient, so the weight is not kept, and
    # an optimizer step between forward and backward raises in neither library
    res = []
    for m in (torch, ember):
        m.manual_seed(0)
        lin = m.nn.Linear(6, 4).double()
        with m.no_grad():
            lin.weight.copy_(m.tensor(np.linspace(-1, 1, 24).reshape(4, 6)))
        x = m.tensor(np.linspace(0, 1, 18).reshape(3, 6))
        out = lin(x).relu().sum()
        with m.no_grad():
            lin.weight.mul_(2.0)
        out.backward()
        res.append((lin.weight.grad.numpy(), lin.bias.grad.numpy()))
    for g, w in zip(res[1], res[0]):
        np.testing.assert_allclose(g, w, rtol=1e-12)
    # the input requiring grad: the weight is kept and its change raises in both
    for m in (torch, ember):
        lin = m.nn.Linear(6, 4).double()
        x = m.tensor(np.linspace(0, 1, 18).reshape(3, 6), requires_grad=True)
        out = lin(x).sum()
        with m.no_grad():
            lin.weight.mul_(2.0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            out.backward()


def test_float32_mlp_first_layer_grads_unchanged():
    # the fast linear node's backward with the weight left unsaved: float32 gradients
    # bit-equal to the same graph with the input requiring grad (which keeps both)
    rng = np.random.default_rng(1)
    xs = rng.standard_normal((64, 48), dtype=np.float32)
    res = []
    for rg in (False, True):
        ember.manual_seed(0)
        model = ember.nn.Sequential(ember.nn.Linear(48, 32), ember.nn.ReLU(),
                                    ember.nn.Linear(32, 10))
        x = ember.tensor(xs, requires_grad=rg)
        model(x).square().sum().backward()
        res.append([p.grad.numpy().copy() for p in model.parameters()])
    for a, b in zip(*res):
        assert np.array_equal(a, b)
