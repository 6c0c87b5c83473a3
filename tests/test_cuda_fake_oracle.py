"""The op oracle's cases on ember's ``cuda`` device, through the CuPy test double.

The double's arrays refuse implicit conversion to NumPy as CuPy's do, so every place
where ember reaches NumPy directly for a cuda tensor fails here instead of on a GPU.
"""
import os
import sys

import cuda_double
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu"))
import oracle_sweep  # noqa: E402

cupy = cuda_double.cupy  # the fixture

# the ops that still copy their operands to the host on a GPU (known, documented in
# docs/cuda.md): the special functions' NumPy kernels, multilabel_margin_loss's target
# check, embedding's max_norm renorm and embedding_bag's padding, ctc_loss's recursion, and
# pack_padded_sequence (whose batch_sizes torch also keeps on the CPU)
HOST_FALLBACKS = ("MultiLabelMargin", "Embedding_max_norm", "Embedding_scale_grad",
                  "EmbeddingBag_padding", "pack", "packed", "i0", "ctc_loss")


@pytest.mark.parametrize("families,grad", [
    (["elementwise", "reduction", "shape"], True),
    (["indexing", "linalg", "fused_and_fast_paths"], True),
    # (the nn families' gradients run in the GPU check; forward here keeps this file quick)
    (["nn_functional"], False), (["nn_layers", "tensor_methods"], False)])
def test_oracle_cases_run_on_cuda(cupy, families, grad):
    """Every oracle case of the families, inputs on ``cuda``: forward (and first
    gradients) match torch, outputs stay on ``cuda``, and no case copies to the host
    except the known fallbacks. The only refusals are torch's own mixed-device error for
    a CPU tensor that the case builds inside."""
    results = oracle_sweep.sweep(families, "cuda", "cpu", grad=grad)
    seen = 0
    for fam, rs in results.items():
        for r in rs:
            seen += 1
            assert r["outcome"] in ("pass", "device_mix", "both_raise", "device_unverified"), \
                f"{fam} {r['name']}: {r['outcome']}: {r['message']} at {r.get('where')}"
            if r["outcome"] == "device_unverified":
                assert "pack" in r["name"] or "packed" in r["name"], r
            if r["host_copies"]:
                assert any(k in r["name"] for k in HOST_FALLBACKS), \
                    f"{fam} {r['name']} copies to the host {r['host_copies']} times"
    assert seen > 100
    passed = sum(r["outcome"] == "pass" for rs in results.values() for r in rs)
    assert passed > 0.85 * seen
