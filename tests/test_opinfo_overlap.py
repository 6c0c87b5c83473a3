"""Writes into memory that overlaps itself or an input, over PyTorch's OpInfo table.

torch refuses most writes into a tensor where several elements share one memory
location (a stride-0 dimension: ``x.as_strided((3,), (0,))``, an expanded tensor), and
an ``out=`` that shares memory with an input in part: the result would depend on the
order the elements are written in. For every op ember runs (test_opinfo.py's
``PRESENT``), on its first ``SAMPLES`` samples (the op's first dtype), against torch:

- ``inplace_self``: the in-place variant on a self whose last dimension of size > 1 has
  stride 0 (a view of a storage of its own): both refuse, or both compute and leave the
  same storage;
- ``inplace_partial``: the in-place variant whose first tensor argument of self's shape
  and dtype is a view of self's storage one element further on (torch's
  ``assert_no_partial_overlap`` of ``x[:-1].add_(x[1:])``);
- ``out_self``: ``out=`` a tensor of the result's shape and dtype with such a dimension;
- ``out_partial``: ``out=`` a view of the input's storage one element further on
  (torch's ``assert_no_partial_overlap``/``assert_no_overlap``);
- ``out_same``: ``out=`` the input itself (elementwise ops write it in place; ops that
  read their input while writing refuse).

Where torch raises its overlap error, ember must raise a ``RuntimeError`` with the same
words. Only cases where the ordinary write works on both sides are compared (the other
sweeps cover the rest). ``KNOWN`` maps ``(op, part)`` to the reason it still differs,
asserted both ways. ``python tests/test_opinfo_overlap.py`` runs every case and prints
the counts (docs/differences.md, "Writes into self-overlapping memory (thirteenth
pass)").
"""
import os
import warnings

import numpy as np
import pytest
import test_opinfo as T
import torch

import ember

SAMPLES = 2
PARTIAL_SAMPLES = 6
STRIDE = int(os.environ.get("OPINFO_OVERLAP_STRIDE", 1))
PARTS = ("inplace_self", "inplace_partial", "out_self", "out_partial", "out_same")
SKIP_OPS = set(T.RANDOM_SAMPLE)
_OVERLAP_WORDS = "refer to a single memory location"

_UNCHECKED = ("torch's kernel writes into memory shared by several elements without its check "
              "(the value left is whichever write came last); ember refuses, loudly")
_READS_WRITTEN = ("torch's kernel reads the input after writing part of an out= that overlaps it "
                  "(no check): its values depend on the order of the writes; ember computes "
                  "from the inputs as they were")
_COMPUTES = ("torch refuses out= sharing memory with an input in part; this path of ember's "
             "writes the result computed from the inputs as they were (the non-aliased value)")
# (op, part) pairs that still differ from torch, and why
KNOWN = {
    ('addmv', 'inplace_self'): _UNCHECKED,
    ('aminmax', 'out_partial'): _COMPUTES,
    ('baddbmm', 'inplace_partial'):
        "torch's kernel reads the batches after writing part of a self that overlaps them "
        "(no check): its values depend on the order of the writes; ember refuses, loudly",
    ('baddbmm', 'inplace_self'): _UNCHECKED,
    ('bmm', 'out_partial'): _READS_WRITTEN,
    ('bmm', 'out_self'): _UNCHECKED,
    ('cummax', 'out_partial'): _READS_WRITTEN,
    ('cummax', 'out_self'): _UNCHECKED,
    ('cummin', 'out_partial'): _READS_WRITTEN,
    ('cummin', 'out_self'): _UNCHECKED,
    ('diff', 'out_partial'): _COMPUTES,
    ('histc', 'out_self'): _UNCHECKED,
    ('linalg.lu_solve', 'out_partial'): _READS_WRITTEN,
    ('linalg.solve_triangular', 'out_partial'): _READS_WRITTEN,
    ('log_softmax', 'out_partial'): _READS_WRITTEN,
    ('masked_scatter', 'inplace_partial'): _READS_WRITTEN,
    ('matmul', 'out_partial'): _READS_WRITTEN,
    ('matmul', 'out_self'): _UNCHECKED,
    ('mv', 'out_partial'): _READS_WRITTEN,
    ('mv', 'out_self'): _UNCHECKED,
    ('narrow_copy', 'out_self'): _UNCHECKED,
    ('native_batch_norm', 'out_partial'): _READS_WRITTEN,
    ('nn.functional.avg_pool2d', 'out_partial'): _READS_WRITTEN,
    ('nn.functional.avg_pool2d', 'out_same'): _READS_WRITTEN,
    ('nn.functional.avg_pool3d', 'out_partial'): _READS_WRITTEN,
    ('nn.functional.avg_pool3d', 'out_self'): _UNCHECKED,
    ('nn.functional.linear', 'out_partial'): _READS_WRITTEN,
    ('nn.functional.linear', 'out_self'): _UNCHECKED,
    ('nn.functional.logsigmoid', 'out_partial'): _READS_WRITTEN,
    ('softmax', 'out_partial'): _READS_WRITTEN,
    ('std', 'out_partial'): _READS_WRITTEN,
    ('std', 'out_self'): _UNCHECKED,
    ('tril', 'inplace_self'): _UNCHECKED,
    ('tril', 'out_partial'): _READS_WRITTEN,
    ('tril', 'out_self'): _UNCHECKED,
    ('triu', 'inplace_self'): _UNCHECKED,
    ('triu', 'out_partial'): _READS_WRITTEN,
    ('triu', 'out_self'): _UNCHECKED,
    ('unbind_copy', 'out_partial'):
        "torch refuses some pieces' out= sharing memory with the input in part and writes "
        "others (the samples disagree); ember refuses each such piece",
    ('var', 'out_partial'): _READS_WRITTEN,
    ('var', 'out_self'): _UNCHECKED,
}


def _inplace_name(op):
    f = op.inplace_variant
    return None if f is None else getattr(f, "__name__", op.name + "_")


def _inplace(op):
    name = _inplace_name(op)
    if name is None or "." in op.name:
        return None
    m = getattr(ember.Tensor, name, None)
    return None if m is None else (op.inplace_variant, m)


def _contiguous_strides(shape):
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(strides))


def _twin_storages(values):
    """A flat torch storage holding ``values`` (a flat torch tensor) and ember's twin."""
    tb = values.detach().clone()
    return tb, ember.tensor(T._numpy(tb))


def _stride0(shape):
    """``shape``'s contiguous strides with the last dimension of size > 1 at stride 0, or
    None when every dimension has size 1."""
    dims = [d for d, n in enumerate(shape) if n > 1]
    if not dims:
        return None
    strides = list(_contiguous_strides(shape))
    strides[dims[-1]] = 0
    return tuple(strides)


def _quiet(call):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return call()


def _works(call):
    try:
        _quiet(call)
        return True
    except Exception:  # noqa: BLE001 - the ordinary write is other sweeps' business
        return False


def _pair(where, t_call, e_call):
    """Both refuse (None; torch's overlap error must be ember's too) or both compute."""
    try:
        _quiet(t_call)
    except Exception as t_err:  # noqa: BLE001 - then ember must refuse too
        try:
            _quiet(e_call)
        except Exception as e_err:  # noqa: BLE001 - compared below
            if _OVERLAP_WORDS in str(t_err):
                assert isinstance(e_err, RuntimeError) and _OVERLAP_WORDS in str(e_err), \
                    f"{where}: torch's overlap error, ember's {type(e_err).__name__}: {e_err}"
            return None
        raise AssertionError(f"{where}: torch raised {type(t_err).__name__}: "
                             f"{str(t_err)[:120]}; ember computed") from None
    try:
        _quiet(e_call)
    except Exception as err:  # noqa: BLE001 - reported as a difference
        raise AssertionError(f"{where}: ember raised {type(err).__name__}: {err}") from err
    return True


def _result(op, s):
    """torch's ordinary result of the sample, or None when torch refuses it."""
    try:
        return _quiet(lambda: op.op(s.input, *s.args, **s.kwargs))
    except Exception:  # noqa: BLE001
        return None


def _out_like(r):
    if isinstance(r, torch.Tensor):
        return torch.empty_like(r, memory_format=torch.contiguous_format)
    return type(r)(_out_like(v) for v in r)


def _to_ember_out(o):
    if isinstance(o, torch.Tensor):
        return ember.empty(tuple(o.shape), dtype=getattr(ember, str(o.dtype).split(".")[1]))
    return type(o)(_to_ember_out(v) for v in o)


def _first_tensor(r):
    return r if isinstance(r, torch.Tensor) else r[0]


def _with_first(outs, first):
    if isinstance(outs, torch.Tensor) or isinstance(outs, ember.Tensor):
        return first
    return type(outs)((first, *outs[1:]))


def _run_sample(op, part, s, i):
    key = T._key(op)
    where = f"{key} {part} sample {i}"
    x = s.input
    if not isinstance(x, torch.Tensor) or x.layout != torch.strided or \
            any(v.layout != torch.strided for v in T._flat([x, list(s.args),
                                                            list(s.kwargs.values())])
                if isinstance(v, torch.Tensor)):
        return 0
    args, kw = T._to_ember(s.args), T._to_ember(s.kwargs)
    if part == "inplace_self":
        ti, ei = _inplace(op)
        strides = _stride0(tuple(x.shape))
        if strides is None or not _works(lambda: ti(x.clone(), *s.args, **s.kwargs)) or \
                not _works(lambda: ei(T._to_ember(x), *args, **kw)):
            return 0
        tb, eb = _twin_storages(x.detach().reshape(-1))
        shape = tuple(x.shape)
        got = _pair(where, lambda: ti(tb.as_strided(shape, strides), *s.args, **s.kwargs),
                    lambda: ei(eb.as_strided(shape, strides), *args, **kw))
        if got:
            T._compare(eb, tb, key, f"{where} storage")
        return 1
    if part == "inplace_partial":
        return _run_inplace_partial(op, s, where, args, kw)
    fn = T._ember_fn(op)
    r = _result(op, s)
    if r is None or not all(isinstance(v, torch.Tensor) for v in T._flat(r)):
        return 0
    e_in = T._to_ember(x)
    if not _works(lambda: op.op(x, *s.args, **s.kwargs, out=_out_like(r))) or \
            not _works(lambda: fn(e_in, *args, **kw, out=_to_ember_out(_out_like(r)))):
        return 0
    first = _first_tensor(r)
    shape, n = tuple(first.shape), first.numel()
    if part == "out_self":
        strides = _stride0(shape)
        if strides is None:
            return 0
        tb, eb = _twin_storages(torch.zeros(n, dtype=first.dtype))
        t_out = _with_first(_out_like(r), tb.as_strided(shape, strides))
        e_out = _with_first(_to_ember_out(_out_like(r)), eb.as_strided(shape, strides))
        got = _pair(where, lambda: op.op(x, *s.args, **s.kwargs, out=t_out),
                    lambda: fn(e_in, *args, **kw, out=e_out))
    else:
        m = x.numel()
        if x.dtype != first.dtype or m < 2 or not n or \
                part == "out_same" and tuple(x.shape) != shape:
            return 0
        flat = torch.zeros(max(m, n) + 1, dtype=x.dtype)
        flat[:m] = x.detach().reshape(-1)
        tb, eb = _twin_storages(flat)
        xs, xst = tuple(x.shape), _contiguous_strides(tuple(x.shape))
        at = 0 if part == "out_same" else 1
        tx, ex = tb.as_strided(xs, xst), eb.as_strided(xs, xst)
        t_out = _with_first(_out_like(r), tb.as_strided(shape, _contiguous_strides(shape), at))
        e_out = _with_first(_to_ember_out(_out_like(r)),
                            eb.as_strided(shape, _contiguous_strides(shape), at))
        got = _pair(where, lambda: op.op(tx, *s.args, **s.kwargs, out=t_out),
                    lambda: fn(ex, *args, **kw, out=e_out))
    if got:
        T._compare(eb, tb, key, f"{where} storage")
    return 1


def _run_inplace_partial(op, s, where, args, kw):
    """self and its first tensor argument of the same shape and dtype as views of one
    storage, the argument one element further on."""
    x = s.input
    pos = next((i for i, a in enumerate(s.args) if isinstance(a, torch.Tensor) and
                a.shape == x.shape and a.dtype == x.dtype), None)
    if pos is None or x.numel() < 2:
        return 0
    ti, ei = _inplace(op)
    if not _works(lambda: ti(x.clone(), *s.args, **s.kwargs)) or \
            not _works(lambda: ei(T._to_ember(x), *args, **kw)):
        return 0
    m = x.numel()
    flat = torch.zeros(m + 1, dtype=x.dtype)
    flat[:m] = x.detach().reshape(-1)
    flat[m] = 1
    tb, eb = _twin_storages(flat)
    shape, st = tuple(x.shape), _contiguous_strides(tuple(x.shape))

    def call(f, b, a, k):
        a = list(a)
        a[pos] = b.as_strided(shape, st, 1)
        return f(b.as_strided(shape, st), *a, **k)
    got = _pair(where, lambda: call(ti, tb, s.args, s.kwargs), lambda: call(ei, eb, args, kw))
    if got:
        T._compare(eb, tb, T._key(op), f"{where} storage")
    return 1


def _applies(op, part):
    if op.name in SKIP_OPS:
        return False
    if part.startswith("inplace"):
        return _inplace(op) is not None
    return op.supports_out


def _run(op, part):
    dtype = T._dtypes(op)[0]
    if part == "inplace_partial":  # (few samples have an argument of self's shape)
        return sum(_run_sample(op, part, s, i)
                   for i, s in enumerate(T._samples(op, dtype, False, PARTIAL_SAMPLES)))
    return sum(_run_sample(op, part, s, i)
               for i, s in enumerate(T._samples(op, dtype, False, SAMPLES)))


CASES = [(op, part) for op in T.PRESENT for part in PARTS if _applies(op, part)]
SAMPLED = CASES if os.environ.get("OPINFO_OVERLAP_ALL") else CASES[::STRIDE]


@pytest.mark.parametrize("op,part", SAMPLED, ids=[f"{T._key(o)}-{p}" for o, p in SAMPLED])
def test_overlap_opinfo(op, part):
    if (T._key(op), part) in KNOWN:  # still differs: once it passes, it leaves KNOWN
        with pytest.raises(AssertionError):
            _run(op, part)
    else:
        _run(op, part)


def test_known_names_live_cases():
    live = {(T._key(op), part) for op, part in CASES}
    assert set(KNOWN) <= live, set(KNOWN) - live


def _report():
    import time
    t0 = time.time()
    fails, checked = {}, dict.fromkeys(PARTS, 0)
    for op, part in CASES:
        try:
            checked[part] += _run(op, part)
        except Exception as e:  # noqa: BLE001 - a report of every difference
            fails[(T._key(op), part)] = f"{type(e).__name__}: {str(e)[:300]}"
    print(f"ops {len(T.PRESENT)}, cases {len(CASES)}, samples compared {checked}, "
          f"differing {len(fails)}, {time.time() - t0:.0f}s")
    for k, v in sorted(fails.items()):
        print(f"FAIL {k}: {v}")


if __name__ == "__main__":
    _report()


# ----- the fixes, one by one, on inputs of their own ---------------------------------------
def _stride0_view(m, x):
    return x.as_strided((3,), (0,))


REFUSED_WRITES = {
    "add_": lambda m, v: v.add_(1),
    "mul_": lambda m, v: v.mul_(2),
    "exp_": lambda m, v: v.exp_(),
    "clamp_": lambda m, v: v.clamp_(1, 2),
    "copy_": lambda m, v: v.copy_(m.tensor([1.0, 2.0, 3.0])),
    "scatter_": lambda m, v: v.scatter_(0, m.tensor([0, 1]), m.tensor([1.0, 2.0])),
    "masked_scatter_": lambda m, v: v.masked_scatter_(m.tensor([True, False, True]),
                                                      m.tensor([1.0, 2.0])),
    "index_add_": lambda m, v: v.index_add_(0, m.tensor([0]), m.tensor([3.0])),
    "put_": lambda m, v: v.put_(m.tensor([0]), m.tensor([3.0])),
    "uniform_": lambda m, v: v.uniform_(),
    "normal_": lambda m, v: v.normal_(),
    "setitem slice": lambda m, v: v.__setitem__(slice(0, 2), 4.0),
    "relu_": lambda m, v: m.nn.functional.relu_(v),
}


@pytest.mark.parametrize("name", sorted(REFUSED_WRITES))
def test_inplace_write_into_stride0_memory_is_refused(name):
    """``x.as_strided((3,), (0,)).add_(1)``: three elements, one memory location. torch
    refuses; ember wrote the whole result and left whichever element came last (x[0]
    became 1 and stayed 0 for mul_, copy_ left 3, uniform_ drew a value)."""
    for m in (torch, ember):
        x = m.zeros(3)
        m.manual_seed(0)
        with pytest.raises(RuntimeError, match="more than one element of the written-to "
                           "tensor refers to a single memory location"):
            REFUSED_WRITES[name](m, _stride0_view(m, x))
        assert x.tolist() == [0.0, 0.0, 0.0]
    # nothing was drawn before the refusal: the stream goes on where it was
    torch.manual_seed(0)
    ember.manual_seed(0)
    assert ember.rand(3).tolist() == pytest.approx(torch.rand(3).tolist())


ALLOWED_WRITES = {
    "fill_": lambda m, v: v.fill_(2),
    "zero_": lambda m, v: v.zero_(),
    "masked_fill_": lambda m, v: v.masked_fill_(m.tensor([True, False, False]), 5.0),
    "index_fill_": lambda m, v: v.index_fill_(0, m.tensor([0]), 3.0),
    "index_put_": lambda m, v: v.index_put_((m.tensor([0, 1]),), m.tensor([1.0, 2.0])),
    "index_put_ accumulate": lambda m, v: v.index_put_((m.tensor([0, 1]),),
                                                       m.tensor([1.0, 2.0]), accumulate=True),
    "setitem element": lambda m, v: v.__setitem__(1, 4.0),
    "setitem mask": lambda m, v: v.__setitem__(m.tensor([False, True, False]), 4.0),
}


@pytest.mark.parametrize("layout", ["as_strided", "expand"])
@pytest.mark.parametrize("name", sorted(ALLOWED_WRITES))
def test_fills_into_shared_memory_write_their_positions(name, layout):
    """torch lets fills and indexed writes into memory several elements share, writing
    only the op's positions. ember wrote the whole result (masked_fill_ and index_fill_
    then wrote the old value back: x stayed [0, 0, 0] where torch gives [5, 0, 0]) and
    refused every write into an expanded tensor."""
    got = []
    for m in (torch, ember):
        x = m.full((3,), 7.0)
        v = x.as_strided((3,), (0,)) if layout == "as_strided" else x[:1].expand(3)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's deprecation of writes into expanded
            r = ALLOWED_WRITES[name](m, v)
        assert r is None or r is v
        got.append(x.tolist())
    assert got[0] == got[1]


def test_fill_into_shared_memory_under_autograd_is_refused():
    """A fill of a stride-0 view of a tensor autograd records: torch writes it and refuses
    the backward pass (its CopySlices scatters into the shared memory); ember refuses
    the write itself, with the same error, rather than record a graph that cannot run."""
    x = torch.zeros(3, requires_grad=True)
    y = x * 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y.as_strided((3,), (0,)).masked_fill_(torch.tensor([True, False, True]), 5.0)
    with pytest.raises(RuntimeError, match="refers to a single memory location"):
        y.sum().backward()
    y = ember.zeros(3, requires_grad=True) * 1
    with pytest.raises(RuntimeError, match="refers to a single memory location"):
        y.as_strided((3,), (0,)).masked_fill_(ember.tensor([True, False, True]), 5.0)
    assert y.tolist() == [0.0, 0.0, 0.0]


OUT_PARTIAL = {
    "add": lambda m, x: m.add(x[:3], 1, out=x[1:]),
    "mul": lambda m, x: m.mul(x[:3], x[:3], out=x[1:]),
    "exp": lambda m, x: m.exp(x[:3], out=x[1:]),
    "cumsum": lambda m, x: m.cumsum(x[:3], 0, out=x[1:]),
    "where": lambda m, x: m.where(x[:3] > 1, x[:3], m.zeros(3), out=x[1:]),
    "take_along_dim same": lambda m, x: m.take_along_dim(x, m.tensor([1, 0, 2, 3]), 0, out=x),
    "cross same": lambda m, x: m.cross(x[:3], x[:3], dim=0, out=x[:3]),
}


@pytest.mark.parametrize("name", sorted(OUT_PARTIAL))
def test_out_sharing_memory_with_an_input_in_part_is_refused(name):
    """``torch.add(x[:3], 1, out=x[1:])``: out= overlaps the input one element further
    on. torch refuses (its result would depend on the order of the writes); ember
    computed from the inputs and wrote [1, 2, 3, 4] silently."""
    for m in (torch, ember):
        x = m.tensor([1.0, 2.0, 3.0, 4.0])
        with pytest.raises(RuntimeError, match="some elements of the input tensor and the "
                           "written-to tensor refer to a single memory location"):
            OUT_PARTIAL[name](m, x)
        assert x.tolist() == [1.0, 2.0, 3.0, 4.0]


def test_out_the_input_itself_is_written_in_place():
    """The same memory with the same layout is no partial overlap: written in place."""
    res = []
    for m in (torch, ember):
        x = m.tensor([1.0, 2.0, 3.0])
        m.add(x, 1, out=x)
        m.exp(x[:2], out=x[:2])
        res.append(x.tolist())
    assert res[0] == pytest.approx(res[1])


def test_embedding_max_norm_into_a_stride0_weight():
    """F.embedding(max_norm=...) scales each too-long row of the weight in place: torch
    refuses a row whose elements share memory (ember wrote into it), and scales rows that
    share memory with each other."""
    got = []
    for m in (torch, ember):
        w = m.ones(4).as_strided((4, 3), (1, 0))
        with pytest.raises(RuntimeError, match="refers to a single memory location"):
            m.nn.functional.embedding(m.tensor([0, 1]), w, max_norm=0.5)
        w = m.ones(3).as_strided((4, 3), (0, 1))
        m.nn.functional.embedding(m.tensor([0, 1]), w, max_norm=0.5)
        got.append(w.tolist())
    np.testing.assert_allclose(got[1], got[0], rtol=1e-6)


def test_out_of_the_fused_products_checks_only_the_added_input():
    """addmm/addmv/baddbmm/addbmm refuse an out= sharing memory in part with the added
    ``input`` (ember wrote it) and write one sharing memory with the factors, as torch."""
    for m in (torch, ember):
        s = m.arange(20.0)
        with pytest.raises(RuntimeError, match="some elements of the input tensor"):
            m.addmm(s[:4].view(2, 2), s[10:14].view(2, 2), s[14:18].view(2, 2),
                    out=s[1:5].view(2, 2))
        with pytest.raises(RuntimeError, match="some elements of the input tensor"):
            m.addmv(s[:2], s[10:14].view(2, 2), s[14:16], out=s[1:3])
    for m in (torch, ember):  # (the values then depend on torch's order of writes)
        s = m.arange(20.0)
        m.addmm(s[:4].view(2, 2), s[10:14].view(2, 2), s[14:18].view(2, 2),
                out=s[11:15].view(2, 2))
        m.addbmm(s[:4].view(2, 2), s[10:14].view(1, 2, 2), s[14:18].view(1, 2, 2),
                 out=s[16:20].view(2, 2))


WARNED_WRITES = {
    "masked_fill_": lambda m, v: v.masked_fill_(m.tensor([True, False, False]), 5.0),
    "index_fill_": lambda m, v: v.index_fill_(0, m.tensor([0]), 3.0),
    "index_put_": lambda m, v: v.index_put_((m.tensor([0]),), m.tensor([1.0]), accumulate=True),
    "setitem index": lambda m, v: v.__setitem__(m.tensor([0]), 4.0),
    "fill_": lambda m, v: v.fill_(1.0),
    "setitem element": lambda m, v: v.__setitem__(1, 4.0),
}


@pytest.mark.parametrize("name", sorted(WARNED_WRITES))
def test_writes_into_shared_memory_warn_as_torch(name):
    """torch deprecates masked_fill_, index_fill_ and index_put_ into memory several
    elements share, with a UserWarning; fill_ and an element's assignment write quietly."""
    said = []
    for m in (torch, ember):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            WARNED_WRITES[name](m, m.zeros(3).as_strided((3,), (0,)))
        said.append([str(w.message).split(" (Triggered")[0] for w in seen
                     if "expanded tensors" in str(w.message)])
    assert said[0] == said[1]


@pytest.mark.parametrize("name", ["add_", "copy_", "mul_"])
def test_inplace_write_into_a_stride0_view_under_autograd_is_refused(name):
    """``y = x * 1; y.as_strided((3,), (0,)).add_(1)``: torch refuses; ember rebased the
    view on y and wrote the whole result (y became [1, 0, 0], with a graph to match)."""
    for m in (torch, ember):
        x = m.zeros(3, requires_grad=True)
        y = x * 1
        other = m.ones(3, requires_grad=True)
        with pytest.raises(RuntimeError, match="refers to a single memory location"):
            getattr(y.as_strided((3,), (0,)), name)(1 if name == "add_" else other)
        assert y.tolist() == [0.0, 0.0, 0.0] and y.grad_fn.name() == "MulBackward0"


@pytest.mark.parametrize("layout", [((3, 3), (1, 0)), ((3, 3), (0, 1)), ((2, 3), (1, 0))])
def test_init_into_shared_memory(layout):
    """nn.init.eye_ zeros the tensor, then writes the diagonal element by element, into
    memory its elements share (ember wrote the whole identity: [0, 0, 1] where torch
    leaves [1, 1, 1]); orthogonal_ copies a whole matrix and is refused (ember wrote it)."""
    got = []
    for m in (torch, ember):
        x = m.zeros(3)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # (quietly, as torch)
            m.nn.init.eye_(x.as_strided(*layout))
        got.append(x.tolist())
        with pytest.raises(RuntimeError, match="refers to a single memory location"):
            m.nn.init.orthogonal_(m.zeros(3).as_strided(*layout))
    assert got[0] == got[1]
