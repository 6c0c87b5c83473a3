"""Operand checks name the operands as PyTorch does: dtype mismatches in linear layers
and matrix products (each kernel's own message), and class-index targets of nll_loss and
cross_entropy. Every case runs in torch and ember; the exception type and message must
be the same."""
import pytest
import torch

import ember

D = "float64"


def _linear_cases(L):
    F, d = L.nn.functional, getattr(L, D)
    return {
        "input64": lambda: F.linear(L.ones(2, 3, dtype=d), L.ones(4, 3)),
        "weight64": lambda: F.linear(L.ones(2, 3), L.ones(4, 3, dtype=d)),
        "bias64": lambda: F.linear(L.ones(2, 3), L.ones(4, 3), L.ones(4, dtype=d)),
        "vector_input64": lambda: F.linear(L.ones(3, dtype=d), L.ones(4, 3)),
        "batched_input64": lambda: F.linear(L.ones(5, 2, 3, dtype=d), L.ones(4, 3)),
        "batched_input64_bias": lambda: F.linear(L.ones(5, 2, 3, dtype=d), L.ones(4, 3),
                                                 L.ones(4)),
        "input64_bias": lambda: F.linear(L.ones(2, 3, dtype=d), L.ones(4, 3), L.ones(4)),
        "Linear": lambda: L.nn.Linear(3, 4)(L.ones(2, 3, dtype=d)),
        "Linear_no_bias": lambda: L.nn.Linear(3, 4, bias=False)(L.ones(2, 3, dtype=d)),
        "Linear_batched": lambda: L.nn.Linear(3, 4)(L.ones(7, 2, 3, dtype=d)),
        "matmul": lambda: L.matmul(L.ones(2, 3, dtype=d), L.ones(3, 4)),
        "mm": lambda: L.mm(L.ones(2, 3, dtype=d), L.ones(3, 4)),
        "addmm": lambda: L.addmm(L.ones(4), L.ones(2, 3, dtype=d), L.ones(3, 4)),
        "addmm_bias": lambda: L.addmm(L.ones(4, dtype=d), L.ones(2, 3), L.ones(3, 4)),
        "bmm": lambda: L.bmm(L.ones(2, 2, 3, dtype=d), L.ones(2, 3, 4)),
        "mv": lambda: L.mv(L.ones(2, 3, dtype=d), L.ones(3)),
        "mv_vec64": lambda: L.mv(L.ones(2, 3), L.ones(3, dtype=d)),
        "vec_mat": lambda: L.ones(3, dtype=d) @ L.ones(3, 2),
        "dot": lambda: L.ones(3, dtype=d) @ L.ones(3),
        "batch_mat": lambda: L.ones(4, 2, 3, dtype=d) @ L.ones(3, 2),
        "batch_batch": lambda: L.ones(4, 2, 3) @ L.ones(4, 3, 2, dtype=d),
        "mat_batch": lambda: L.ones(2, 3) @ L.ones(4, 3, 2, dtype=d),
        "vec_batch": lambda: L.ones(3, dtype=d) @ L.ones(4, 3, 2),
        "batch_vec": lambda: L.ones(4, 2, 3, dtype=d) @ L.ones(3),
    }


def _target_cases(L):
    F = L.nn.functional
    out = {}
    for inp, tgt in [((3, 4), (3, 1)), ((3, 4), (3, 2)), ((3, 4, 5), (3, 5)),
                     ((3, 4, 5), (3, 4)), ((3, 4, 5), (3, 5, 1)), ((4,), ()), ((4,), (1,)),
                     ((4,), (2,)), ((3, 4), (2,)), ((3, 4, 5, 6), (3, 5)),
                     ((3, 4, 5, 6), (3, 5, 7)), ((3, 4, 5, 6, 2), (3, 5, 6)),
                     ((3, 4, 5), (2, 5))]:
        for name, f in (("cross_entropy", F.cross_entropy), ("nll_loss", F.nll_loss)):
            out[f"{name}{inp}{tgt}"] = (lambda f=f, inp=inp, tgt=tgt:
                                        f(L.zeros(inp), L.zeros(tgt, dtype=L.long)))
    return out


def _outcome(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the outcome compared
        return type(e).__name__, str(e)
    return "ok", ""


@pytest.mark.parametrize("make", [_linear_cases, _target_cases])
def test_messages_as_torch(make):
    mine, ref = make(ember), make(torch)
    differ = [f"{k}: ember {_outcome(mine[k])}, torch {_outcome(ref[k])}" for k in ref
              if _outcome(mine[k]) != _outcome(ref[k])]
    assert not differ, "\n".join(differ)
