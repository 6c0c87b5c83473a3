"""ember.func.vmap over every op of PyTorch's OpInfo table, against torch.func.vmap.

The ops are test_opinfo.py's selection (``PRESENT``: every op of ``op_db`` that ember
runs, with its mapping from an OpInfo to ember's function). For each op, in float32, the
first ``SAMPLES`` samples (3: about a minute and a half here; an op's later samples
mostly repeat its earlier shapes) are drawn under three seeds: the same shapes and
arguments, three random variants of every tensor (indices stay valid, matrices stay
positive definite: the sample generator draws them). Stacked along a batch dim they make
a batch of B=3, and ``ember.func.vmap`` is compared with ``torch.func.vmap`` on the same
data, values, dtypes and shapes, in these cases:

* ``dim0``: every tensor argument batched at dim 0;
* ``last``: every tensor argument batched at its last dim (``in_dims=-1``,
  ``out_dims=-1``);
* ``first``: only the first tensor argument batched, the others shared (``None``);
* ``nested``: vmap of vmap, two batch dims (outer ``in_dims=1`` of size 3, inner
  ``in_dims=0`` of size 2);
* ``grad``: ``vmap(grad(f))``, per-sample gradients of the sum of the op's floating
  outputs with respect to its first tensor, for the differentiable ops;
* ``jacrev`` / ``jacfwd``: the Jacobian of :data:`JAC_OPS` (first sample, unbatched).

Where torch refuses (a data-dependent shape, a non-tensor output) ember must refuse too.
Whether ember ran batching rules or fell back to its per-sample loop (which warns) is
recorded per op and case: the loop is exact but slow, so a fallback is no failure; the
fallbacks are listed as warnings in pytest's output and by the script mode
(``python tests/test_vmap_opinfo.py``: counts, fallbacks and every difference).

What still differs is listed exactly in :data:`KNOWN` (op key and case, with the
reason); a known case that starts to agree fails the test, so the entry leaves.
"""
import os
import warnings

import numpy as np
import pytest
import torch
from test_opinfo import (
    PRESENT,
    RANDOM_SAMPLE,
    SIGN_FREE,
    _compare,
    _ember_fn,
    _flat,
    _key,
    _to_ember,
)

import ember
from ember import func as efunc
from ember.func import _vmap

SAMPLES = int(os.environ.get("VMAP_OPINFO_SAMPLES", 3))  # per op
B = 3  # the batch size; the nested case's inner batch has 2
CASES = ("dim0", "last", "first", "nested", "grad")
# the Jacobian cases run for these (first sample, unbatched)
JAC_OPS = {
    "sin", "exp", "tanh", "sigmoid", "log_softmax", "softmax", "add", "mul", "div", "pow",
    "matmul", "mm", "sum", "mean", "cumsum", "logsumexp", "nn.functional.linear",
    "nn.functional.gelu", "linalg.vector_norm", "where",
}

_LOOP = "; ember's answer equals torch's per-sample loop"
_NO_RULE = "torch.func.vmap has no batching rule and no fallback for it" + _LOOP
_NO_GRAD = "torch's backward reads values (.item()), which torch's vmap refuses" + _LOOP
_EMPTY_LAST = ("torch is wrong here: out_dims=-1 of an empty per-sample output gives a "
               "garbage size (34359738369...); ember's shape is the per-sample loop's")

# (op key, case) -> why ember still differs from torch there. Every entry is a case torch
# gets wrong or refuses where ember computes what torch's own ops give sample by sample
# (checked by the harness); a refusal on principle (values deciding a shape, a batch
# written into unbatched memory) is matched, not listed.
KNOWN = {
    ("cov", "dim0"): "torch's cov compares weights with aten::equal, which has no rule" + _LOOP,
    ("cov", "last"): "torch's cov compares weights with aten::equal, which has no rule" + _LOOP,
    ("cov", "nested"): "torch's cov compares weights with aten::equal, which has no rule"
                       + _LOOP,
    ("cov", "grad"): "torch's cov compares weights with aten::equal, which has no rule" + _LOOP,
    ("column_stack", "dim0"): _NO_RULE,
    ("column_stack", "first"): _NO_RULE,
    ("column_stack", "last"): _NO_RULE,
    ("column_stack", "nested"): _NO_RULE,
    ("histogramdd", "dim0"): _NO_RULE,
    ("histogramdd", "first"): _NO_RULE,
    ("histogramdd", "last"): _NO_RULE,
    ("histogramdd", "nested"): _NO_RULE,
    ("tensor_split", "dim0"): "no torch rule for tensor_split with a tensor of indices" + _LOOP,
    ("tensor_split", "first"): "no torch rule for tensor_split with a tensor of indices" + _LOOP,
    ("tensor_split", "last"): "no torch rule for tensor_split with a tensor of indices" + _LOOP,
    ("tensor_split", "nested"): "no torch rule for tensor_split with a tensor of indices"
                                + _LOOP,
    ("tensor_split", "grad"): "torch's backward fails on a storage-less batched tensor" + _LOOP,
    ("narrow", "dim0"): "no torch rule for narrow with a tensor start (a view op)" + _LOOP,
    ("narrow", "first"): "no torch rule for narrow with a tensor start (a view op)" + _LOOP,
    ("narrow", "last"): "no torch rule for narrow with a tensor start (a view op)" + _LOOP,
    ("narrow", "nested"): "no torch rule for narrow with a tensor start (a view op)" + _LOOP,
    ("narrow", "grad"): "torch reads the tensor start with .item() under vmap" + _LOOP,
    ("index_reduce.prod", "grad"): _NO_GRAD,
    ("nn.functional.ctc_loss", "grad"): "torch's fallback stacks per-sample intermediates "
                                        "sized by each sample's target lengths" + _LOOP,
    ("scatter_reduce.prod", "grad"): _NO_GRAD,
    ("nn.functional.gaussian_nll_loss", "dim0"): "torch's composite tests var < 0 in Python "
                                                 "control flow" + _LOOP,
    ("nn.functional.gaussian_nll_loss", "last"): "torch's composite tests var < 0 in Python "
                                                 "control flow" + _LOOP,
    ("nn.functional.gaussian_nll_loss", "nested"): "torch's composite tests var < 0 in "
                                                   "Python control flow" + _LOOP,
    ("nn.functional.gaussian_nll_loss", "grad"): "torch's composite tests var < 0 in Python "
                                                 "control flow" + _LOOP,
    ("nn.functional.linear_cross_entropy.chunked", "grad"):
        "torch's chunked kernel is an autograd.Function without setup_context" + _LOOP,
    ("nn.functional.linear_cross_entropy.chunked_none", "grad"):
        "torch's chunked kernel is an autograd.Function without setup_context" + _LOOP,
    ("to", "dim0"): "torch checks channels_last against the batched rank (5)" + _LOOP,
    ("to", "last"): "torch checks channels_last against the batched rank (5)" + _LOOP,
    ("to", "nested"): "torch checks channels_last against the batched rank (6)" + _LOOP,
    ("to", "grad"): "torch checks channels_last against the batched rank (5)" + _LOOP,
    ("to_sparse", "dim0"): "torch's vmap cannot view a sparse result" + _LOOP,
    ("to_sparse", "last"): "torch's vmap cannot view a sparse result" + _LOOP,
    ("to_sparse", "nested"): "torch's vmap cannot view a sparse result" + _LOOP,
    ("to_sparse", "grad"): "torch's vmap cannot view a sparse result" + _LOOP,
    ("resize_", "last"): "torch fails an internal assert (batch dim not in front)" + _LOOP,
    ("resize_", "nested"): "torch fails an internal assert (batch dim not in front)" + _LOOP,
    ("native_group_norm", "last"): "torch's kernel refuses a non-contiguous input, per sample "
                                   "too; ember normalizes it",
    ("linalg.lstsq", "last"): _EMPTY_LAST,
    ("linalg.lstsq.grad_oriented", "last"): _EMPTY_LAST,
    ("linalg.matrix_rank", "last"): _EMPTY_LAST,
    ("linalg.matrix_rank.hermitian", "last"): _EMPTY_LAST,
}


# ----- samples and their batches -----------------------------------------------------------
def _is_seq(x):
    return isinstance(x, (list, tuple)) and not isinstance(x, torch.Size) \
        and not hasattr(x, "_fields")


def _tensors(x):
    """The tensors of a sample's argument tree, in a fixed order."""
    if isinstance(x, torch.Tensor):
        return [x]
    if _is_seq(x):
        return [t for v in x for t in _tensors(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _tensors(v)]
    return []


def _fill(x, it, cls):
    """The tree ``x`` with each tensor of class ``cls`` replaced by the next of ``it``."""
    if isinstance(x, cls):
        return next(it)
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields") \
            and not isinstance(x, torch.Size):
        return type(x)(_fill(v, it, cls) for v in x)
    if isinstance(x, dict):
        return {k: _fill(v, it, cls) for k, v in x.items()}
    return x


def _skeleton(x):
    """The tree with tensors replaced by (shape, dtype): equal for matching variants."""
    if isinstance(x, torch.Tensor):
        return ("T", tuple(x.shape), x.dtype)
    if _is_seq(x):
        return tuple(_skeleton(v) for v in x)
    if isinstance(x, dict):
        return tuple((k, _skeleton(v)) for k, v in x.items())
    return repr(x)


def _draw(op, seed):
    """The first samples under ``seed``: straight from the op's generator, as
    ``op.sample_inputs`` would reseed torch before each sample (the three variants would
    be one) and search the call stack for a test function (slow under pytest)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(seed)
        out = []
        for s in op.sample_inputs_func(op, "cpu", torch.float32, False):
            out.append(s)
            if len(out) == SAMPLES:
                break
        return out


class Sample:
    """One OpInfo sample and its variants: ``tree`` is ``(input, args, kwargs)`` of the
    first; ``variants[k]`` lists the tensors of the k-th (in :func:`_tensors` order)."""

    def __init__(self, op, index, drawn):
        s = drawn[0][index]
        self.op, self.index, self.sample = op, index, s
        self.tree = (s.input, tuple(s.args), dict(s.kwargs))
        base = _tensors(self.tree)
        self.variants = [base]
        for d in drawn[1:]:
            other = d[index] if index < len(d) else None
            t = other and (other.input, tuple(other.args), dict(other.kwargs))
            ok = t is not None and _skeleton(t) == _skeleton(self.tree)
            self.variants.append([v.detach().clone() for v in _tensors(t)] if ok else base)
        self.count = len(base)

    def usable(self):
        return self.count > 0 and all(t.layout == torch.strided for t in self.variants[0])

    def fns(self):
        """``(torch_f, ember_f)``: the op as a function of the sample's tensors."""
        op, tree = self.op, self.tree
        etree = _to_ember(tree)
        efn = _ember_fn(op)

        def tf(*ts):
            i, a, k = _fill(tree, iter(ts), torch.Tensor)
            return op.op(i, *a, **k)

        def ef(*ts):
            i, a, k = _fill(etree, iter(ts), ember.Tensor)
            return efn(i, *a, **k)
        return tf, ef

    def stacked(self, j, dim):
        return torch.stack([v[j] for v in self.variants], dim)

    def nested(self, j):
        """``(2, 3, ...)``: entry ``[q][p]`` is variant ``(p + q) % 3``."""
        rows = [torch.stack([self.variants[(p + q) % len(self.variants)][j]
                             for p in range(B)]) for q in range(2)]
        return torch.stack(rows)


def _case_inputs(smp, case):
    """``(tensors, in_dims, out_dims, wrap)`` of one case; wrap turns the torch function
    (or ember's, with its vmap) into the function the case calls."""
    n = smp.count
    if case == "dim0":
        return [smp.stacked(j, 0) for j in range(n)], 0, 0
    if case == "last":
        return [smp.stacked(j, -1) for j in range(n)], -1, -1
    if case == "first":
        return ([smp.stacked(0, 0)] + list(smp.variants[0][1:]),
                (0,) + (None,) * (n - 1), 0)
    if case == "nested":
        return [smp.nested(j) for j in range(n)], (1, 0), 0
    if case == "grad":
        return [smp.stacked(j, 0) for j in range(n)], 0, 0
    raise ValueError(case)


def _summed(f):
    def g(*ts):
        outs = [o for o in _flat(f(*ts)) if hasattr(o, "is_floating_point")
                and o.is_floating_point()]
        return sum(o.sum() for o in outs)
    return g


def _run_case(lib, f, case, tensors, in_dims, out_dims):
    fx = torch.func if lib is torch else efunc
    if case == "nested":
        return fx.vmap(fx.vmap(f, in_dims=in_dims[1]), in_dims=in_dims[0])(*tensors)
    if case == "grad":
        return fx.vmap(fx.grad(_summed(f)), in_dims=in_dims)(*tensors)
    return fx.vmap(f, in_dims=in_dims, out_dims=out_dims)(*tensors)


def _fell_back(caught):
    return any("falling back to a per-sample loop" in str(w.message) for w in caught)


class TorchRefuses(AssertionError):
    """torch.func refused a case that ember computed (ember's result then matched the
    per-sample loop of torch's op, or no such loop exists)."""


def _select(t, d, b):
    return t if d is None else t.select(d, b)


def _loop_reference(f, case, tensors, in_dims, out_dims):
    """What torch's op gives sample by sample (the meaning of a vmap torch refuses)."""
    n = len(tensors)
    if case == "nested":
        return _stack_tree([_stack_tree([f(*[_select(_select(t, 1, p), 0, q) for t in tensors])
                                         for q in range(2)], 0) for p in range(B)], 0)
    dims = (in_dims,) * n if isinstance(in_dims, int) else in_dims
    outs = []
    for b in range(B):
        args = [_select(t, d, b) for t, d in zip(tensors, dims)]
        if case == "grad":
            x = args[0].detach().requires_grad_(True)
            y = _summed(f)(x, *args[1:])
            outs.append(torch.autograd.grad(y, x, allow_unused=True, materialize_grads=True)[0])
        else:
            outs.append(f(*args))
    return _stack_tree(outs, out_dims)


def _stack_tree(outs, dim):
    if isinstance(outs[0], (tuple, list)):
        return type(outs[0])(_stack_tree([o[i] for o in outs], dim) for i in range(len(outs[0])))
    return torch.stack(outs, dim)


def _processed(smp, case, out):
    """Eigen- and singular vectors are defined up to sign or phase: compared after
    OpInfo's own ``output_process_fn_grad`` (as test_opinfo.py does), sample by sample."""
    if smp.op.name not in SIGN_FREE or case in ("grad", "jacrev", "jacfwd"):
        return out
    flat = _flat(out)
    if case == "last":
        flat = [o.movedim(-1, 0) for o in flat]
    elif case == "nested":
        flat = [o.flatten(0, 1) for o in flat]
    fn = smp.sample.output_process_fn_grad
    per = [_flat(fn(tuple(o[b] for o in flat))) for b in range(flat[0].shape[0])]
    lib = torch if isinstance(flat[0], torch.Tensor) else ember
    return [lib.stack([p[i] for p in per]) for i in range(len(per[0]))]


def check_case(smp, case):
    """Run one case in both libraries: ``(status, fell_back)`` with status ``"ok"`` or
    ``"skip"``; a difference raises AssertionError (:class:`TorchRefuses` where torch
    refused and ember computed)."""
    op = smp.op
    if case == "first" and smp.count < 2:
        return "skip", False
    if case == "grad":
        first = smp.variants[0][0]
        if not (op.supports_autograd and first.is_floating_point()):
            return "skip", False
    tf, ef = smp.fns()
    if case == "grad" and op.name in SIGN_FREE:
        # the sum of eigenvectors depends on their signs: differentiate what is determined
        post = smp.sample.output_process_fn_grad
        tf, ef = (lambda f: lambda *ts: post(f(*ts)))(tf), (lambda f: lambda *ts: post(f(*ts)))(ef)
    jac = case in ("jacrev", "jacfwd")
    if jac:
        tensors = list(smp.variants[0])
    else:
        tensors, in_dims, out_dims = _case_inputs(smp, case)
    etensors = [_to_ember(t) for t in tensors]
    where = f"{_key(op)} sample {smp.index} {case}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            if jac:
                t_run = getattr(torch.func, case)(_first_out(tf))(*tensors)
            else:
                t_run = _run_case(torch, tf, case, tensors, in_dims, out_dims)
            t_err = None
        except Exception as e:  # noqa: BLE001 - then ember must refuse too
            t_err = e
    saved, _vmap._warned = _vmap._warned, set()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                if jac:
                    e_run = getattr(efunc, case)(_first_out(ef))(*etensors)
                else:
                    e_run = _run_case(ember, ef, case, etensors, in_dims, out_dims)
                e_err = None
            except Exception as e:  # noqa: BLE001 - compared with torch's outcome
                e_err = e
    finally:
        _vmap._warned = saved
    fell = _fell_back(caught)
    refused = None
    if t_err is not None:
        if e_err is not None:
            return "ok", fell
        refused = f"{where}: torch refused ({type(t_err).__name__}: " \
            f"{str(t_err).strip()[:150]}), ember computed"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t_run = _loop_reference(tf, case, tensors, in_dims, out_dims)
        except Exception as e:  # noqa: BLE001 - no per-sample meaning either
            raise TorchRefuses(refused + f"; torch's per-sample loop fails too "
                               f"({type(e).__name__})") from None
    elif e_err is not None:
        raise AssertionError(f"{where}: ember raised {type(e_err).__name__}: "
                             f"{str(e_err)[:200]}") from e_err
    t_flat, e_flat = _flat(_processed(smp, case, t_run)), _flat(_processed(smp, case, e_run))
    assert len(e_flat) == len(t_flat), f"{where}: {len(e_flat)} outputs != {len(t_flat)}"
    random = RANDOM_SAMPLE.get(op.name, lambda s: False)(smp.sample)
    for j, (a, b) in enumerate(zip(e_flat, t_flat)):
        if random and isinstance(b, torch.Tensor):
            a, b = ember.zeros_like(a), torch.zeros_like(b)
        if case in ("grad", "jacrev", "jacfwd") and isinstance(b, torch.Tensor) \
                and b.is_floating_point():
            _compare_derivative(a, b, f"{where} output {j}")
        else:
            _compare(a, b, _key(op), f"{where} output {j}")
    if refused:
        raise TorchRefuses(refused + " (the same as torch's per-sample loop)")
    return "ok", fell


def _compare_derivative(e, t, what):
    """Float32 derivatives accumulate rounding over long chains (ctc_loss's recursion,
    matrix_exp's series), and ember's kernels often run them in float64: a batch dim in
    the wrong place is an error of the size of the values, far above these tolerances."""
    assert isinstance(e, ember.Tensor), f"{what}: {type(e).__name__}, not a Tensor"
    assert tuple(e.shape) == tuple(t.shape), f"{what}: shape {tuple(e.shape)} != " \
        f"{tuple(t.shape)}"
    assert e.dtype.name == str(t.dtype).split(".")[1], f"{what}: dtype {e.dtype} != {t.dtype}"
    ta = t.detach().numpy(force=True)
    finite = np.abs(ta[np.isfinite(ta)])
    scale = max(1.0, float(finite.max())) if finite.size else 1.0
    np.testing.assert_allclose(e.detach().numpy(), ta, rtol=1e-3, atol=1e-4 * scale,
                               equal_nan=True, err_msg=what)


def _first_out(f):
    def g(*ts):
        out = f(*ts)
        return _flat(out)[0] if isinstance(out, (tuple, list)) else out
    return g


def samples_of(op):
    drawn = [_draw(op, seed) for seed in range(B)]
    out = [Sample(op, i, drawn) for i in range(len(drawn[0]))]
    return [s for s in out if s.usable()]


def cases_of(op):
    cases = CASES + (("jacrev", "jacfwd") if op.name in JAC_OPS else ())
    return cases


def check_op(op):
    """Every case of every sample of ``op``: ``{case: (error or None, fell_back)}``."""
    res = {}
    smps = samples_of(op)
    for case in cases_of(op):
        err, fell = None, False
        ran = False
        for smp in smps[:1] if case in ("jacrev", "jacfwd") else smps:
            try:
                status, f = check_case(smp, case)
            except AssertionError as e:
                err = err or str(e).strip()
                continue
            fell = fell or f
            ran = ran or status == "ok"
        if ran or err:
            res[case] = (err, fell)
    return res


OPS = [op for op in PRESENT if torch.float32 in op.supported_dtypes("cpu")]


@pytest.mark.parametrize("op", OPS, ids=_key)
def test_vmap_opinfo(op):
    key = _key(op)
    res = check_op(op)
    fell = sorted(c for c, (_, f) in res.items() if f)
    if fell:
        warnings.warn(f"vmap of {key} fell back to the per-sample loop in: "
                      f"{', '.join(fell)}", stacklevel=1)
    wrong = {c: e for c, (e, _) in res.items() if e and (key, c) not in KNOWN}
    assert not wrong, "\n".join(wrong.values())
    fixed = [c for (k, c) in KNOWN if k == key and (c not in res or res[c][0] is None)]
    assert not fixed, f"{key}: {fixed} now agree with torch: remove them from KNOWN"


def test_known_names_live_ops():
    keys = {_key(op) for op in OPS}
    assert all(k in keys and c in CASES + ("jacrev", "jacfwd") for k, c in KNOWN)


def _report():
    import time
    t0 = time.time()
    cases = diffs = 0
    fallbacks, failures = {}, {}
    for op in OPS:
        t = time.time()
        res = check_op(op)
        for c, (e, f) in res.items():
            cases += 1
            if f:
                fallbacks.setdefault(_key(op), []).append(c)
            if e:
                diffs += 1
                failures[(_key(op), c)] = e
        if time.time() - t > 1:
            print(f"slow: {_key(op)} {time.time() - t:.1f}s")
    print(f"ops {len(OPS)}, cases {cases}, differing {diffs}, ops falling back "
          f"{len(fallbacks)}, {time.time() - t0:.0f}s")
    for k, v in sorted(fallbacks.items()):
        print(f"FALLBACK {k}: {', '.join(v)}")
    for k, v in sorted(failures.items()):
        print(f"DIFF {k}: {v[:400]}")


if __name__ == "__main__":
    _report()
