"""The variants of PyTorch's OpInfo ops, on non-contiguous and conjugate inputs, against torch.

test_opinfo.py calls each op of ``op_db`` through its function variant on fresh,
contiguous samples. PyTorch's TestCommon checks more per op, and each is a place where a
wrong value can hide; here, for every op ember runs (test_opinfo.py's ``PRESENT``), on
its first ``SAMPLES`` samples, against torch at the same inputs:

- ``method``: ``x.op(...)``; ``operator``: OpInfo's ``operator_variant`` (``x + y``);
- ``inplace``: ``x.op_(...)`` (float32, float64 and one integer dtype, where torch's
  cast rule refuses a float result in an integer tensor): the values written into
  ``x``, the returned object being ``x`` itself, torch's refusals refused;
- ``noncontiguous``: OpInfo's ``sample.noncontiguous()`` (every tensor interleaved in a
  larger storage) through the function variant; ``strided``: the input transposed in
  memory, every other element of a larger storage, and broadcast with stride 0 along its
  last dimension; ``noncontiguous_inplace``: the
  in-place variant on such an input, comparing the whole storage (the write goes
  through the view, and nowhere else);
- ``inplace_grad`` (float64): ``y = x * 1; y.op_(...)``, the gradients of every leaf and
  the ``grad_fn`` name of ``y``;
- ``saved_modified`` (float64): ``out = op(y)``, then ``y`` modified in place before the
  backward pass. Where torch raises its version-counter error ember must raise too or
  give the gradient of the unmodified graph (it saved something else, its output); it
  must never compute with the modified values;
- ``conj`` and ``neg_view`` (complex64): every complex tensor operand passed as
  ``t.conj()`` (torch's lazy conjugate view) or ``torch._neg_view(t)`` (ember:
  ``-t``), through the function variant;
- ``conj_inplace`` (complex64): the in-place variant applied to ``x.conj()``. torch
  writes the conjugate of the result into ``x``'s memory; ember's ``conj()`` computes a
  copy (docs/numerics.md), so ember refuses the write with ``NotImplementedError``
  naming ``conj()``: this part asserts that refusal wherever torch writes.

``KNOWN`` maps ``(op, part)`` to the reason it still differs; each is asserted to still
differ, so a fixed one must leave it. The default run samples every ``STRIDE``-th case
(``OPINFO_VARIANTS_ALL=1``: every case); ``python tests/test_opinfo_variants.py``
runs every case and prints the counts (docs/differences.md, "Variants, non-contiguous
and conjugate inputs over PyTorch's OpInfo table").
"""
import os
import warnings

import numpy as np
import pytest
import test_opinfo as T
import torch

import ember

SAMPLES = 2  # per op, dtype and part
STRIDE = int(os.environ.get("OPINFO_VARIANTS_STRIDE", 1))
PARTS = ("method", "operator", "inplace", "noncontiguous", "strided", "noncontiguous_inplace",
         "inplace_grad", "saved_modified", "conj", "neg_view", "conj_inplace")
# outputs drawn from a random stream: their values are not comparable
SKIP_OPS = set(T.RANDOM_SAMPLE)

_KEEPS = "torch's backward needs the overwritten input and raises; ember kept a copy: right"
_SAVES = ("ember's backward saves the input where torch's saves only its shape or the "
          "output: a loud refusal, never a wrong gradient")
# (op, part) pairs that still differ from torch, and why
KNOWN = {
    ('acosh', 'inplace_grad'): _KEEPS,
    ('addbmm', 'inplace'):
        "torch's addbmm_ resizes a [1] self to [5, 10]; ember refuses as every other in-place op",
    ('addbmm', 'inplace_grad'): "the same sample: torch's addbmm_ resizes self",
    ('addbmm', 'noncontiguous_inplace'): "the same sample: torch's addbmm_ resizes self",
    ('as_strided.partial_views', 'conj'):
        "ember refuses as_strided of conj() of a partial view (conj() copies the input alone)",
    ('as_strided.partial_views', 'neg_view'):
        "ember has no _neg_view: its stand-in -x is a new tensor (as_strided: another storage)",
    ('asinh', 'inplace_grad'): _KEEPS,
    ('atanh', 'inplace_grad'): _KEEPS,
    ('frexp', 'saved_modified'): _SAVES,
    ('ldexp', 'saved_modified'): _SAVES,
    ('lerp', 'saved_modified'): _SAVES,
    ('linalg.cholesky_ex', 'neg_view'):
        "ember's cholesky_ex raises on a matrix not positive-definite (no info > 0 return)",
    ('native_group_norm', 'noncontiguous'):
        "torch's kernel refuses a non-contiguous input; ember computes",
    ('nn.functional.channel_shuffle', 'saved_modified'): _SAVES,
    ('nn.functional.embedding_bag', 'saved_modified'): _SAVES,
    ('nn.functional.interpolate.bicubic', 'saved_modified'): _SAVES,
    ('nn.functional.interpolate.bilinear', 'saved_modified'): _SAVES,
    ('nn.functional.interpolate.linear', 'saved_modified'): _SAVES,
    ('nn.functional.interpolate.nearest', 'saved_modified'): _SAVES,
    ('nn.functional.interpolate.nearest-exact', 'saved_modified'): _SAVES,
    ('nn.functional.interpolate.trilinear', 'saved_modified'): _SAVES,
    ('nn.functional.linear_cross_entropy.chunked', 'saved_modified'): _SAVES,
    ('nn.functional.pixel_shuffle', 'saved_modified'): _SAVES,
    ('nn.functional.pixel_unshuffle', 'saved_modified'): _SAVES,
    ('nn.functional.upsample_bilinear', 'saved_modified'): _SAVES,
    ('nn.functional.upsample_nearest', 'saved_modified'): _SAVES,
    ('rot90', 'saved_modified'): _SAVES,
    ('kron', 'strided'): "torch's kron views a transposed input and raises; ember computes",
    ('masked.median', 'strided'):
        "torch's masked.median of a stride-0 input gives 0 (of its contiguous copy, ember's)",
    ('native_group_norm', 'strided'):
        "torch's kernel refuses a transposed input; ember computes",
    ('resize_', 'strided'):
        "resize_ of a transposed tensor: torch reads its storage in memory order, ember in "
        "logical order",
    ('sparse.sampled_addmm', 'conj'):
        'conj() of a sparse CSR tensor is not implemented (a clear NotImplementedError)',
}


def _tensors(s):
    return [v for v in T._flat([s.input, list(s.args), list(s.kwargs.values())])
            if isinstance(v, torch.Tensor)]


def _inplace_name(op):
    f = op.inplace_variant
    return None if f is None else getattr(f, "__name__", op.name + "_")


def _storage(x):
    """``x``'s whole storage as a flat torch tensor, and the element count."""
    n = x.untyped_storage().nbytes() // max(x.element_size(), 1)
    return x.as_strided((n,), (1,), 0), n


def _strided_pair(x):
    """A fresh torch copy of ``x``'s storage with ``x``'s strides, and ember's twin: the
    same view of the same values in a storage of ember's own."""
    flat, n = _storage(x.detach())
    tb = flat.clone()
    eb = ember.tensor(T._numpy(flat))
    shape, stride, off = tuple(x.shape), x.stride(), x.storage_offset()
    return tb, tb.as_strided(shape, stride, off), eb, eb.as_strided(shape, stride, off)


# matrix factorisations and solvers: an input broadcast along its last dimension is a
# singular matrix (rank one), where pivots and signs are not determined
_FACTORISING = {"geqrf", "qr", "lu", "pinverse", "cholesky", "cholesky_inverse",
                "cholesky_solve", "lu_solve", "triangular_solve", "inverse", "svd", "ormqr",
                "det", "logdet", "slogdet", "lu_unpack", "matrix_exp", "householder_product"}


def _factorises(op):
    return op.name.startswith("linalg.") or op.name in _FACTORISING


def _strided_views(x, factorises=False):
    """The input ``x`` laid out three other ways: transposed memory (the same values),
    every other element of a larger storage (the same values), and its first element along
    the last dimension broadcast with stride 0 (other values, the same on both sides; not
    for ``factorises``: a singular matrix)."""
    x = x.detach()
    if x.dim() >= 2:
        yield "transposed", x.transpose(-1, -2).contiguous().transpose(-1, -2)
    big = x.new_zeros(x.shape[:-1] + (2 * x.shape[-1],))
    big[..., ::2] = x
    yield "stepped", big[..., ::2]
    if x.shape[-1] > 1 and not factorises:
        yield "expanded", x[..., :1].clone().expand(x.shape)


def _to_ember_strided(x):
    """T._to_ember that keeps a strided tensor's strides (a view of a storage)."""
    if isinstance(x, torch.Tensor) and x.layout == torch.strided and x.numel() and \
            (not x.is_contiguous() or x.storage_offset()):
        return _strided_pair(x)[3]
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
        return type(x)(_to_ember_strided(v) for v in x)
    if isinstance(x, dict):
        return {k: _to_ember_strided(v) for k, v in x.items()}
    return T._to_ember(x)


def _compare_outputs(op, s, e_out, t_out, where):
    if op.name in T.SIGN_FREE:
        t_flat, e_flat = (T._flat(s.output_process_fn_grad(o)) for o in (t_out, e_out))
    else:
        t_flat, e_flat = T._flat(t_out), T._flat(e_out)
    assert len(e_flat) == len(t_flat), f"{where}: {len(e_flat)} outputs != {len(t_flat)}"
    for j, (a, b) in enumerate(zip(e_flat, t_flat)):
        T._compare(a, b, T._key(op), f"{where} output {j}")


def _pair(where, t_call, e_call):
    """Run torch's and ember's calls: both refuse (None), or both return (their results);
    anything else raises AssertionError."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            t_out = t_call()
        except Exception:  # noqa: BLE001 - then ember must refuse too
            try:
                e_call()
            except Exception:  # noqa: BLE001 - any error, as torch's types vary
                return None
            raise AssertionError(f"{where}: torch raised, ember did not") from None
        try:
            e_out = e_call()
        except Exception as err:  # noqa: BLE001 - reported as a difference
            raise AssertionError(f"{where}: ember raised {type(err).__name__}: "
                                 f"{err}") from err
    return e_out, t_out


def _dtypes(op, part):
    supported = op.supported_dtypes("cpu")
    if part in ("conj", "neg_view", "conj_inplace"):
        return [torch.complex64] if torch.complex64 in supported else []
    if part in ("inplace_grad", "saved_modified"):
        return [torch.float64] if torch.float64 in supported and op.supports_autograd else []
    if part == "inplace":
        return T._dtypes(op)
    return T._dtypes(op)[:1]


def _in_place(fn):
    """``fn`` checked to return its first argument (the tensor it wrote into)."""
    def call(x, *args, **kwargs):
        r = fn(x, *args, **kwargs)
        assert r is x, "the in-place variant did not return its input"
        return r
    return call


def _method(op):
    if op.method_variant is None or "." in op.name:
        return None
    m = getattr(ember.Tensor, op.name, None)
    return None if m is None else (op.method_variant, m)


def _inplace(op):
    name = _inplace_name(op)
    if name is None or "." in op.name:
        return None
    m = getattr(ember.Tensor, name, None)
    return None if m is None else (_in_place(op.inplace_variant), _in_place(m))


def _grads(m, out, leaves, conv):
    outs = [o for o in T._flat(out) if isinstance(o, m.Tensor) and o.requires_grad and
            (o.is_floating_point() or o.is_complex())]
    if not outs:
        return None
    gos = [m.tensor(np.linspace(-1, 1, o.numel()).reshape(tuple(o.shape)), dtype=o.dtype)
           for o in outs]
    return m.autograd.grad(outs, leaves, gos, allow_unused=True)


def _run_sample(op, part, s, dtype, i):
    """One sample of one part; returns 1 when something was compared."""
    key = T._key(op)
    where = f"{key} {part} {dtype} sample {i}"
    fn = T._ember_fn(op)
    if part in ("noncontiguous", "strided", "noncontiguous_inplace", "saved_modified") and \
            any(v.layout != torch.strided for v in _tensors(s)):
        return 0  # sparse operands: no strides to vary, no in-place write to make
    args, kw = T._to_ember(s.args), T._to_ember(s.kwargs)
    if part == "method":
        tm, em = _method(op)
        got = _pair(where, lambda: tm(s.input, *s.args, **s.kwargs),
                    lambda: em(T._to_ember(s.input), *args, **kw))
        if got is None:
            return 0
        _compare_outputs(op, s, *got, where)
    elif part == "operator":
        f = op.operator_variant
        got = _pair(where, lambda: f(s.input, *s.args, **s.kwargs),
                    lambda: f(T._to_ember(s.input), *args, **kw))
        if got is None:
            return 0
        _compare_outputs(op, s, *got, where)
    elif part in ("inplace", "noncontiguous_inplace"):
        ti, ei = _inplace(op)
        x = s.input
        if part == "noncontiguous_inplace":
            x = s.noncontiguous().input
            args, kw = (_to_ember_strided(v) for v in (s.noncontiguous().args,
                                                       s.noncontiguous().kwargs))
            s = s.noncontiguous()
        if not isinstance(x, torch.Tensor) or x.layout != torch.strided or not x.numel():
            return 0
        tb, tx, eb, ex = _strided_pair(x)
        got = _pair(where, lambda: ti(tx, *s.args, **s.kwargs), lambda: ei(ex, *args, **kw))
        if got is None:
            return 0
        T._compare(eb, tb, key, f"{where} storage")
    elif part == "noncontiguous":
        nc = s.noncontiguous()
        got = _pair(where, lambda: op.op(nc.input, *nc.args, **nc.kwargs),
                    lambda: fn(*(_to_ember_strided([nc.input, *nc.args])),
                               **_to_ember_strided(nc.kwargs)))
        if got is None:
            return 0
        _compare_outputs(op, s, *got, where)
    elif part == "strided":
        x = s.input
        if not isinstance(x, torch.Tensor) or x.layout != torch.strided or not x.dim() or \
                not x.numel():
            return 0
        checked = 0
        for name, view in _strided_views(x, factorises=_factorises(op)):
            got = _pair(f"{where} ({name} input)",
                        lambda v=view: op.op(v, *s.args, **s.kwargs),
                        lambda v=view: fn(_to_ember_strided(v), *args, **kw))
            if got is not None:
                _compare_outputs(op, s, *got, f"{where} ({name} input)")
                checked = 1
        return checked
    elif part in ("conj", "neg_view"):
        def wrap(m):
            def view(v):
                if isinstance(v, m.Tensor) and v.is_complex():
                    if part == "conj":
                        return v.conj()
                    return torch._neg_view(v) if m is torch else -v
                return v
            return view
        tv, ev = wrap(torch), wrap(ember)
        got = _pair(where, lambda: op.op(tv(s.input), *map(tv, s.args),
                                         **{k: tv(v) for k, v in s.kwargs.items()}),
                    lambda: fn(ev(T._to_ember(s.input)), *map(ev, args),
                               **{k: ev(v) for k, v in kw.items()}))
        if got is None:
            return 0
        _compare_outputs(op, s, *got, where)
    elif part == "conj_inplace":
        ti, ei = _inplace(op)
        if not isinstance(s.input, torch.Tensor) or not s.input.is_complex():
            return 0
        tx, ex = s.input.clone(), T._to_ember(s.input)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                ti(tx.conj(), *s.args, **s.kwargs)
            except Exception:  # noqa: BLE001 - torch refused: nothing to write
                return 0
            try:
                ei(ex.conj(), *args, **kw)
            except NotImplementedError as err:
                # the refusal (a metadata op, t_() or squeeze_(), writes nothing: ember's
                # x then equals torch's, compared below)
                assert "conj()" in str(err), f"{where}: {err}"
                return 1
        T._compare(ex, tx, key, f"{where}: x after the write into x.conj()")
    elif part == "inplace_grad":
        ti, ei = _inplace(op)
        e_in = T._to_ember(s.input)
        tl, el = (_tensors(s), [v for v in T._flat([e_in, list(args), list(kw.values())])
                                if isinstance(v, ember.Tensor)])
        tl = [v for v in tl if v.requires_grad]
        el = [v for v in el if v.requires_grad]
        if not tl or not s.input.requires_grad:
            return 0

        def run(m, inp, call, a, k, leaves):
            y = inp * 1
            call(y, *a, **k)
            return y.grad_fn.name() if y.grad_fn is not None else None, \
                _grads(m, y, leaves, None)
        got = _pair(where, lambda: run(torch, s.input, ti, s.args, s.kwargs, tl),
                    lambda: run(ember, e_in, ei, args, kw, el))
        if got is None:
            return 0
        (en, eg), (tn, tg) = got
        assert en == tn, f"{where}: grad_fn {en} != {tn}"
        for j, (a, b) in enumerate(zip(eg or (), tg or ())):
            if a is None or b is None:
                assert all(g is None or not g.detach().numpy().any() for g in (a, b)), \
                    f"{where}: grad {j} None on one side only"
                continue
            T._compare(a, b, "", f"{where} grad {j}")
    elif part == "saved_modified":
        if not isinstance(s.input, torch.Tensor) or not s.input.requires_grad:
            return 0

        def run(m, leaf, a, k, modify):
            y = leaf * 1
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = (op.op if m is torch else fn)(y, *a, **k)
            if any(isinstance(o, m.Tensor) and o._base is not None for o in T._flat(out)) \
                    if m is torch else False:
                raise _ViewOutput
            if modify:
                y.add_(1.0)
            return _grads(m, out, [leaf], None)
        e_in = T._to_ember(s.input)
        try:
            t_clean = run(torch, s.input, s.args, s.kwargs, False)
        except _ViewOutput:
            return 0  # the output is a view of y: writing y rewrites the output itself
        except Exception:  # noqa: BLE001 - torch refused the call: test_opinfo's case
            return 0
        if t_clean is None:
            return 0
        try:
            run(torch, s.input, s.args, s.kwargs, True)
            torch_raised = False
        except RuntimeError as err:
            assert "modified by an inplace operation" in str(err), err
            torch_raised = True
        e_clean = run(ember, e_in, args, kw, False)
        try:
            e_mod = run(ember, e_in, args, kw, True)
        except RuntimeError as err:
            assert torch_raised, f"{where}: ember raised where torch did not: {err}"
            assert "modified by an inplace operation" in str(err), err
            return 1
        # ember saved something else (its output): the gradient must be the clean one
        for j, (a, b) in enumerate(zip(e_mod, e_clean)):
            if a is not None and b is not None:
                np.testing.assert_array_equal(a.numpy(), b.numpy(),
                                              err_msg=f"{where}: grad {j} read the modified "
                                              "input" + (" (torch raises)" if torch_raised
                                                         else ""))
    return 1


class _ViewOutput(Exception):
    pass


def _applies(op, part):
    if op.name in SKIP_OPS or not _dtypes(op, part):
        return False
    if part == "method":
        return _method(op) is not None
    if part == "operator":
        return op.operator_variant is not None
    if part in ("inplace", "noncontiguous_inplace", "inplace_grad", "conj_inplace"):
        return _inplace(op) is not None
    return True


def _run(op, part):
    """Run one part for ``op``; raise AssertionError on a difference from torch."""
    checked = 0
    for dtype in _dtypes(op, part):
        grad = part in ("inplace_grad", "saved_modified")
        for i, s in enumerate(T._samples(op, dtype, grad, SAMPLES)):
            checked += _run_sample(op, part, s, dtype, i)
    return checked


CASES = [(op, part) for op in T.PRESENT for part in PARTS if _applies(op, part)]
SAMPLED = CASES if os.environ.get("OPINFO_VARIANTS_ALL") else CASES[::STRIDE]


def _missing_variants():
    """torch's method and in-place variants ember's Tensor lacks (op names)."""
    out = set()
    for op in T.PRESENT:
        if "." in op.name:
            continue
        if op.method_variant is not None and getattr(ember.Tensor, op.name, None) is None:
            out.add(op.name)
        name = _inplace_name(op)
        if name is not None and getattr(ember.Tensor, name, None) is None:
            out.add(name)
    return out


# torch's method and in-place variants that ember's Tensor does not have
MISSING_VARIANTS = set()


def test_missing_variants_are_exact():
    assert _missing_variants() == MISSING_VARIANTS


@pytest.mark.parametrize("op,part", SAMPLED, ids=[f"{T._key(o)}-{p}" for o, p in SAMPLED])
def test_variants_opinfo(op, part):
    if (T._key(op), part) in KNOWN:  # still differs: once it passes, it leaves KNOWN
        with pytest.raises((AssertionError, NotImplementedError, RuntimeError, TypeError)):
            _run(op, part)
    else:
        _run(op, part)


def test_known_names_live_cases():
    live = {(T._key(op), part) for op, part in CASES}
    assert set(KNOWN) <= live, set(KNOWN) - live


def _report():
    import time
    t0 = time.time()
    fails = {}
    per_part = dict.fromkeys(PARTS, 0)
    for op, part in CASES:
        t = time.time()
        per_part[part] += 1
        try:
            _run(op, part)
        except Exception as e:  # noqa: BLE001 - a report of every difference
            fails[(T._key(op), part)] = f"{type(e).__name__}: {str(e)[:300]}"
        if time.time() - t > 1:
            print(f"slow: {T._key(op)} {part} {time.time() - t:.1f}s")
    print(f"ops {len(T.PRESENT)}, cases {len(CASES)} {per_part}, differing {len(fails)}, "
          f"{time.time() - t0:.0f}s")
    print("MISSING_VARIANTS", sorted(_missing_variants()))
    for k, v in sorted(fails.items()):
        print(f"FAIL {k}: {v}")


if __name__ == "__main__":
    _report()


# ----- the fixes, one by one, on inputs of their own ---------------------------------------
CONJ_WRITES = {
    "add_": lambda m, v: v.add_(1j),
    "setitem": lambda m, v: v.__setitem__(0, 5j),
    "copy_": lambda m, v: v.copy_(m.ones(3, dtype=m.complex128)),
    "zero_": lambda m, v: v.zero_(),
    "out=": lambda m, v: m.add(m.ones(3, dtype=m.complex128), 1, out=v),
    "real.add_": lambda m, v: v.real.add_(1),
    "view.mul_": lambda m, v: v[1:].mul_(2),
}


# (out= into a graph is refused first, as torch refuses it)
@pytest.mark.parametrize("kind,grad", [(k, g) for k in sorted(CONJ_WRITES) for g in (False, True)
                                       if not (g and k == "out=")])
def test_write_into_conj_is_refused(kind, grad):
    """torch's conj() is a view: a write into it reaches x (its conjugate). ember's conj()
    is a copy, where the write silently went nowhere; it is refused now, naming conj()."""
    z = np.array([1 + 2j, 3 - 1j, -2 + 0.5j])
    tx = torch.tensor(z)
    CONJ_WRITES[kind](torch, tx.conj())
    assert not np.array_equal(tx.numpy(), z)  # torch wrote into x
    ex = ember.tensor(z, requires_grad=grad)
    base = ex * 1 if grad else ex
    with pytest.raises(NotImplementedError, match=r"conj\(\)"):
        CONJ_WRITES[kind](ember, base.conj())
    np.testing.assert_array_equal(base.detach().numpy(), z)


def test_conj_copies_stay_writable_where_torch_copies():
    """What torch computes into new memory stays writable: clone, resolve_conj,
    arithmetic on the conjugate; conj() of a real tensor is the tensor itself. Writes into
    an expanded tensor keep torch's overlap error."""
    z = np.array([1 + 2j, 3 - 1j])
    for m in (torch, ember):
        x = m.tensor(z)
        for made in (x.conj().clone(), x.conj().resolve_conj(), x.conj() * 1):
            made.add_(1)
            np.testing.assert_array_equal(made.numpy(), z.conj() + 1)
        r = m.tensor([1.0, 2.0])
        r.conj().add_(1)
        assert r.tolist() == [2.0, 3.0]
        with pytest.raises(RuntimeError, match="single memory location"):
            m.tensor([1.0]).expand(3).add_(1)


def test_view_as_real_of_conj_raises():
    """torch refuses view_as_real of an unresolved conjugate (ember viewed its copy)."""
    for m in (torch, ember):
        x = m.tensor([1 + 2j, 3 - 1j])
        with pytest.raises(RuntimeError, match="view_as_real doesn't work on unresolved "
                           "conjugated tensors"):
            m.view_as_real(x.conj())
        assert m.view_as_real(x.conj().resolve_conj()).tolist() == [[1, -2], [3, 1]]


def test_as_strided_of_conj_of_a_partial_view():
    """torch's conj view shares the input's whole storage, so as_strided reaches the
    elements around a slice; ember's copy holds the slice alone and read other numbers
    (silently). Refused now; conj() of a whole tensor still agrees."""
    z = np.arange(8) + 1j * np.arange(8, 0, -1)
    tb, eb = torch.tensor(z), ember.tensor(z)
    with pytest.raises(NotImplementedError, match=r"as_strided on the result of conj\(\)"):
        eb[2:6].conj().as_strided((2,), (1,), 1)
    np.testing.assert_array_equal(eb.conj().as_strided((3,), (2,), 1).resolve_conj().numpy(),
                                  tb.conj().as_strided((3,), (2,), 1).resolve_conj().numpy())


INPLACE_READS_SELF = {
    "true_divide_": lambda y, o: y.true_divide_(o),
    "copysign_": lambda y, o: y.copysign_(o),
    "ldexp_": lambda y, o: y.ldexp_(o),
    "nextafter_": lambda y, o: y.nextafter_(o),
    "float_power_": lambda y, o: y.float_power_(o),
    "renorm_": lambda y, o: y.renorm_(1, 0, 0.5),
    "scatter_reduce_": lambda y, o: y.scatter_reduce_(
        0, y.new_tensor([[0, 1, 0], [1, 0, 1]]).long(), o, "prod"),
}


@pytest.mark.parametrize("name", sorted(INPLACE_READS_SELF))
def test_inplace_backward_keeps_the_old_values(name):
    """``y.op_(other)`` on a non-leaf: these backward formulas read ``self`` before the
    write; ember raised the version-counter error (its in-place form saved ``y`` itself),
    torch differentiates. Now the old values are kept aside and the gradients agree."""
    rng = np.random.default_rng(len(name))
    a, b = rng.uniform(0.5, 2, (2, 3)), rng.uniform(-2, 2, (2, 3))
    grads = []
    for m in (torch, ember):
        x, o = (m.tensor(v, requires_grad=True) for v in (a, b))
        y = x * 1
        INPLACE_READS_SELF[name](y, o)
        gs = m.autograd.grad(y, [x, o], m.tensor(rng.standard_normal((2, 3)) * 0 + 1.0),
                             allow_unused=True)
        grads.append([None if g is None else g.detach().numpy() for g in gs])
    for e, t in zip(*grads):
        if t is None or e is None:
            assert all(g is None or not g.any() for g in (e, t))
        else:
            np.testing.assert_allclose(e, t, rtol=1e-12, atol=1e-14)


def test_view_copy_of_a_transposed_tensor():
    """view_copy is a copy: torch's takes any layout (ember raised view's error)."""
    res = []
    for m in (torch, ember):
        x = m.arange(6.0).reshape(2, 3).t().requires_grad_(True)
        y = m.view_copy(x, (6,))
        y.backward(m.arange(6.0))
        res.append((y.detach().numpy().copy(), x.grad.numpy().copy()))
    for a, b in zip(*res):
        np.testing.assert_array_equal(a, b)
