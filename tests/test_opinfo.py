"""Every op of PyTorch's OpInfo database outside the numerics namespaces, against torch.

One table drives this file: ``op_db`` from ``torch.testing._internal``. For each op (bar
the random ones, private ``_`` names, names torch itself does not expose publicly and
CUDA-only ones) a few of its sample inputs run in ember and in torch, in float32,
float64 and one integer dtype where the op supports them; forward values, dtypes and
shapes are compared with ``torch.testing.assert_close``'s tolerances, then the float64
first gradients for a fixed ``grad_output``. The fft, special and signal namespaces
have their own file (test_numerics_opinfo.py).

Two exact sets keep the report honest: ``MISSING`` (ops ember does not have) and
``KNOWN_GAPS`` (ops with a sample ember gets wrong, and why). Each is asserted equal to
what the run finds, so an op that appears, or a gap that closes, must leave its set.
Run this file as a script for the counts (see docs/opinfo.md).
"""
import types
import warnings

import numpy as np
import pytest
import torch
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.common_utils import SEED, set_rng_seed

import ember

NUMERICS = ("fft.", "special.", "signal.")
# nondeterministic ops: their values depend on a random stream or uninitialised memory
RANDOM = {
    "bernoulli", "cauchy", "exponential", "geometric", "log_normal", "multinomial", "normal",
    "uniform", "rand_like", "randn", "randn_like", "randint", "randint_like",
    "nn.functional.dropout", "nn.functional.dropout2d", "nn.functional.dropout3d",
    "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout",
    "nn.functional.rrelu", "nn.functional.fractional_max_pool2d",
    "nn.functional.fractional_max_pool3d", "svd_lowrank", "pca_lowrank",
    "empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided", "empty_permuted",
}
# samples of deterministic ops that draw random numbers (dropout inside attention): only
# their shapes and dtypes are compared
RANDOM_SAMPLE = {
    "nn.functional.scaled_dot_product_attention": lambda s: s.kwargs.get("dropout_p", 0) > 0,
    "nn.functional.multi_head_attention_forward":
        lambda s: s.kwargs.get("training", True) and s.args[9] > 0,
}
# eigen/singular vectors are defined up to sign (for linalg.eig, a complex phase per
# column: LAPACK fixes the norm and makes the largest component real, but its sign falls
# out of the build's arithmetic, NumPy's OpenBLAS and torch's MKL differ): compared after
# OpInfo's own output_process_fn_grad, which removes that freedom ((L, |V|) for eig).
# What is determined (eigenvalue order, the normalisation) is tested in test_linalg_eig.py
SIGN_FREE = {"linalg.eigh", "linalg.svd", "svd", "linalg.eig"}
CUDA_ONLY_PREFIX = ("jiterator_",)
SAMPLES = int(__import__("os").environ.get("OPINFO_SAMPLES", 5))  # per op and dtype
# ops whose telling samples (0-d operands, empty inputs, integer ends) come later
DEEPER = {"diff": 24, "gather": 8, "scatter": 20, "linspace": 34, "logspace": 52,
          "linspace.tensor_overload": 98, "logspace.tensor_overload": 152, "arange": 12,
          "linalg.norm": 70, "linalg.norm.subgradients_at_zero": 60, "mode": 8,
          "nn.functional.embedding": 10, "nn.functional.embedding_bag": 12,
          "nn.functional.avg_pool2d": 6, "nn.functional.avg_pool3d": 6,
          "nn.functional.multi_head_attention_forward": 12, "nn.functional.batch_norm": 6}


def _torch_public(name):
    if name.startswith("__"):
        return getattr(torch.Tensor, name, None)
    obj = torch
    for part in name.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            break
    if obj is None and "." not in name:
        obj = getattr(torch.Tensor, name, None)
    return obj


def _selected(op):
    name = op.name
    if name.startswith(NUMERICS) or name.startswith(CUDA_ONLY_PREFIX) or name in RANDOM:
        return False
    if name.startswith("_") and not name.startswith("__") or name.startswith("torch."):
        return False  # private: _names, torch._scaled_mm (CUDA), torch.ops.aten._* kernels
    if not op.supported_dtypes("cpu"):  # a CUDA-only variant
        return False
    return _torch_public(name) is not None


OPS = [op for op in op_db if _selected(op)]


def _key(op):
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def _ember_name(name):
    """ember's function for an OpInfo name, resolved the way torch resolves it, or None."""
    if name.startswith("__"):
        return getattr(ember.Tensor, name, None)
    obj = ember
    for part in name.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            break
    if callable(obj) and ("." in name or callable(getattr(torch, name, None))):
        return obj
    return getattr(ember.Tensor, name, None)


def _ember_fn(op):
    """A callable running the op in ember with the sample's calling convention."""
    fn = _ember_name(op.name)
    if fn is None:
        return None
    f = op.op
    code = getattr(f, "__code__", None)
    if code is not None and code.co_name == "<lambda>":
        # OpInfo wraps some ops in a lambda over ``torch``: run the same lambda on ember
        return types.FunctionType(code, {**f.__globals__, "torch": ember}, code.co_name,
                                  f.__defaults__, f.__closure__)
    return fn


# ops ember does not have: the test fails when one appears and is not removed from here
MISSING = set()
# ops with a sample ember gets wrong or refuses, and why; the goal is an empty dict
KNOWN_GAPS = {
}


def _sparse_to_ember(x):
    """A torch COO or CSR tensor as ember's, a leaf requiring grad as x does."""
    if x.layout == torch.sparse_csr:
        t = ember.sparse_csr_tensor(*(_to_ember(a.detach()) for a in
                                      (x.crow_indices(), x.col_indices(), x.values())),
                                    tuple(x.shape))
    else:
        t = ember.sparse_coo_tensor(_to_ember(x._indices().detach()),
                                    _to_ember(x._values().detach()), tuple(x.shape),
                                    is_coalesced=x.is_coalesced())
    return t.requires_grad_(x.requires_grad)



def _as_strided_scatter_composed(input, src, size, stride, storage_offset=None):
    out = input.clone(memory_format=torch.contiguous_format)
    out.as_strided(size, stride, storage_offset).copy_(src)
    return out


# "torch is wrong here": ops whose torch 2.13 gradient is wrong. torch's own gradcheck
# fails on them (OpInfo marks TestBwdGradients.test_fn_grad an expected failure), so
# ember does not imitate them: forward values are compared with torch's op, gradients
# with a composition of torch ops that computes the same values and passes gradcheck
# (test_torch_is_wrong_here asserts both, so a torch fix is noticed).
TORCH_WRONG_GRAD = {
    # the gradient for input zeroes the elements outside the window instead of those in it
    "as_strided_scatter": _as_strided_scatter_composed,
}


def _numpy(x):
    """A copy of the strided torch tensor ``x`` as a NumPy array (bfloat16 through its
    bits: torch has no NumPy twin for it, ember's is ml_dtypes')."""
    if x.dtype == torch.bfloat16:
        return x.view(torch.int16).numpy().copy().view(ember.bfloat16.np)
    return x.resolve_conj().numpy().copy()  # a conjugate view (dot's samples): its values


def _to_ember(x):
    if isinstance(x, torch.Tensor) and x.layout != torch.strided:
        return _sparse_to_ember(x)
    if isinstance(x, torch.Tensor):
        n = x.untyped_storage().nbytes() // max(x.element_size(), 1)
        if x.storage_offset() or n != x.numel() and x.is_contiguous():
            # a partial view of a larger storage (as_strided's samples): the same view of
            # the same storage, a leaf when torch's is (a view made to require grad)
            base = ember.tensor(_numpy(x.detach().as_strided((n,), (1,), 0)))
            view = base.as_strided(tuple(x.shape), x.stride(), x.storage_offset())
            return view.requires_grad_(x.requires_grad)
        t = ember.tensor(_numpy(x.detach()))
        if x.requires_grad:
            t.requires_grad_(True)
        return t
    if isinstance(x, (torch.dtype, torch.memory_format, torch.layout)):
        return getattr(ember, str(x).split(".")[1])
    if isinstance(x, torch.device):
        return str(x)
    if isinstance(x, torch.Size):
        return tuple(x)
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
        return type(x)(_to_ember(v) for v in x)
    if isinstance(x, dict):
        return {k: _to_ember(v) for k, v in x.items()}
    if isinstance(x, torch.nn.Module):  # a module passed as a distance function
        return getattr(ember.nn, type(x).__name__)()
    if callable(x) and getattr(x, "__module__", "").startswith("torch"):
        # a torch function passed as an argument (a distance function): ember's namesake
        name = x.__name__.lstrip("_")
        return getattr(ember.nn.functional, name, None) or getattr(ember, name)
    return x


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [v for o in out for v in _flat(o)]
    return [out]


def _tols(key, dtype):
    if dtype in (torch.float32, torch.complex64):
        return 1.3e-6, 1e-5
    return 1e-7, 1e-7


def _compare(e, t, key, what):
    if isinstance(t, torch.Tensor):
        assert isinstance(e, ember.Tensor), f"{what}: {type(e).__name__}, not a Tensor"
        assert tuple(e.shape) == tuple(t.shape), f"{what}: shape {tuple(e.shape)} != " \
            f"{tuple(t.shape)}"
        assert e.dtype.name == str(t.dtype).split(".")[1], f"{what}: dtype {e.dtype} != {t.dtype}"
        if t.dtype == torch.bfloat16:
            e, t = e.float(), t.float()
        if t.dtype == torch.complex32:  # no NumPy twin on either side: compare in complex64
            e, t = e.cfloat(), t.cfloat()
        if t.layout != torch.strided:
            t = t.to_dense()
        if getattr(e, "layout", ember.strided) != ember.strided:
            e = e.to_dense()
        ea = e.detach().numpy()
        ta = t.detach().numpy(force=True)
        if ta.dtype.kind in "biu":
            np.testing.assert_array_equal(ea, ta, err_msg=what)
        else:
            rtol, atol = _tols(key, t.dtype)
            if t.dtype in (torch.float32, torch.complex64) and ta.size:
                # float32 sums in another order differ in proportion to the output's scale;
                # float64 (and its gradients) checks the math itself tightly
                finite = np.abs(ta[np.isfinite(ta)])
                atol *= max(1.0, float(finite.max())) if finite.size else 1.0
            np.testing.assert_allclose(ea, ta, rtol=rtol, atol=atol, equal_nan=True,
                                       err_msg=what)
    else:
        if isinstance(e, ember.Tensor):
            e = e.item()
        assert type(e) is type(t) or isinstance(t, float), f"{what}: {e!r} != {t!r}"
        assert e == pytest.approx(t, nan_ok=True), f"{what}: {e!r} != {t!r}"


def _dtypes(op):
    supported = op.supported_dtypes("cpu")
    out = [d for d in (torch.float32, torch.float64) if d in supported]
    ints = [d for d in (torch.int64, torch.int32, torch.uint8, torch.bool) if d in supported]
    if not out + ints:  # complex-only ops (view_as_real)
        return [d for d in (torch.complex64, torch.complex128) if d in supported]
    return out + ints[:1]


def _sample_inputs(op, dtype, grad):
    """``op.sample_inputs("cpu", dtype, requires_grad=grad)`` without its tracker's two
    walks of the Python stack per call (``inspect.stack``: a tenth of a second under
    pytest): the same generator, seeded before each sample as the tracker seeds it when
    no unittest.TestCase is running (``SEED``)."""
    it = iter(op.sample_inputs_func(op, "cpu", dtype, grad))
    while True:
        set_rng_seed(SEED)
        try:
            yield next(it)
        except StopIteration:
            return


def _samples(op, dtype, grad, samples=None, generator="sample_inputs"):
    """The first samples of ``op`` in ``dtype`` from the OpInfo generator named
    ``generator`` (``sample_inputs``, or ``reference_inputs``: the larger, harder set),
    with the random stream seeded so that both generators start alike."""
    limit = SAMPLES if samples is None else samples
    if generator == "sample_inputs":
        limit = max(limit, DEEPER.get(_key(op), 0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(0)
        out = []
        gen = _sample_inputs(op, dtype, grad) if generator == "sample_inputs" else \
            getattr(op, generator)("cpu", dtype, requires_grad=grad)
        for s in gen:
            out.append(s)
            if len(out) == limit:
                break
        return out


def _real_grad_output(out):
    """The fixed ``grad_output`` for a floating-point output (None: not differentiated)."""
    if not out.is_floating_point():
        return None
    return np.linspace(-1, 1, out.numel()).reshape(out.shape)


def check_op(op, dtypes=None, compare=None, samples=None, inputs=None,
             grad_output=_real_grad_output, check_grad=None):
    """Run ``op``'s samples in ember and torch; raise AssertionError on a difference.

    ``dtypes`` replaces the dtypes tried (``_dtypes(op)``), ``samples`` the number of
    samples per dtype (``SAMPLES``); ``compare(e, t, key, what, sample, j)`` replaces
    ``_compare`` for output ``j`` (the sample lets a judge recompute torch's result in
    another dtype); ``inputs(op, dtype, grad)`` replaces the samples (``_samples``): a
    list of ``(index, sample)`` pairs; ``grad_output(torch_output)`` gives the NumPy
    ``grad_output`` of each differentiable output, or None to leave that output out of
    the backward pass; ``check_grad`` replaces ``_check_grad``, the gradient comparison
    run on each float64 and complex128 sample (test_opinfo_gradgrad.py's second order)."""
    fn = _ember_fn(op)
    checked = 0
    for dtype in _dtypes(op) if dtypes is None else dtypes:
        grad = dtype in (torch.float64, torch.complex128) and op.supports_autograd
        if inputs is None:
            numbered = enumerate(_samples(op, dtype, grad, samples))
        else:
            numbered = inputs(op, dtype, grad)
        for i, s in numbered:
            checked += check_sample(op, fn, s, dtype, grad, i, compare, grad_output,
                                    check_grad)
    return checked


def check_sample(op, fn, s, dtype, grad, i, compare=None, grad_output=_real_grad_output,
                 check_grad=None):
    """Run sample ``i`` of ``op`` (``fn`` in ember) in ember and torch; raise
    AssertionError on a difference (``compare``, ``grad_output``, ``check_grad`` as
    ``check_op``'s). Returns 1 when outputs were compared, 0 when both refused."""
    key = _key(op)
    where = f"{key} {dtype} sample {i}"
    e_in, e_args, e_kw = _to_ember(s.input), _to_ember(s.args), _to_ember(s.kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            t_out = op.op(s.input, *s.args, **s.kwargs)
        except Exception:  # noqa: BLE001 - then ember must refuse too
            refused = False
            try:
                fn(e_in, *e_args, **e_kw)
            except Exception:  # noqa: BLE001 - any error, as torch's types vary
                refused = True
            assert refused, f"{where}: torch raised, ember did not"
            return 0
        try:
            e_out = fn(e_in, *e_args, **e_kw)
        except Exception as err:  # noqa: BLE001 - reported as a difference
            raise AssertionError(f"{where}: ember raised {type(err).__name__}: "
                                 f"{err}") from err
    if op.name in SIGN_FREE:
        t_flat, e_flat = (_flat(s.output_process_fn_grad(o)) for o in (t_out, e_out))
    else:
        t_flat, e_flat = _flat(t_out), _flat(e_out)
    assert len(e_flat) == len(t_flat), f"{where}: {len(e_flat)} outputs != " \
        f"{len(t_flat)}"
    random = RANDOM_SAMPLE.get(op.name, lambda s: False)(s)
    for j, (a, b) in enumerate(zip(e_flat, t_flat)):
        if random and isinstance(b, torch.Tensor):
            a, b = ember.zeros_like(a), torch.zeros_like(b)
        if compare is None:
            _compare(a, b, key, f"{where} output {j}")
        else:
            compare(a, b, key, f"{where} output {j}", s, j)
    if grad and not random:
        if op.name in TORCH_WRONG_GRAD:
            t_out = TORCH_WRONG_GRAD[op.name](s.input, *s.args, **s.kwargs)
        (check_grad or _check_grad)(s, t_out, e_out, (s.input, s.args, s.kwargs),
                                    (e_in, e_args, e_kw), where, grad_output)
    return 1


def _grad_pairs(s, t_out, e_out, t_inputs, e_inputs, where, grad_output=_real_grad_output):
    """The (ember, torch) outputs to differentiate, both sides' leaves and the outputs'
    ``grad_output`` arrays, or None."""
    t_out, e_out = s.output_process_fn_grad(t_out), s.output_process_fn_grad(e_out)
    t_flat, e_flat = _flat(t_out), _flat(e_out)
    pairs, gos = [], []
    for a, b in zip(e_flat, t_flat):
        if isinstance(b, torch.Tensor) and b.requires_grad:
            go = grad_output(b)
            if go is not None:
                pairs.append((a, b))
                gos.append(go)
    t_leaves = [t for t in _flat([t_inputs[0], list(t_inputs[1]), list(t_inputs[2].values())])
                if isinstance(t, torch.Tensor) and t.requires_grad]
    e_leaves = [t for t in _flat([e_inputs[0], list(e_inputs[1]), list(e_inputs[2].values())])
                if isinstance(t, ember.Tensor) and t.requires_grad]
    if not pairs or not t_leaves:
        return None
    assert len(e_leaves) == len(t_leaves)
    assert all(isinstance(a, ember.Tensor) and a.requires_grad for a, _ in pairs), \
        f"{where}: ember's output does not require grad"
    return pairs, t_leaves, e_leaves, gos


def _check_grad(s, t_out, e_out, t_inputs, e_inputs, where, grad_output=_real_grad_output):
    found = _grad_pairs(s, t_out, e_out, t_inputs, e_inputs, where, grad_output)
    if found is None:
        return
    pairs, t_leaves, e_leaves, gos = found
    try:
        tg = torch.autograd.grad([b for _, b in pairs], t_leaves,
                                 [torch.tensor(g, dtype=b.dtype) for g, (_, b) in zip(gos, pairs)],
                                 allow_unused=True)
    except RuntimeError as err:  # a difference to report, not the harness failing
        raise AssertionError(f"{where}: torch's backward raised: {err}") from err
    eg = ember.autograd.grad([a for a, _ in pairs], e_leaves,
                             [ember.tensor(g, dtype=a.dtype) for g, (a, _) in zip(gos, pairs)],
                             allow_unused=True)
    for j, (a, b) in enumerate(zip(eg, tg)):
        if a is None or b is None:  # an absent gradient equals an all-zero one
            for g in (a, b):
                assert g is None or not g.detach().numpy().any(), f"{where}: grad {j} is None " \
                    "on one side, nonzero on the other"
            continue
        _compare(a, b, "", f"{where} grad {j}")


PRESENT = [op for op in OPS if _ember_fn(op) is not None]


def test_missing_is_exact():
    assert {_key(op) for op in OPS if _ember_fn(op) is None} == MISSING


@pytest.mark.parametrize("op", PRESENT, ids=_key)
def test_opinfo_samples(op):
    key = _key(op)
    if key in KNOWN_GAPS:  # still failing: once it passes, it leaves KNOWN_GAPS
        with pytest.raises((AssertionError, NotImplementedError, RuntimeError, TypeError)):
            check_op(op)
    else:
        assert check_op(op) > 0


@pytest.mark.parametrize("name", sorted(TORCH_WRONG_GRAD))
def test_torch_is_wrong_here(name):
    """torch's gradient still fails torch's gradcheck (when this fails, torch was fixed:
    drop the op from TORCH_WRONG_GRAD); the composition the harness uses instead, and
    ember's op, pass it and agree in value."""
    op = next(o for o in OPS if o.name == name)
    samples = [s for s in _samples(op, torch.float64, True) if s.args]
    assert samples
    for s in samples:
        def run(fn, conv=lambda v: v, s=s):
            rest = conv(s.args[1:]), conv(s.kwargs)
            return lambda a, b: fn(a, b, *rest[0], **rest[1])
        leaves = (s.input, s.args[0])
        assert not torch.autograd.gradcheck(run(op.op), leaves, raise_exception=False)
        composed = run(TORCH_WRONG_GRAD[name])
        assert torch.autograd.gradcheck(composed, leaves)
        assert torch.equal(composed(*leaves), op.op(s.input, *s.args, **s.kwargs))
        e_leaves = [_to_ember(v) for v in leaves]
        assert ember.autograd.gradcheck(run(_ember_fn(op), _to_ember), e_leaves)


@pytest.mark.parametrize("name", ["sort", "topk", "kthvalue"])
def test_out_of_value_index_ops(name):
    """``out=(values, indices)``, OpInfo's first samples, into resized empty tensors."""
    op = next(o for o in OPS if o.name == name)
    assert op.supports_out
    for s in _samples(op, torch.int64, False):
        res = []
        for m, conv in ((torch, lambda x: x), (ember, _to_ember)):
            out = (m.empty(0, dtype=m.int64), m.empty(0, dtype=m.int64))
            getattr(m, name)(conv(s.input), *conv(s.args), **conv(s.kwargs), out=out)
            res.append([o.numpy().copy() for o in out])
        for a, b in zip(*res):
            np.testing.assert_array_equal(a, b)


def _report():
    import time
    t0 = time.time()
    failures = {}
    passed = 0
    for op in PRESENT:
        t = time.time()
        try:
            check_op(op)
            passed += 1
        except Exception as e:  # noqa: BLE001 - a report of every difference
            failures[_key(op)] = f"{type(e).__name__}: {str(e)[:300]}"
        if time.time() - t > 1:
            print(f"slow: {_key(op)} {time.time() - t:.1f}s")
    missing = sorted(_key(op) for op in OPS if _ember_fn(op) is None)
    print(f"considered {len(OPS)}, present {len(PRESENT)}, passing {passed}, "
          f"{time.time() - t0:.0f}s")
    print("MISSING", missing)
    for k, v in sorted(failures.items()):
        print(f"FAIL {k}: {v}")


if __name__ == "__main__":
    _report()
