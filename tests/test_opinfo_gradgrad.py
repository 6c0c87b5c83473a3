"""Second-order gradients of PyTorch's OpInfo table, values and graphs against torch.

test_opinfo.py's selection, conversion and sample loop run every op that ember has and
that OpInfo marks ``supports_gradgrad``, in float64, on its first ``SAMPLES`` samples.
For each, with a fixed ``grad_output`` ``v`` (a leaf requiring grad) and fixed random
weights ``w_i``, both libraries compute::

    g = autograd.grad(out, inputs, v, create_graph=True)
    autograd.grad(sum_i (g_i * w_i).sum(), inputs + (v,), allow_unused=True)

and three things are compared: the second-order values; which of them are ``None``
(torch answers ``None`` only where no path connects, so ``None`` against zeros is a
difference here, unlike the first-order test); and the graph recorded for each ``g_i``,
the set of ``grad_fn`` names reachable from it through ``next_functions``.

``KNOWN`` (opinfo_gradgrad_known.py) is exact: an op with a sample that still differs,
and why, asserted to still differ in that class (values, or the graph only), so a fix
must remove or reclassify its entry. Run this file as a script for the counts
(docs/differences.md quotes them).
"""
import functools
import os
import warnings

import numpy as np
import pytest
import torch
from opinfo_gradgrad_known import KNOWN
from test_opinfo import PRESENT, _compare, _grad_pairs, _key, _samples, check_op

import ember

SAMPLES = int(os.environ.get("GRADGRAD_SAMPLES", 3))
GRADGRAD = [op for op in PRESENT if op.supports_gradgrad and op.supports_autograd
            and torch.float64 in op.supported_dtypes("cpu")]

# ops whose second order torch 2.13 refuses on these samples (ember's is then not compared)
TORCH_REFUSES = {
    "nn.functional.ctc_loss": "derivative for aten::_ctc_loss_backward is not implemented",
    "nn.functional.linear_cross_entropy.chunked_none":
        "functions with out=... arguments don't support",
    "sparse.sampled_addmm": "is_coalesced expected sparse coordinate tensor layout",
}
_REFUSED = set()  # the TORCH_REFUSES keys torch was seen refusing


class GraphDiffers(AssertionError):
    """The double-backward graph records other node names than torch's."""


def _names(fn):
    """The set of node names reachable from the node ``fn``."""
    seen, names, stack = set(), set(), [fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        names.add(node.name())
        stack.extend(f for f, _ in node.next_functions)
    return names


def _weights(shapes, seed):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, shape) for shape in shapes]


def _second_order(lib, outs, leaves, vs, ws):
    """``g`` with its graph, and the second order of ``sum (g_i * w_i)`` for leaves + v."""
    vs = [lib.tensor(v, dtype=lib.float64, requires_grad=True) for v in vs]
    g = lib.autograd.grad(outs, leaves, vs, create_graph=True, allow_unused=True)
    terms = [(gi * lib.tensor(w, dtype=lib.float64)).sum()
             for gi, w in zip(g, ws) if gi is not None and gi.requires_grad]
    if not terms:
        return g, None
    total = terms[0]
    for t in terms[1:]:
        total = total + t
    return g, lib.autograd.grad(total, list(leaves) + vs, allow_unused=True)


def check_gradgrad(s, t_out, e_out, t_inputs, e_inputs, where, grad_output=None,
                   graphs=True, second_order=None):
    """Compare one sample's second order (values, None-ness, then, with ``graphs``, the
    graph of ``g``); a graph-only difference raises ``GraphDiffers``. ``second_order``
    replaces ``_second_order`` (test_opinfo_gradgrad_complex.py's complex one)."""
    second_order = second_order or _second_order
    found = _grad_pairs(s, t_out, e_out, t_inputs, e_inputs, where,
                        *(() if grad_output is None else (grad_output,)))
    if found is None:
        return
    pairs, t_leaves, e_leaves, vs = found
    ws = _weights([tuple(t.shape) for t in t_leaves], len(t_leaves))
    try:
        tg, tgg = second_order(torch, [b for _, b in pairs], t_leaves, vs, ws)
    except RuntimeError as err:
        key = where.split(" ")[0]
        assert key in TORCH_REFUSES and TORCH_REFUSES[key] in str(err), f"{where}: {err}"
        _REFUSED.add(key)
        return
    eg, egg = second_order(ember, [a for a, _ in pairs], e_leaves, vs, ws)
    for j, (a, b) in enumerate(zip(eg, tg)):
        assert (a is None) == (b is None), f"{where}: first-order grad {j} is " \
            f"{'None' if a is None else 'a tensor'} in ember, not in torch"
        if b is not None:
            assert a.requires_grad == b.requires_grad, f"{where}: first-order grad {j} " \
                f"requires_grad={a.requires_grad} in ember, {b.requires_grad} in torch"
    assert (egg is None) == (tgg is None), f"{where}: no second order on one side"
    for j, (a, b) in enumerate(zip(egg or (), tgg or ())):
        what = f"{where} second-order grad {j}"
        assert (a is None) == (b is None), f"{what}: {'None' if a is None else 'a tensor'}" \
            f" in ember, {'None' if b is None else 'a tensor'} in torch"
        if b is not None:
            _compare(a, b, "", what)
    for j, (a, b) in enumerate(zip(eg, tg)):
        if graphs and b is not None and b.grad_fn is not None:
            ours, theirs = _names(a.grad_fn), _names(b.grad_fn)
            if ours != theirs:
                raise GraphDiffers(f"{where}: graph of grad {j}: ember has "
                                   f"{sorted(ours - theirs)}, torch has {sorted(theirs - ours)}")


def run_op(op, graphs=True):
    """Check ``op``'s first samples in float64 (and, with ``graphs``, the graphs of its
    first gradients); the number checked."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return check_op(op, dtypes=[torch.float64], samples=SAMPLES,
                        check_grad=functools.partial(check_gradgrad, graphs=graphs))


@pytest.mark.parametrize("op", GRADGRAD, ids=_key)
def test_opinfo_gradgrad(op):
    key = _key(op)
    if key not in KNOWN:
        assert run_op(op) > 0
        return
    # still differing, in the class KNOWN says: once it matches torch, it leaves KNOWN
    try:
        run_op(op)
    except GraphDiffers:
        assert KNOWN[key].startswith("graph:"), f"{key}: values now equal, only the graph " \
            "differs: its KNOWN reason should start with 'graph:'"
    except (AssertionError, NotImplementedError, RuntimeError, TypeError):
        assert KNOWN[key].startswith("values:"), f"{key}: a value differs again"
    else:
        pytest.fail(f"{key} now matches torch: remove it from KNOWN")


def test_known_is_exact():
    """Every KNOWN key names an op of the table."""
    assert set(KNOWN) <= {_key(op) for op in GRADGRAD}


def test_torch_refuses_is_exact():
    """Each op of TORCH_REFUSES still makes torch raise (checked inside run_op)."""
    ops = [op for op in GRADGRAD if _key(op) in TORCH_REFUSES]
    assert len(ops) == len(TORCH_REFUSES)
    for op in ops:
        _REFUSED.discard(_key(op))
        run_op(op, graphs=False)
        assert _key(op) in _REFUSED, f"torch now differentiates {_key(op)} twice"


def _numeric_second_order(f, x, w, eps=1e-6):
    """``d/dx sum(f(x) * w)`` by central differences (``f`` returns a first gradient)."""
    out = np.zeros(x.shape)
    for idx in np.ndindex(x.shape):
        e = np.zeros(x.shape)
        e[idx] = eps
        hi, lo = (float((f(ember.tensor(x + d, requires_grad=True)) * ember.tensor(w)).sum())
                  for d in (e, -e))
        out[idx] = (hi - lo) / (2 * eps)
    return out


@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 2)])
def test_composite_input_computed_from_another(shape):
    """A one-node composite whose inputs depend on each other (lu_solve's two triangular
    solves share LU; the second solves for the first's result): each input's second
    derivative is its partial one, not the total one through the other input."""
    rng = np.random.default_rng(len(shape))
    b = rng.uniform(-1, 1, shape)
    a = rng.uniform(-1, 1, shape[:-2] + (shape[-2],) * 2) + 3 * np.eye(shape[-2])
    v, w = rng.uniform(-1, 1, shape), rng.uniform(-1, 1, a.shape)
    res = []
    for lib in (torch, ember):
        A, B = (lib.tensor(t, requires_grad=True) for t in (a, b))
        st = lib.linalg.solve_triangular
        g, = lib.autograd.grad(st(A, st(A, B, upper=True), upper=True), A,
                               lib.tensor(v), create_graph=True)
        res.append(lib.autograd.grad((g * lib.tensor(w)).sum(), B)[0].detach().numpy())
    np.testing.assert_allclose(res[1], res[0], rtol=1e-9, atol=1e-12)


def test_attention_second_order_through_its_gradient():
    """scaled_dot_product_attention differentiated twice where the gradient reaching it
    depends on the query itself (a loss that is not linear in the output): against
    central differences (PyTorch's CPU kernel has no second derivative)."""
    rng = np.random.default_rng(0)
    q, k, v = (rng.uniform(-1, 1, (1, 2, 3, 4)) for _ in range(3))
    w = rng.uniform(-1, 1, q.shape)

    def first(qt):
        out = ember.nn.functional.scaled_dot_product_attention(qt, ember.tensor(k),
                                                               ember.tensor(v))
        return ember.autograd.grad((out ** 3).sum(), qt, create_graph=True)[0]

    qt = ember.tensor(q, requires_grad=True)
    gg, = ember.autograd.grad((first(qt) * ember.tensor(w)).sum(), qt)
    np.testing.assert_allclose(gg.numpy(), _numeric_second_order(first, q, w), atol=1e-7)


@pytest.mark.parametrize("name", ["ceil", "floor", "trunc", "round", "sign", "sgn", "angle",
                                  "div_floor", "div_trunc", "round_decimals", "pow0"])
def test_zero_gradients_are_zeros(name):
    """Ops whose derivative is zero give zeros, as PyTorch's ``zeros_like(grad)``: also
    for an inf or nan incoming gradient (not nan = inf * 0), and not connected to the
    graph (the gradient does not require grad under ``create_graph``)."""
    calls = {"div_floor": lambda m, x: m.div(x, 2, rounding_mode="floor"),
             "div_trunc": lambda m, x: m.div(x, 2, rounding_mode="trunc"),
             "round_decimals": lambda m, x: m.round(x, decimals=1),
             "pow0": lambda m, x: x ** 0}
    for create in (False, True):
        res = []
        for m in (torch, ember):
            x = m.tensor([1.5, -2.5, 0.0, 3.25], dtype=m.float64, requires_grad=True)
            y = calls[name](m, x) if name in calls else getattr(x, name)()
            v = m.tensor([float("inf"), float("nan"), -float("inf"), 2.0], dtype=m.float64)
            g, = m.autograd.grad(y, x, v, create_graph=create)
            # (+ zeros: torch's sgn gives a ZeroTensor, which has no storage to read)
            res.append(((m.zeros(4, dtype=m.float64) + g.detach()).tolist(), g.requires_grad))
        assert res[1] == res[0] == ([0.0] * 4, False)


@pytest.mark.parametrize("nd", [2, 3])
def test_fractional_max_pool_second_order_is_zeros(nd):
    """fractional max pooling (outside the table: it draws its windows) gives zeros, not
    None, as its second derivative in the input, as PyTorch's node does."""
    rng = np.random.default_rng(nd)
    x = rng.uniform(-1, 1, (2, 3) + (6,) * nd)
    samples = rng.uniform(0, 1, (2, 3, nd))
    res = []
    for m in (torch, ember):
        t = m.tensor(x, requires_grad=True)
        pool = getattr(m.nn.functional, f"fractional_max_pool{nd}d")
        y = pool(t, 2, output_size=3, _random_samples=m.tensor(samples))
        g, = m.autograd.grad(y, t, m.ones_like(y), create_graph=True)
        gg, = m.autograd.grad((g * g).sum(), t, allow_unused=True)
        res.append(None if gg is None else gg.detach().numpy())
    assert res[0] is not None and res[1] is not None
    np.testing.assert_array_equal(res[1], res[0])


def _report():
    import time
    t0 = time.time()
    failures, passed, cases = {}, 0, 0
    for op in GRADGRAD:
        t = time.time()
        cases += len(_samples(op, torch.float64, True, SAMPLES))
        try:
            run_op(op)
            passed += 1
        except Exception as e:  # noqa: BLE001 - a report of every difference
            failures[_key(op)] = f"{type(e).__name__}: {str(e)[:800]}"
        if time.time() - t > 1:
            print(f"slow: {_key(op)} {time.time() - t:.1f}s")
    graph_only = sum(v.startswith("GraphDiffers") for v in failures.values())
    print(f"ops {len(GRADGRAD)}, samples {cases}, matching {passed}, values differ "
          f"{len(failures) - graph_only}, graph only {graph_only}, {time.time() - t0:.0f}s")
    for k, v in sorted(failures.items()):
        print(f"FAIL {k}: {v}")


if __name__ == "__main__":
    _report()
