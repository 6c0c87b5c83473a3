"""Traced index, mask and count tensors are inputs of the trace, not constants.

Sweep: every oracle case (the ``Case`` tables of the test modules, walked as
``test_node_names`` walks them) whose call takes an integer or boolean tensor, either as
one of its inputs or made in the call with ``m.tensor(...)``, is traced with those
tensors as inputs of the traced function, then run with other valid ones (the values
permuted, mapped onto each other, shifted; one more or one fewer along the first dim):
the traced function must give eager's answer, or the trace must have said with a
``TracerWarning`` that it keeps a value. A variant eager rejects is not a valid input
and is not run.

Saving: a traced function with an index input, written with ``ember.jit.save``, loads
in ``torch.jit.load`` and runs there with another index; exported with
``ember.onnx.export``, it runs in onnxruntime with another index.
"""
import functools
import io
import os
import sys
import warnings

import numpy as np
import pytest
import torch

import ember

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from oracle import _outputs, make_inputs  # noqa: E402
from test_node_names import _tables  # noqa: E402

_EMBER_DIR = os.path.dirname(os.path.abspath(ember.__file__))

# cases whose trace raises before any index is involved (a clear error, not a wrong
# answer): cross_entropy with weights and ignore_index or label smoothing writes through
# a view of a value the tracer keeps, which it refuses to record
TRACE_RAISES = {
    f"test_nn_losses::LOSSES::CE_{k}_{r}"
    for k in ("smoothing", "smoothing_weight", "weight_ignore") for r in ("mean", "none", "sum")
}


def _is_index(a):
    return isinstance(a, np.ndarray) and a.dtype.kind in "iub"


class _Lift:
    """While active, ``ember.tensor``/``ember.as_tensor`` called from a test's own code
    with integer or boolean data return the next tensor of ``given`` (the traced
    inputs), or, with ``given=None``, note the arrays they make (``made``)."""

    def __init__(self, given=None):
        self.given = None if given is None else list(given)
        self.made = []

    def __enter__(self):
        self.saved = ember.tensor, ember.as_tensor
        ember.tensor = self._wrap(self.saved[0])
        ember.as_tensor = self._wrap(self.saved[1])
        return self

    def __exit__(self, *exc):
        ember.tensor, ember.as_tensor = self.saved

    def _wrap(self, make):
        def fn(*args, **kwargs):
            t = make(*args, **kwargs)
            caller = sys._getframe(1).f_code.co_filename
            if caller.startswith(_EMBER_DIR) or t._data.dtype.kind not in "iub":
                return t
            if self.given is None:
                self.made.append(t._data.copy())
                return t
            if not self.given:
                raise AssertionError("the call made more index tensors than when traced")
            return self.given.pop(0)
        return fn


def _variants(a):
    """Other valid-looking arrays for ``a``: same shape with other values, and one
    more or one fewer along the first dim."""
    out = []
    flat = a.reshape(-1)
    if a.dtype.kind == "b":
        out.append(~a)
    else:
        uniq = np.unique(flat)
        if uniq.size > 1:
            nxt = {u: uniq[(i + 1) % uniq.size] for i, u in enumerate(uniq)}
            out.append(np.array([nxt[v] for v in flat], a.dtype).reshape(a.shape))
        elif uniq.size == 1:
            out += [a - 1, a + 1]
    if flat.size > 1:
        perm = np.random.default_rng(0).permutation(flat.size)
        out.append(flat[perm].reshape(a.shape))
        out.append(flat[::-1].reshape(a.shape))
    if a.ndim:
        out.append(np.concatenate([a, a[:1]]))
        if a.shape[0] > 1:
            out.append(a[:-1])
    return [np.asarray(v).astype(a.dtype) for v in out
            if v.shape != a.shape or not np.array_equal(v, a)]


def _run(case, arrays, lifted):
    """Eager ``case.fn`` on ``arrays`` with the ``m.tensor`` index tensors ``lifted``."""
    ins = [ember.from_numpy(a.copy()) if isinstance(a, np.ndarray) else a for a in arrays]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with _Lift([ember.from_numpy(x.copy()) for x in lifted]):
            return _outputs(case.fn(ember, *ins))


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [y for x in out for y in _flat(x)]
    return [out]


def _same(got, want):
    got, want = _flat(got), _flat(want)
    if len(got) != len(want):
        return False
    for g, w in zip(got, want):
        if not isinstance(w, ember.Tensor):
            if g != w:
                return False
            continue
        if tuple(g.shape) != tuple(w.shape) or g.dtype != w.dtype:
            return False
        a, b = g.detach().numpy(), w.detach().numpy()
        if a.dtype.kind == "c" or b.dtype.kind == "c":
            ok = np.allclose(a, b, rtol=1e-6, atol=1e-9, equal_nan=True)
        else:
            ok = np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=1e-6,
                             atol=1e-9, equal_nan=True)
        if not ok:
            return False
    return True


def check_case(case):
    """``("random", 0)`` (the replay differs at the example itself: random ops),
    ``("equal", n)`` (every one of the n variants run gave eager's answer),
    ``("warned", n)`` (the trace said it keeps a value), ``("none", 0)`` (the case has
    no index tensor), or ``("WRONG", description)``."""
    arrays = make_inputs(case)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with _Lift() as disc:
            try:
                case.fn(ember, *[ember.from_numpy(a.copy()) if isinstance(a, np.ndarray)
                                 else a for a in arrays])
            except Exception:
                return ("none", 0)  # a case made to raise
    lifted = disc.made
    at = [i for i, a in enumerate(arrays) if isinstance(a, np.ndarray)]
    if not lifted and not any(_is_index(arrays[i]) for i in at):
        return ("none", 0)

    def traced_fn(*ts):
        xs = list(arrays)
        for i, t in zip(at, ts):
            xs[i] = t
        with _Lift(ts[len(at):]):
            return case.fn(ember, *xs)

    example = [ember.from_numpy(arrays[i].copy()) for i in at] + \
        [ember.from_numpy(x.copy()) for x in lifted]
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        tf = ember.jit.trace(traced_fn, tuple(example), check_trace=False)
    warned = any(issubclass(x.category, ember.jit.TracerWarning) for x in w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced_out = None if warned else _outputs(tf(*example))
        if not warned and not _same(traced_out, _run(case, arrays, lifted)):
            return ("random", 0)  # a replay draws other random numbers (dropout)
    slots = [("input", i) for i in at if _is_index(arrays[i])] + \
        [("made", k) for k in range(len(lifted))]
    ran = 0
    for where, k in slots:
        base = arrays[k] if where == "input" else lifted[k]
        for v in _variants(base):
            xs, ls = list(arrays), list(lifted)
            if where == "input":
                xs[k] = v
            else:
                ls[k] = v
            try:
                want = _run(case, xs, ls)
            except Exception:
                continue  # not a valid input of the op
            ins = [ember.from_numpy(xs[i].copy()) for i in at] + \
                [ember.from_numpy(x.copy()) for x in ls]
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    got = _outputs(tf(*ins))
                ok = _same(got, want)
            except Exception as e:  # noqa: BLE001 - a replay that fails is reported
                if not warned and isinstance(e, RuntimeError) and \
                        "when it was traced" in str(e) and \
                        len(_flat(want)) != len(_flat(traced_out)):
                    # eager returns another number of tensors (tensor_split at more
                    # indices): a trace keeps its result's structure and says so, as
                    # PyTorch's ``prim::ListUnpack`` does; loud, not a wrong answer
                    continue
                ok = False
                err = f"{type(e).__name__}: {e}"
            else:
                err = "different values"
            ran += 1
            if not ok and not warned:
                return ("WRONG", f"{where} {k} = {v.tolist()}: {err}")
    return ("warned" if warned else "equal", ran)


@functools.lru_cache(maxsize=1)
def sweep():
    out = {}
    for key, case in _tables():
        if key in TRACE_RAISES:
            continue
        r = check_case(case)
        if r[0] != "none":
            out[key] = r
    return out


# the cases whose trace keeps a value and says so with a TracerWarning (PyTorch's trace
# warns for them too): unpad_sequence iterates over its lengths (the number of sequences
# is the example's), while_loop runs its Python loop the example's number of times
WARNED = {"test_nn_rnn::PACKING::unpad_sequence", "test_nn_rnn::PACKING::unpad_sequence_bf",
          "test_tensor_methods::TABLE::while_loop"}
# recorded as one call whose output shape follows the data: each must stay sound
SOUND = {"test_nn_functional::LINEAR::one_hot", "test_ops_indexing::MASKED::masked_select_bcast",
         "test_ops_shape::SPLITS::tensor_split_tensor", "test_tensor_methods::TABLE::bincount",
         "test_tensor_methods::TABLE::gcd_ lcm_", "test_tensor_methods::TABLE::gcd_lcm",
         "test_tensor_methods::TABLE::segment_reduce",
         "test_tensor_methods::TABLE::segment_reduce_offsets_axis_initial",
         "test_torch_kernels::TABLE::ctc_loss"}


def test_sweep_index_args_follow_the_inputs():
    res = sweep()
    wrong = {k: r[1] for k, r in res.items() if r[0] == "WRONG"}
    assert not wrong, "\n".join(f"{k}: {v}" for k, v in sorted(wrong.items()))
    assert {k for k, r in res.items() if r[0] == "warned"} == WARNED
    assert all(res[k][0] == "equal" and res[k][1] > 0 for k in SOUND), \
        {k: res[k] for k in SOUND}
    equal = sum(1 for r in res.values() if r[0] == "equal")
    warned = sum(1 for r in res.values() if r[0] == "warned")
    random = sorted(k for k, r in res.items() if r[0] == "random")
    assert all("dropout" in k for k in random), random
    assert equal + warned + len(random) == len(res)
    # the sweep reaches the index ops: most cases run at least one other valid index
    assert len(res) > 200 and sum(1 for r in res.values() if r[1]) > 180, (len(res), equal)
    print(f"\n{len(res)} cases with index tensors: {equal} equal eager at other indices, "
          f"{warned} say TracerWarning, {len(random)} random (not compared)")


def test_sweep_known_trace_failures_still_raise():
    tables = dict(_tables())
    for key in sorted(TRACE_RAISES):
        with pytest.raises(NotImplementedError, match="changed in place through another"):
            check_case(tables[key])


def test_sweep_catches_a_frozen_index():
    """The check fails on a trace that keeps an index as a constant without a word."""
    from oracle import Case

    def fn(m, x):
        i = m.tensor([2, 0])
        # a copy made behind the tracer's back (no op, no Python-value conversion)
        return x.index_select(0, m.from_numpy(i._data.copy()))
    r = check_case(Case("frozen", fn, [(3, 2)]))
    assert r[0] == "WRONG", r


def test_frozen_index_inside_an_op_warns_with_the_argument_and_line():
    """An op that computes its array from an index argument outside the recorded ops
    (index_put reads a boolean mask's True positions) says so, at the user's line."""
    x, m = ember.randn(4), ember.tensor([True, False, True, False])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        ember.jit.trace(lambda x, m: x.index_put((m,), ember.tensor(1.0)).sum(), (x, m),
                        check_trace=False)
    tw = [x for x in w if issubclass(x.category, ember.jit.TracerWarning)]
    assert tw and "'indices'" in str(tw[0].message), [str(x.message) for x in w]
    assert tw[0].filename == __file__


def _traced_ops():
    return {
        "index_select": (lambda x, i: x.index_select(0, i) * 2, (5, 3),
                         [4, 0, 2], [1, 1, 3, 0]),
        "index_select_dim1": (lambda x, i: x.index_select(1, i), (3, 5), [4, 0], [2, 2, 1]),
        "gather": (lambda x, i: x.gather(0, i), (5, 3), [[4, 0, 2]], [[1, 1, 3], [0, 2, 4]]),
        "getitem": (lambda x, i: x[i] + 1, (5, 3), [4, 0, 2], [3, 3]),
    }


class _Module(ember.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x, i):
        return self.fn(x, i)


@pytest.mark.parametrize("name", sorted(_traced_ops()))
def test_saved_trace_runs_in_torch_with_another_index(name, tmp_path):
    fn, shape, i0, i1 = _traced_ops()[name]
    x = ember.randn(*shape)
    tf = ember.jit.trace(_Module(fn), (x, ember.tensor(i0)))
    path = str(tmp_path / "m.pt")
    ember.jit.save(tf, path)
    loaded = torch.jit.load(path)
    xt = torch.from_numpy(x.numpy().copy())
    want = fn(xt, torch.tensor(i1))
    got = loaded(xt, torch.tensor(i1))
    torch.testing.assert_close(got, want)
    assert "index" in loaded.graph.str() or "gather" in loaded.graph.str()


@pytest.mark.parametrize("name", ["index_select", "index_select_dim1", "getitem"])
def test_onnx_export_runs_in_onnxruntime_with_another_index(name):
    import onnxruntime as ort
    fn, shape, i0, i1 = _traced_ops()[name]
    x = ember.randn(*shape)
    buf = io.BytesIO()
    ember.onnx.export(_Module(fn), (x, ember.tensor(i0)), buf, input_names=["x", "i"],
                      output_names=["y"], dynamic_axes={"i": {0: "n"}})
    sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    (got,) = sess.run(None, {"x": x.numpy(), "i": np.asarray(i1, np.int64)})
    want = fn(torch.from_numpy(x.numpy().copy()), torch.tensor(i1)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert "Gather" in {n.op_type for n in __import__("onnx").load_from_string(
        buf.getvalue()).graph.node}


def test_traced_graph_takes_the_index_as_an_input():
    """As PyTorch's trace: ``aten::index_select(%x, %dim, %i)`` with ``%i`` the input."""
    tm = ember.jit.trace(_Module(lambda x, i: x.index_select(0, i)),
                         (ember.randn(5, 3), ember.tensor([4, 0, 2])))
    text = str(tm.graph)
    assert "= aten::index_select(%x, %4, %i)" in text and "array(" not in text, text
    assert "return torch.index_select(x, 0, i)" in tm.code, tm.code


def test_check_inputs_catch_what_a_trace_keeps():
    """``check_inputs`` runs the trace made on the example with each check input and
    compares with the function: a kept mask or result fails the check, as in PyTorch;
    an index recorded as an input passes."""
    x = ember.randn(4)
    m1, m2 = ember.tensor([True, False, True, False]), ember.tensor([False, True, True, True])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ember.jit.TracingCheckError, match="does not match"):
            ember.jit.trace(lambda x, m: x.index_put((m,), ember.tensor(1.0)), (x, m1),
                            check_inputs=[(x, m2)])
    ember.jit.trace(lambda x, i: x.index_select(0, i), (x, ember.tensor([1, 2])),
                    check_inputs=[(x, ember.tensor([3, 0, 0]))])
    # recorded as one call each, their shapes and values computed again
    ember.jit.trace(lambda x, m: x.masked_select(m).sum(), (x, m1), check_inputs=[(x, m2)])
    ember.jit.trace(lambda a, b: a.gcd(b), (ember.tensor([4, 6]), ember.tensor([6, 4])),
                    check_inputs=[(ember.tensor([9, 6]), ember.tensor([6, 4]))])


def test_bucketize_and_searchsorted_follow_their_boundaries(tmp_path):
    """Recorded as one call each (their answers are values of both inputs), written as
    ``torch.bucketize``/``torch.searchsorted``: the saved trace runs in torch with other
    boundaries."""
    fn = _Module(lambda x, b: ember.bucketize(x, b, right=True) + ember.searchsorted(b, x))
    tm = ember.jit.trace(fn, (ember.randn(5), ember.tensor([-1.0, 0.0, 1.0])))
    x, b = ember.randn(6), ember.tensor([-0.5, 0.2, 0.3, 2.0])
    assert tm(x, b).tolist() == fn(x, b).tolist()
    path = str(tmp_path / "m.pt")
    ember.jit.save(tm, path)
    xt, bt = torch.from_numpy(x.numpy().copy()), torch.from_numpy(b.numpy().copy())
    want = torch.bucketize(xt, bt, right=True) + torch.searchsorted(bt, xt)
    assert torch.equal(torch.jit.load(path)(xt, bt), want)


def _value_ops(lib):
    """Calls whose output shape follows an integer or boolean argument: (fn on (x, i),
    x's shape, the index traced, another index)."""
    F = lib.nn.functional
    return {
        "masked_select": (lambda x, m: x.masked_select(m) * 2, (2, 3),
                          [True, False, True], [False, True, True]),
        "one_hot": (lambda x, i: F.one_hot(i) * x.sum(), (1,), [0, 2], [4, 1, 0]),
        "bincount": (lambda x, i: i.bincount(x, minlength=2), (3,), [0, 2, 2], [5, 1, 1]),
        "gcd_lcm": (lambda x, i: i.gcd(i.flip(0) + 2) + lib.lcm(i, i + 1) + x.long(), (3,),
                    [4, 6, 9], [10, 3, 8]),
        "gcd_": (lambda x, i: i.clone().gcd_(i + 2) + x.long(), (3,), [4, 6, 9], [7, 2, 12]),
        "segment_reduce": (lambda x, i: lib.segment_reduce(x, "max", lengths=i), (5,),
                           [2, 0, 3], [1, 4]),
        "tensor_split": (lambda x, i: lib.tensor_split(x, i)[1] * 2, (6,), [2, 3], [1, 5]),
        "ctc_loss": (lambda x, i: lib.ctc_loss(x.log_softmax(2), i, [6, 5], [3, 2], 0, 1,
                                               False), (6, 2, 4),
                     [[1, 2, 2], [1, 3, 0]], [[3, 3, 1], [2, 2, 0]]),
    }


@pytest.mark.parametrize("name", sorted(_value_ops(ember)))
def test_data_shaped_calls_follow_the_index_in_replay_and_in_torch(name, tmp_path):
    """Recorded as one call (PyTorch's trace records the aten op): the replay, and the
    saved trace in ``torch.jit.load``, give eager's answer at another index, of
    another length where the op allows it."""
    fn, shape, i0, i1 = _value_ops(ember)[name]
    tfn = _value_ops(torch)[name][0]
    x = ember.randn(*shape)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ember.jit.TracerWarning)
        tm = ember.jit.trace(_Module(fn), (x, ember.tensor(i0)))
    xt = torch.from_numpy(x.numpy().copy())
    want = tfn(xt, torch.tensor(i1))
    got = tm(x, ember.tensor(i1))
    np.testing.assert_allclose(got.detach().numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    path = str(tmp_path / "m.pt")
    ember.jit.save(tm, path)
    torch.testing.assert_close(torch.jit.load(path)(xt, torch.tensor(i1)), want)
    back = ember.jit.load(path)(x, ember.tensor(i1))
    np.testing.assert_allclose(back.detach().numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def test_a_traced_split_at_more_indices_says_so():
    """Another number of split points gives another number of results: the trace keeps
    the example's structure and raises, as PyTorch's does."""
    tm = ember.jit.trace(lambda x, i: ember.tensor_split(x, i), (ember.randn(6),
                                                                 ember.tensor([2, 3])))
    assert len(tm(ember.randn(6), ember.tensor([1, 4]))) == 3
    with pytest.raises(RuntimeError, match="returned 4 tensors in this run but 3"):
        tm(ember.randn(6), ember.tensor([1, 2, 4]))


@pytest.mark.parametrize("name", ["masked_select", "one_hot"])
def test_data_shaped_calls_export_to_onnx_and_follow_the_index(name):
    """Their ONNX spellings (``Compress``; ``OneHot`` of width ``ReduceMax + 1``) leave
    the output shape to the runtime: onnxruntime gives eager's answer at another index,
    of another length."""
    import onnx
    import onnxruntime as ort
    fn, shape, i0, i1 = _value_ops(ember)[name]
    x = ember.randn(*shape)
    buf = io.BytesIO()
    ember.onnx.export(_Module(fn), (x, ember.tensor(i0)), buf, input_names=["x", "i"],
                      output_names=["y"], dynamic_axes={"i": {0: "n"}})
    sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    i = np.asarray(i1, np.bool_ if name == "masked_select" else np.int64)
    (got,) = sess.run(None, {"x": x.numpy(), "i": i})
    want = _value_ops(torch)[name][0](torch.from_numpy(x.numpy().copy()), torch.tensor(i1))
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)
    ops = {n.op_type for n in onnx.load_from_string(buf.getvalue()).graph.node}
    assert ("Compress" if name == "masked_select" else "OneHot") in ops, ops
