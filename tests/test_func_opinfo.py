"""ember.func's composed transforms over PyTorch's OpInfo table, against real torch.func.

For every differentiable op of test_opinfo.py's selection (``PRESENT``) that runs in
float64, its first small samples (``SAMPLES``, at most ``MAX_NUMEL`` elements in and out)
are seen as a function of their floating tensor arguments (the other arguments stay
fixed) returning the op's floating outputs. ember.func and torch.func are run on the same
values in these cases:

* ``jacrev`` / ``jacfwd``: the Jacobian w.r.t. every floating argument;
* ``hessian``: of a scalar wrapper, the sum of each output times a fixed random weight;
* ``vjp`` / ``jvp`` / ``linearize``: with fixed random cotangents / tangents (the primal
  output is compared too);
* ``vmap_jacrev`` / ``vmap_grad``: ``vmap(jacrev(f))`` and ``vmap(grad(scalar))`` over a
  batch of two variants of the sample (the same shapes drawn under another seed).

Values, shapes and dtypes are compared. Where torch.func refuses (an op without a
batching or forward rule) ember must refuse too or agree with what torch's plain autograd
gives (``torch.autograd.functional`` and per-sample loops): that is no difference, and the
script mode counts it. What still differs is listed exactly in :data:`KNOWN` with the
reason; an entry that starts to agree fails the test so it leaves.

CI runs a fixed sample of the ops (every ``STRIDE``-th: 45 s of CPU here);
``python tests/test_func_opinfo.py`` runs them all and prints the figures, and
``FUNC_OPINFO_STRIDE=1`` makes pytest run them all too.
"""
import os
import warnings

import numpy as np
import pytest
import torch
from test_opinfo import PRESENT, RANDOM_SAMPLE, SIGN_FREE, _ember_fn, _flat, _key, _to_ember
from test_vmap_opinfo import _is_seq, _skeleton, _tensors

import ember
from ember import func as efunc

SAMPLES = int(os.environ.get("FUNC_OPINFO_SAMPLES", 2))  # per op
STRIDE = int(os.environ.get("FUNC_OPINFO_STRIDE", 3))  # CI runs every STRIDE-th op
MAX_NUMEL = 48  # elements of a sample's floating inputs, and of its outputs
SCANNED = 8  # samples looked at to find SAMPLES small ones
CASES = ("jacrev", "jacfwd", "hessian", "vjp", "jvp", "linearize", "vmap_jacrev",
         "vmap_grad")

_PLAIN = "; ember equals torch's plain autograd (and central differences)"
_CHOL = ("torch.func has no forward rule for torch.cholesky; ember's is linalg.cholesky's "
         "(torch.func's own), which takes a non-symmetric tangent as it is, while the "
         "reference from torch's backward symmetrizes it")
_CHUNKED = ("torch's chunked kernel is an autograd.Function without a jvp: torch.func gives "
            "zero tangents silently" + _PLAIN)
_SCATTER = ("torch is wrong: its backward of as_strided_scatter passes the gradient to the "
            "input element the source overwrote (plain autograd too); ember's 0 is the "
            "derivative")
_LAYER = ("torch.func is off: its forward-over-reverse of layer_norm's weight gradient "
          "(Hessian block weight x input)" + _PLAIN)
_BN = ("ember's jacrev inside jacfwd lifts the input to the basis batch, and batch norm "
       "refuses (naming it) to update unbatched running stats from a batched input; "
       "torch.func keeps the primal unbatched")
_TRI = ("torch is wrong: its forward rule for triangular_solve reads the triangle of A "
        "that the solve ignores (a finite difference there is 0)" + _PLAIN)
_PAD = ("torch's forward rule ignores padding_idx while its backward honours it "
        "(torch.func's jacfwd != jacrev); ember's jvp agrees with the backward")
_EIGH = ("the sample's matrix is not symmetric and eigh reads one triangle: torch.func's "
         "forward rule takes the whole tangent, its backward symmetrizes" + _PLAIN)
_LAE = ("torch.func's forward rule gives NaN where both operands are -inf (fully masked); "
        "ember's 0 equals torch's plain autograd")

# (op key, case) -> why ember still differs from torch.func there
KNOWN = {
    ("addr", "hessian"): "torch.func is off: with NaN vectors and alpha = beta = 0 its "
                         "forward-over-reverse multiplies the zero factor by NaN" + _PLAIN,
    ("cholesky", "jacfwd"): _CHOL,
    ("cholesky", "hessian"): _CHOL,
    ("cholesky", "jvp"): _CHOL,
    ("cholesky", "linearize"): _CHOL,
    ("cholesky_inverse", "jacfwd"): "torch.func's forward formula is 2e-6 (relative) off "
                                    "on sample 6's ill-conditioned factor" + _PLAIN,
    ("cholesky_inverse", "hessian"): "torch.func's forward formula is 2e-6 (relative) off "
                                     "on sample 6's ill-conditioned factor" + _PLAIN,
    ("cholesky_inverse", "jvp"): "torch.func's forward formula is 2e-6 (relative) off on "
                                 "sample 6's ill-conditioned factor" + _PLAIN,
    ("cholesky_inverse", "linearize"): "torch.func's forward formula is 2e-6 (relative) "
                                       "off on sample 6's ill-conditioned factor" + _PLAIN,
    ("nn.functional.linear_cross_entropy.chunked", "jacfwd"): _CHUNKED,
    ("nn.functional.linear_cross_entropy.chunked", "hessian"): _CHUNKED,
    ("nn.functional.linear_cross_entropy.chunked", "jvp"): _CHUNKED,
    ("nn.functional.linear_cross_entropy.chunked", "linearize"): _CHUNKED,
    ("nn.functional.linear_cross_entropy.chunked_none", "jacfwd"): _CHUNKED,
    ("nn.functional.linear_cross_entropy.chunked_none", "hessian"): _CHUNKED,
    ("nn.functional.linear_cross_entropy.chunked_none", "jvp"): _CHUNKED,
    ("nn.functional.linear_cross_entropy.chunked_none", "linearize"): _CHUNKED,
    ("as_strided_scatter", "jacrev"): _SCATTER,
    ("as_strided_scatter", "jacfwd"): _SCATTER,
    ("as_strided_scatter", "vjp"): _SCATTER,
    ("native_layer_norm", "hessian"): _LAYER,
    ("nn.functional.layer_norm", "hessian"): _LAYER,
    ("native_batch_norm", "hessian"): _BN,
    ("nn.functional.batch_norm", "hessian"): _BN,
    ("nn.functional.instance_norm", "hessian"): _BN,
    ("triangular_solve", "jacfwd"): _TRI,
    ("triangular_solve", "jvp"): _TRI,
    ("triangular_solve", "linearize"): _TRI,
    ("nn.functional.embedding", "jacfwd"): _PAD,
    ("nn.functional.embedding", "jvp"): _PAD,
    ("nn.functional.embedding", "linearize"): _PAD,
    ("linalg.eigh", "jacfwd"): _EIGH,
    ("linalg.eigh", "hessian"): _EIGH,
    ("linalg.eigh", "jvp"): _EIGH,
    ("linalg.eigh", "linearize"): _EIGH,
    ("linalg.eigvalsh", "hessian"): _EIGH,
    ("linalg.householder_product", "linearize"): "torch.func.linearize loses the tangent "
                                                 "(zeros; its jvp is right)" + _PLAIN,
    ("masked.logaddexp", "jacfwd"): _LAE,
    ("masked.logaddexp", "jvp"): _LAE,
    ("masked.logaddexp", "linearize"): _LAE,
}


# ----- samples ------------------------------------------------------------------------------
def _tensors_e(x):
    if isinstance(x, ember.Tensor):
        return [x]
    if _is_seq(x):
        return [t for v in x for t in _tensors_e(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _tensors_e(v)]
    return []


def _fill(x, it, pick):
    """The tree ``x`` with each leaf that ``pick`` selects replaced by the next of ``it``."""
    if pick(x):
        return next(it)
    if _is_seq(x):
        return type(x)(_fill(v, it, pick) for v in x)
    if isinstance(x, dict):
        return {k: _fill(v, it, pick) for k, v in x.items()}
    return x


def _is_float(x):
    return isinstance(x, torch.Tensor) and x.dtype == torch.float64


def _draw(op, seed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(seed)
        out = []
        for s in op.sample_inputs_func(op, "cpu", torch.float64, False):
            out.append(s)
            if len(out) == SCANNED:
                break
        return out


def _float_outs(out):
    return tuple(o for o in _flat(out) if hasattr(o, "is_floating_point")
                 and o.is_floating_point())


class Sample:
    """One OpInfo sample as a function of its floating tensors, in both libraries."""

    def __init__(self, op, index, s, other):
        self.op, self.index, self.sample = op, index, s
        self.tree = (s.input, tuple(s.args), dict(s.kwargs))
        floats = [t for t in _tensors(self.tree) if _is_float(t)]
        # the arguments torch differentiates (not a batch norm's running statistics, not
        # a loss's class weights): the others stay fixed
        self.wrt = [id(t) for t in floats if self._differentiable(t)]
        self.xs = [t.detach().clone() for t in floats if id(t) in self.wrt]
        self.etree = _to_ember(self.tree)
        self.ewrt = [id(e) for t, e in zip(_tensors(self.tree), _tensors_e(self.etree))
                     if id(t) in self.wrt]
        self.efn = _ember_fn(op)
        alt = other and (other.input, tuple(other.args), dict(other.kwargs))
        same = alt is not None and _skeleton(alt) == _skeleton(self.tree)
        # the second sample of a vmap batch: the same shapes under another seed
        self.xs2 = [b.detach().clone() for a, b in zip(_tensors(self.tree), _tensors(alt))
                    if id(a) in self.wrt] if same else [x + 0 for x in self.xs]
        rng = np.random.default_rng(index)
        self.outs = None
        self.weights = self.tangents = self.cotangents = None
        self.rng = rng

    def _differentiable(self, t):
        i, a, k = _fill(self.tree, iter([t.detach().requires_grad_(True)]),
                        lambda v: v is t)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                self.op.op(i, *a, **k)
            except Exception:  # noqa: BLE001 - torch refuses to differentiate it
                return False
        return True

    def usable(self):
        if not self.xs or any(t.layout != torch.strided for t in _tensors(self.tree)):
            return False
        # empty tensors: torch.func's hessian and jacfwd fail on them (an empty basis)
        if sum(x.numel() for x in self.xs) > MAX_NUMEL or min(x.numel() for x in self.xs) == 0:
            return False
        if RANDOM_SAMPLE.get(self.op.name, lambda s: False)(self.sample):
            return False
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                outs = self.tf(*self.xs)
            except Exception:  # noqa: BLE001 - torch refuses its own sample
                return False
        if not outs or sum(o.numel() for o in outs) > MAX_NUMEL \
                or min(o.numel() for o in outs) == 0 \
                or any(o.layout != torch.strided for o in outs):
            return False
        rng = self.rng
        self.outs = outs
        self.weights = [torch.tensor(rng.standard_normal(tuple(o.shape))) for o in outs]
        self.cotangents = [torch.tensor(rng.standard_normal(tuple(o.shape))) for o in outs]
        self.tangents = [torch.tensor(rng.standard_normal(tuple(x.shape))) for x in self.xs]
        return True

    def _post(self, out):
        if self.op.name in SIGN_FREE:  # defined up to sign: what is determined
            out = self.sample.output_process_fn_grad(out)
        return out

    def tf(self, *xs):
        i, a, k = _fill(self.tree, iter(xs), lambda v: id(v) in self.wrt)
        return _float_outs(self._post(self.op.op(i, *a, **k)))

    def ef(self, *xs):
        i, a, k = _fill(self.etree, iter(xs), lambda v: id(v) in self.ewrt)
        return _float_outs(self._post(self.efn(i, *a, **k)))

    def scalar(self, lib):
        f = self.tf if lib is torch else self.ef
        ws = self.weights if lib is torch else [_to_ember(w) for w in self.weights]

        def s(*xs):
            return sum((o * w).sum() for o, w in zip(f(*xs), ws))
        return s


def samples_of(op):
    drawn, other = _draw(op, 0), _draw(op, 1)
    out = []
    for i, s in enumerate(drawn):
        smp = Sample(op, i, s, other[i] if i < len(other) else None)
        if smp.usable():
            out.append(smp)
            if len(out) == SAMPLES:
                break
    return out


# ----- the cases ----------------------------------------------------------------------------
def _run(lib, smp, case):
    """The case's result in ``lib`` (torch or ember) through its torch.func."""
    fx = torch.func if lib is torch else efunc
    conv = (lambda v: v) if lib is torch else _to_ember
    f = smp.tf if lib is torch else smp.ef
    xs = [conv(x) for x in smp.xs]
    nums = tuple(range(len(xs)))
    if case in ("jacrev", "jacfwd"):
        return getattr(fx, case)(f, argnums=nums)(*xs)
    if case == "hessian":
        return fx.hessian(smp.scalar(lib), argnums=nums)(*xs)
    if case == "vjp":
        out, fn = fx.vjp(f, *xs)
        return out, fn(tuple(conv(c) for c in smp.cotangents))
    if case == "jvp":
        return fx.jvp(f, tuple(xs), tuple(conv(t) for t in smp.tangents))
    if case == "linearize":
        out, fn = fx.linearize(f, *xs)
        return out, fn(*[conv(t) for t in smp.tangents])
    batch = [lib.stack([conv(a), conv(b)]) for a, b in zip(smp.xs, smp.xs2)]
    if case == "vmap_jacrev":
        return fx.vmap(fx.jacrev(f, argnums=nums))(*batch)
    if case == "vmap_grad":
        return fx.vmap(fx.grad(smp.scalar(lib), argnums=nums))(*batch)
    raise ValueError(case)


def _jvp_by_jacobian(f, xs, tangents):
    """``(f(xs), J @ tangents)`` from the reverse-mode Jacobian (first derivatives only)."""
    jac = torch.autograd.functional.jacobian(f, xs)
    outs = f(*xs)
    tans = tuple(sum(torch.tensordot(jac[i][j], t, dims=t.dim()) for j, t in
                     enumerate(tangents)) for i in range(len(outs)))
    return outs, tans


def _hessian_by_differences(s, xs, h=1e-6):
    """The Hessian of ``s`` as central differences of torch's first derivatives: a
    reference where torch's backward has no derivative of its own."""
    def grads(ys):
        ys = [y.detach().requires_grad_(True) for y in ys]
        return torch.autograd.grad(s(*ys), ys, allow_unused=True, materialize_grads=True)
    rows = []
    for j, x in enumerate(xs):
        cols = []
        for k in range(x.numel()):
            step = torch.zeros(x.numel(), dtype=x.dtype)
            step[k] = h
            up = grads([y + step.view(x.shape) if q == j else y for q, y in enumerate(xs)])
            dn = grads([y - step.view(x.shape) if q == j else y for q, y in enumerate(xs)])
            cols.append([(a - b) / (2 * h) for a, b in zip(up, dn)])
        # H[i][j] has shape xs[i].shape + xs[j].shape
        rows.append([torch.stack([c[i] for c in cols], -1).reshape(xs[i].shape + x.shape)
                     for i in range(len(xs))])
    return tuple(tuple(rows[j][i] for j in range(len(xs))) for i in range(len(xs)))


def _reference(smp, case):
    """What torch's plain autograd gives for the case (where torch.func refuses):
    ``(result, approximate)``."""
    taf = torch.autograd.functional
    f, xs = smp.tf, tuple(smp.xs)
    if case in ("jacrev", "jacfwd"):
        return taf.jacobian(f, xs), False
    if case == "hessian":
        try:
            return taf.hessian(smp.scalar(torch), xs), False
        except Exception:  # noqa: BLE001 - a backward without a derivative of its own
            return _hessian_by_differences(smp.scalar(torch), xs), True
    if case == "vjp":
        return taf.vjp(f, xs, tuple(smp.cotangents)), False
    if case in ("jvp", "linearize"):
        return _jvp_by_jacobian(f, xs, tuple(smp.tangents)), False
    per = []
    for ys in (smp.xs, smp.xs2):
        if case == "vmap_jacrev":
            per.append(_flat(taf.jacobian(f, tuple(ys))))
        else:
            per.append(_flat(taf.jacobian(smp.scalar(torch), tuple(ys))))
    return [torch.stack([p[i] for p in per]) for i in range(len(per[0]))], False


def _compare(e, t, what, approximate=False):
    assert isinstance(e, ember.Tensor), f"{what}: {type(e).__name__}, not a Tensor"
    assert tuple(e.shape) == tuple(t.shape), f"{what}: shape {tuple(e.shape)} != " \
        f"{tuple(t.shape)}"
    assert e.dtype.name == str(t.dtype).split(".")[1], f"{what}: dtype {e.dtype} != {t.dtype}"
    if t.dtype in (torch.bfloat16, torch.float16):  # a cast op's output: its values
        e, t = e.double(), t.double()
    ta = t.detach().numpy(force=True)
    ea = e.detach().numpy()
    tol = 1e-4 if approximate else 1e-6  # central differences: about 1e-8 / h**2 relative
    np.testing.assert_allclose(ea, ta, rtol=tol, atol=tol * 1e-2, equal_nan=True,
                               err_msg=what)


def _compare_all(e_run, t_run, where, approximate=False):
    t_flat, e_flat = _flat(t_run), _flat(e_run)
    assert len(e_flat) == len(t_flat), f"{where}: {len(e_flat)} outputs != {len(t_flat)}"
    for j, (a, b) in enumerate(zip(e_flat, t_flat)):
        _compare(a, b, f"{where} output {j}", approximate)


def _judge(smp, case, e_run):
    """Who torch's plain autograd agrees with, where ember and torch.func differ."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref, approximate = _reference(smp, case)
        _compare_all(e_run, ref, "", approximate)
    except AssertionError:
        return "(ember differs from torch's plain autograd too)"
    except Exception as e:  # noqa: BLE001 - no reference
        return f"(no plain-autograd reference: {type(e).__name__})"
    return "(ember equals torch's plain autograd: torch.func is off)"


class TorchRefuses(Exception):
    """torch.func refused and ember computed what torch's plain autograd gives."""


def check_case(smp, case):
    """Run one case in both libraries; a difference raises AssertionError, a refusal by
    torch that ember computes correctly raises :class:`TorchRefuses`."""
    where = f"{_key(smp.op)} sample {smp.index} {case}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            t_run, t_err = _run(torch, smp, case), None
        except Exception as e:  # noqa: BLE001 - then ember must refuse or be right
            t_run, t_err = None, e
        try:
            e_run, e_err = _run(ember, smp, case), None
        except Exception as e:  # noqa: BLE001 - compared with torch's outcome
            e_run, e_err = None, e
    if t_err is not None:
        if e_err is not None:
            return
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t_run, approximate = _reference(smp, case)
        except Exception:  # noqa: BLE001 - no meaning to compare with: refusing is right
            raise AssertionError(f"{where}: torch refused ({type(t_err).__name__}: "
                                 f"{str(t_err).strip()[:120]}) and its autograd fails "
                                 "too; ember computed") from None
    elif e_err is not None:
        raise AssertionError(f"{where}: ember raised {type(e_err).__name__}: "
                             f"{str(e_err)[:200]}") from e_err
    else:
        approximate = False
    try:
        _compare_all(e_run, t_run, where, approximate)
    except AssertionError as e:
        if t_err is None:
            e.args = (f"{e.args[0]}\n{_judge(smp, case, e_run)}",)
        raise
    if t_err is not None:
        raise TorchRefuses(f"{where}: torch refused ({type(t_err).__name__}: "
                           f"{str(t_err).strip()[:120]}); ember equals torch's autograd")


def check_op(op):
    """``{case: error or None}`` over the op's samples, and the cases torch refused."""
    res, refused = {}, set()
    for smp in samples_of(op):
        for case in CASES:
            try:
                check_case(smp, case)
            except TorchRefuses:
                refused.add(case)
            except Exception as e:  # noqa: BLE001 - a difference, or the harness's own error
                res[case] = res.get(case) or f"{type(e).__name__}: {e}".strip()
                continue
            res.setdefault(case, None)
    return res, refused


def _differentiable(op):
    return op.supports_autograd and torch.float64 in op.supported_dtypes("cpu")


OPS = [op for op in PRESENT if _differentiable(op)]
SAMPLED = OPS[::STRIDE]


@pytest.mark.parametrize("op", SAMPLED, ids=_key)
def test_func_opinfo(op):
    key = _key(op)
    res, _ = check_op(op)
    wrong = {c: e for c, e in res.items() if e and (key, c) not in KNOWN}
    assert not wrong, "\n".join(wrong.values())
    fixed = [c for (k, c) in KNOWN if k == key and not res.get(c)]
    assert not fixed, f"{key}: {fixed} now agree with torch.func: remove them from KNOWN"


def test_known_names_live_ops():
    keys = {_key(op) for op in OPS}
    bad = [(k, c) for k, c in KNOWN if k not in keys or c not in CASES]
    assert not bad, bad


def test_known_is_exact_on_all_ops():
    """The KNOWN entries of ops outside CI's sample still differ (so none goes stale)."""
    sampled = {_key(op) for op in SAMPLED}
    for op in OPS:
        key = _key(op)
        cases = [c for (k, c) in KNOWN if k == key]
        if key in sampled or not cases:
            continue
        res, _ = check_op(op)
        assert all(res.get(c) for c in cases), f"{key}: {cases} now agree: remove from KNOWN"


def _report(keys=()):
    """Every op (or those named by ``keys``): counts, torch's refusals, differences."""
    import time
    t0 = time.time()
    ran = diffs = 0
    failures, refused_by_torch, slow = {}, {}, []
    for op in OPS:
        if keys and _key(op) not in keys:
            continue
        t = time.time()
        res, refused = check_op(op)
        for c, e in res.items():
            ran += 1
            if e:
                diffs += 1
                failures[(_key(op), c)] = e
                lines = e.splitlines()
                print(f"{'KNOWN' if (_key(op), c) in KNOWN else 'DIFF'} {(_key(op), c)}: "
                      f"{' | '.join(lines[:8])[:400]} | {lines[-1][:150]}", flush=True)
        if refused:
            refused_by_torch[_key(op)] = sorted(refused)
        if time.time() - t > 1:
            slow.append(f"{_key(op)} {time.time() - t:.1f}s")
    print(f"ops {len(OPS)} (CI samples {len(SAMPLED)}), cases run {ran}, differing {diffs} "
          f"(known {len(KNOWN)}), ops where torch.func refuses and ember equals torch's "
          f"autograd {len(refused_by_torch)}, {time.time() - t0:.0f}s")
    for s in slow:
        print("SLOW", s)
    for k, v in sorted(refused_by_torch.items()):
        print(f"TORCH REFUSES {k}: {', '.join(v)}")
    stale = [k for k in KNOWN if k not in failures and (not keys or k[0] in keys)]
    for k in stale:
        print(f"STALE {k}")


if __name__ == "__main__":
    import sys
    _report(sys.argv[1:])


# ----- the fixes the sweep found, one small case each ----------------------------------------
def _pair(a, dtype="float64"):
    return torch.tensor(a, dtype=getattr(torch, dtype)), ember.tensor(a, dtype=getattr(ember,
                                                                                          dtype))


def _same(e, t, rtol=1e-12):
    for a, b in zip(_flat(e), _flat(t)):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=rtol,
                                   atol=1e-14)


def test_aminmax_tie_gradient_is_float64():
    """Ties share the gradient in the input's precision (it was divided in float32:
    0.3333333432674408 for three float64 ties)."""
    t, e = _pair([1.0, 1.0, 1.0, 2.0])
    for lib, x in ((torch, t), (ember, e)):
        x.requires_grad_(True)
        lib.aminmax(x).min.backward()
    assert e.grad.tolist() == t.grad.tolist()


def test_aminmax_of_0d_samples_under_vmap():
    """vmap(grad) of aminmax over 0-d samples: each sample is its own tie (the batch of two
    counted as two ties, halving the gradient)."""
    t, e = _pair([5.0, -2.0])
    for k in ({"dim": 0}, {}):
        _same(efunc.vmap(efunc.grad(lambda v, k=k: ember.aminmax(v, **k).min))(e),
              torch.func.vmap(torch.func.grad(lambda v, k=k: torch.aminmax(v, **k).min))(t))


@pytest.mark.parametrize("name", ["linalg.qr", "linalg.svdvals", "linalg.eigvalsh",
                                  "linalg.cond", "lu_factor"])
def test_jacfwd_of_ops_saving_outputs(name):
    """jacfwd (forward AD under vmap) of ops whose backward reads their outputs: the
    outputs were saved twice on the node, and the backward's unpacking failed."""
    a = np.random.default_rng(0).standard_normal((3, 3))
    t, e = _pair(a @ a.T + 3 * np.eye(3))

    def fn(lib):
        f = lib.linalg.lu_factor if name == "lu_factor" else \
            getattr(lib.linalg, name.split(".")[1])
        return lambda x: _flat(f(x))[0]
    _same(efunc.jacfwd(fn(ember))(e), torch.func.jacfwd(fn(torch))(t), rtol=1e-9)


@pytest.mark.parametrize("name", ["linalg.qr", "linalg.svdvals", "linalg.cond", "lu_factor"])
def test_hessian_of_ops_saving_outputs(name):
    """Forward-over-reverse through a backward that reads the op's saved outputs: they
    carry their tangents (a Hessian of zeros once the outputs were saved once)."""
    a = np.random.default_rng(0).standard_normal((3, 3))
    t, e = _pair(a @ a.T + 3 * np.eye(3))
    w = np.random.default_rng(1).standard_normal((3, 3))

    def fn(lib):
        f = lib.linalg.lu_factor if name == "lu_factor" else \
            getattr(lib.linalg, name.split(".")[1])

        def scalar(x):
            out = _flat(f(x))[0]
            return (out * lib.tensor(w.reshape(-1)[:out.numel()]).reshape(out.shape)).sum()
        return scalar
    _same(efunc.hessian(fn(ember))(e), torch.func.hessian(fn(torch))(t), rtol=1e-8)


def test_norm_of_order_0_has_a_zero_tangent():
    """A count of nonzeros: its tangent is zero (jvp raised a TypeError)."""
    t, e = _pair([[1.0, 0.0], [2.0, -3.0]])
    _same(efunc.jvp(lambda x: ember.norm(x, 0), (e,), (e,)),
          torch.func.jvp(lambda x: torch.norm(x, 0), (t,), (t,)))
    _same(efunc.jacfwd(lambda x: ember.linalg.vector_norm(x, 0, dim=1))(e),
          torch.func.jacfwd(lambda x: torch.linalg.vector_norm(x, 0, dim=1))(t))


@pytest.mark.parametrize("name", ["index_copy", "index_add", "index_fill"])
def test_index_writes_into_0d_samples(name):
    """index_copy/add/fill of 0-d tensors (one element along dim 0) under vmap and in
    jacrev's batched backward (the batch rule moved dim 0 past a missing sample dim)."""
    (tx, ex), (tv, ev) = _pair([1.5, -2.0]), _pair([3.0, 4.0])

    def fn(lib):
        i = lib.tensor([0])
        if name == "index_fill":
            return lambda a, b: lib.index_fill(a, 0, i, b)
        return lambda a, b: getattr(lib, name)(a, 0, i, b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # index_fill's batched value runs the exact loop
        _same(efunc.vmap(fn(ember))(ex, ev), torch.func.vmap(fn(torch))(tx, tv))
        _same(efunc.vmap(fn(ember), in_dims=(0, None))(ex, ev[0]),
              torch.func.vmap(fn(torch), in_dims=(0, None))(tx, tv[0]))
        _same(efunc.jacrev(fn(ember), argnums=(0, 1))(ex[0], ev[0]),
              torch.func.jacrev(fn(torch), argnums=(0, 1))(tx[0], tv[0]))


def test_second_derivative_through_abs_at_infinity():
    """A piecewise-linear backward's own derivative is zero at an infinite input (it was
    0 * inf = NaN: the Hessian of logaddexp against -inf, masked.logaddexp's)."""
    (tx, ex), (tb, eb) = _pair([1.0, 2.0]), _pair([-float("inf"), 0.5])
    _same(efunc.hessian(lambda x: ember.logaddexp(x, eb).sum())(ex),
          torch.func.hessian(lambda x: torch.logaddexp(x, tb).sum())(tx))
    ex = ember.tensor([float("inf"), -2.0], dtype=ember.float64, requires_grad=True)
    g, = ember.autograd.grad(ex.abs().sum(), ex, create_graph=True)
    assert ember.autograd.grad(g.sum(), ex)[0].tolist() == [0.0, 0.0]
