"""Whole graphs of linear algebra calls against torch, beyond the oracle tables' shapes:
``einsum`` over a sweep of equations, the ``add*`` products over their scalars and
broadcasts, the one-node composites' second derivatives, ``cond``. Each case compares
the graph (names and ``next_functions``, as ``tests/test_node_names.py``), the values
and the gradients with torch's."""
import math
import os
import sys

import numpy as np
import pytest
import torch

import ember

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_node_names import graph, graph_diff  # noqa: E402


def _norm(g):
    # whether a reshape of a non-contiguous tensor is a view or an alias is reshape's
    # own rule (tested with reshape); everything else must agree
    return tuple((n.replace("ReshapeAliasBackward0", "ViewBackward0"), k) for n, k in g)


def _run(fn, arrays, wrt=None, gradgrad=False):
    """``fn`` on ember and torch: same graph, values and gradients (and gradients of the
    gradients' sum when ``gradgrad``)."""
    wrt = range(len(arrays)) if wrt is None else wrt
    res = []
    for lib in (ember, torch):
        ts = [lib.tensor(a, requires_grad=i in wrt) for i, a in enumerate(arrays)]
        out = fn(lib, *ts)
        ins = [ts[i] for i in wrt]
        gs = lib.autograd.grad(out.sum(), ins, create_graph=gradgrad)
        ggs = lib.autograd.grad(sum(g.sum() for g in gs), ins, allow_unused=True) \
            if gradgrad else ()
        res.append((graph(out.grad_fn), out, gs, ggs))
    (ge, oe, gse, ggse), (gt, ot, gst, ggst) = res
    assert _norm(ge) == _norm(gt), graph_diff(ge, gt)
    np.testing.assert_allclose(oe.detach().numpy(), ot.detach().numpy(), rtol=1e-10,
                               atol=1e-12)
    for a, b in zip(gse + ggse, gst + ggst):
        if b is None or b._is_zerotensor():  # torch's zero second derivative
            assert a is None or not np.any(a.detach().numpy())
        else:
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-9,
                                       atol=1e-11)


EINSUM = [
    ("ij,kj->ik", [(2, 3), (4, 3)]), ("ji,jk->ki", [(3, 2), (3, 4)]),
    ("bij,bkj->bki", [(2, 3, 4), (2, 5, 4)]), ("iaj,jb->bia", [(2, 3, 4), (4, 5)]),
    ("ij,ij->", [(2, 3), (2, 3)]), ("i,i->i", [(3,), (3,)]), ("ijk,k->ij", [(2, 3, 4), (4,)]),
    ("ijk,jk->i", [(2, 3, 4), (3, 4)]), ("ab,bc,cd,de->ae", [(2, 3), (3, 4), (4, 5), (5, 2)]),
    ("...i,...i->...", [(2, 1, 3), (1, 4, 3)]), ("iij->j", [(3, 3, 2)]),
    ("ij,jk,k->i", [(2, 3), (3, 4), (4,)]), ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
    ("i,j,k->ijk", [(2,), (3,), (4,)]), ("ii->i", [(3, 3)]), ("Ab,bC->CA", [(2, 3), (3, 4)]),
    ("i...j,j", [(2, 1, 3, 4), (4,)]), ("ij,kl->", [(3, 2), (2, 3)]),
]


@pytest.mark.parametrize("eq,shapes", EINSUM, ids=[e for e, _ in EINSUM])
def test_einsum_graphs(eq, shapes):
    rng = np.random.default_rng(len(eq))
    _run(lambda m, *ts: m.einsum(eq, *ts), [rng.standard_normal(s) for s in shapes],
         gradgrad=len(shapes) == 2)


ADD_PRODUCTS = [
    ("addmm", lambda m, i, a, b: m.addmm(i, a, b), [(2, 3), (2, 4), (4, 3)]),
    ("addmm_bcast_scaled", lambda m, i, a, b: m.addmm(i, a, b, beta=0.5, alpha=-2),
     [(3,), (2, 4), (4, 3)]),
    ("addmm_beta0", lambda m, i, a, b: m.addmm(i, a, b, beta=0), [(2, 3), (2, 4), (4, 3)]),
    ("addmv", lambda m, i, a, b: m.addmv(i, a, b, alpha=3), [(3,), (3, 4), (4,)]),
    ("addr_bcast", lambda m, i, a, b: m.addr(i, a, b, beta=2), [(1, 4), (3,), (4,)]),
    ("baddbmm", lambda m, i, a, b: m.baddbmm(i, a, b, beta=1.5), [(2, 1, 3), (2, 2, 4),
                                                                    (2, 4, 3)]),
    ("addbmm", lambda m, i, a, b: m.addbmm(i, a, b, alpha=0.5), [(2, 3), (5, 2, 4), (5, 4, 3)]),
    ("addmm_inplace", lambda m, i, a, b: (i * 1).addmm_(a, b, beta=2), [(2, 3), (2, 4),
                                                                          (4, 3)]),
    ("addmm_no_input_grad", lambda m, i, a, b: m.addmm(i, a, b), [(2, 3), (2, 4), (4, 3)]),
]


@pytest.mark.parametrize("fn,shapes", [c[1:] for c in ADD_PRODUCTS],
                         ids=[c[0] for c in ADD_PRODUCTS])
def test_add_product_graphs(fn, shapes):
    rng = np.random.default_rng(len(shapes))
    wrt = (1, 2) if fn is ADD_PRODUCTS[-1][1] else None
    _run(fn, [rng.standard_normal(s) for s in shapes], wrt, gradgrad=True)


def _spd(m, a):
    return a @ a.mT + 3 * m.eye(a.shape[-1], dtype=a.dtype)


ONE_NODE = [
    ("dist", lambda m, a, b: m.dist(a, b, 3), [(3, 4), (3, 4)]),
    ("matrix_exp", lambda m, a: m.linalg.matrix_exp(a * 0.3), [(2, 3, 3)]),
    ("solve_vector", lambda m, a, b: m.linalg.solve(_spd(m, a), b), [(3, 3), (3,)]),
    ("solve_triangular", lambda m, a, b: m.linalg.solve_triangular(
        _spd(m, a), b, upper=False, left=False), [(3, 3), (2, 3)]),
    ("cholesky_solve", lambda m, a, b: m.cholesky_solve(b, m.linalg.cholesky(_spd(m, a))),
     [(3, 3), (3, 2)]),
    ("trace", lambda m, a: m.trace(a * a), [(3, 4)]),
    ("rot90", lambda m, a: m.rot90(a * a, 3, (1, 2)), [(2, 3, 4)]),
    ("logaddexp", lambda m, a, b: m.logaddexp(a * a, b), [(3, 4), (4,)]),
    ("vector_norm_dtype", lambda m, a: m.linalg.vector_norm(a, 3, dtype=m.float64),
     [(3, 4)]),
    ("cdist_mm_batched", lambda m, a, b: m.cdist(a, b), [(2, 30, 3), (4, 3)]),
    ("pairwise_distance", lambda m, a, b: m.nn.functional.pairwise_distance(a, b, 3),
     [(3, 4), (3, 4)]),
    ("cosine_similarity_bcast", lambda m, a, b: m.nn.functional.cosine_similarity(a, b, -1),
     [(3, 4), (1, 4)]),
    ("matrix_norm_inf_dims", lambda m, a: m.linalg.matrix_norm(a, -math.inf, (2, 0)),
     [(3, 4, 2)]),
]


@pytest.mark.parametrize("fn,shapes", [c[1:] for c in ONE_NODE], ids=[c[0] for c in ONE_NODE])
def test_one_node_composites_to_second_order(fn, shapes):
    rng = np.random.default_rng(len(shapes) + 7)
    _run(fn, [rng.uniform(0.1, 1.0, s) for s in shapes], gradgrad=True)


def test_cond_is_one_node_over_pred_and_operands():
    def fn(m, x):
        return m.cond(x.sum() > 0, lambda a: (a ** 3).sum(), lambda a: (a * 2).sum(), (x,))
    # (torch's cond has no second derivative)
    _run(fn, [np.array([0.5, -0.2, 0.4])])
    _run(fn, [np.array([-0.5, -0.2, 0.4])])
