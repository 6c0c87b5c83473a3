"""Second-order gradients of PyTorch's OpInfo table in complex128 (test_opinfo_gradgrad.py
runs float64): every op ember has that OpInfo marks ``supports_gradgrad`` with complex128
samples, its first ``SAMPLES`` samples, values compared (graphs are float64's matter).
With a complex ``grad_output`` ``v`` (real for real outputs) and complex weights ``w_i``,
both libraries compute ``g = autograd.grad(out, inputs, v, create_graph=True)`` and the
gradient of the real loss ``Re sum_i (g_i * w_i).sum()`` in the inputs and ``v``.

``KNOWN`` is exact: an op that starts to agree must leave it.
``python tests/test_opinfo_gradgrad_complex.py`` prints every difference and the time.
"""
import functools
import sys
import time
import warnings

import numpy as np
import pytest
import test_opinfo as T
import test_opinfo_gradgrad as G
import torch
from test_opinfo_complex import _complex_grad_output

SAMPLES = 4
OPS = [op for op in G.GRADGRAD if torch.complex128 in op.supported_dtypes("cpu")]

_NO_GRAD = "torch's first-order gradient of this sample does not require grad; ember's does"
KNOWN = {
    "repeat": _NO_GRAD,
    "linalg.det": _NO_GRAD,
    "linalg.lstsq": "the gradient in grad_output is None in torch, a (zero) tensor in ember",
    "linalg.lstsq.grad_oriented":
        "the gradient in grad_output is None in torch, a (zero) tensor in ember",
    "logcumsumexp": "sample 1 (|x| = 1e4): ember's second derivative is 1.6e-3 (relative) "
                    "off central differences of the first; torch's agrees to 3e-9",
}


def _second_order(lib, outs, leaves, vs, ws):
    """test_opinfo_gradgrad's second order with complex ``v`` and weights, of a real loss."""
    vs = [lib.tensor(v, dtype=lib.complex128 if np.iscomplexobj(v) else lib.float64,
                     requires_grad=True) for v in vs]
    g = lib.autograd.grad(outs, leaves, vs, create_graph=True, allow_unused=True)
    terms = []
    for gi, w in zip(g, ws):
        if gi is None or not gi.requires_grad:
            continue
        t = (gi * lib.tensor(w + 1j * (0.7 * w - 0.2) if gi.is_complex() else w)).sum()
        terms.append(lib.real(t) if t.is_complex() else t)
    if not terms:
        return g, None
    total = terms[0]
    for t in terms[1:]:
        total = total + t
    return g, lib.autograd.grad(total, list(leaves) + vs, allow_unused=True)


def run_op(op):
    """Check ``op``'s first samples in complex128; the number checked."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return T.check_op(op, dtypes=[torch.complex128], samples=SAMPLES,
                          grad_output=_complex_grad_output,
                          check_grad=functools.partial(G.check_gradgrad, graphs=False,
                                                       second_order=_second_order))


@pytest.mark.parametrize("op", OPS, ids=T._key)
def test_opinfo_gradgrad_complex(op):
    if T._key(op) in KNOWN:  # still differs: once it agrees, it leaves KNOWN
        with pytest.raises(AssertionError):
            run_op(op)
    else:
        run_op(op)


def test_known_names_live_ops():
    assert set(KNOWN) <= {T._key(op) for op in OPS}


if __name__ == "__main__":
    SAMPLES = int(sys.argv[1]) if len(sys.argv) > 1 else SAMPLES
    start = time.process_time()
    for op in OPS:
        try:
            run_op(op)
        except AssertionError as err:
            print(f"{T._key(op)}: {str(err)[:300]}")
    print(f"{len(OPS)} ops, {SAMPLES} samples each at most: "
          f"{time.process_time() - start:.1f} s of CPU")
