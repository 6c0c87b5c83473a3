"""Recurrent layers and nn.utils.rnn against torch: outputs, final states, gradients of
inputs, initial states and every parameter, second gradients, packed sequences,
initialisation, errors, and a short training run."""
import numpy as np
import pytest
import torch
from oracle import Case, cases, check, check_raises

import ember


def with_params(mod, tensors):
    """Replace ``mod``'s parameters (in ``named_parameters`` order) by plain tensors."""
    names = [n for n, _ in mod.named_parameters()]
    assert len(names) == len(tensors), names
    for name, t in zip(names, tensors):
        delattr(mod, name)
        setattr(mod, name, t)
    return mod


def _flat(out):
    """(output, h_n) / (output, (h_n, c_n)) / PackedSequence outputs as a flat tuple."""
    flat = []
    for o in out if isinstance(out, tuple) else (out,):
        if isinstance(o, (tuple, list)):
            flat.extend(_flat(tuple(o)))
        else:
            flat.append(o)
    return tuple(flat)


def _param_shapes(cls, args, kw):
    return [tuple(p.shape) for p in getattr(torch.nn, cls)(*args, **kw).parameters()]


def rnn_case(name, cls, I=3, H=4, T=3, B=2, state=False, unbatched=False, train=True,
             dtype=np.float64, **kw):
    D = 2 if kw.get("bidirectional") else 1
    L = kw.get("num_layers", 1)
    Hout = kw.get("proj_size") or H
    if unbatched:
        x_shape = (T, I)
    else:
        x_shape = (B, T, I) if kw.get("batch_first") else (T, B, I)
    lead = (L * D,) if unbatched else (L * D, B)
    states = [lead + (Hout,)] + ([lead + (H,)] if cls == "LSTM" and state else [])
    states = states if state else []
    shapes = _param_shapes(cls, (I, H), kw)

    def fn(m, x, *rest):
        st, params = rest[:len(states)], rest[len(states):]
        mod = with_params(getattr(m.nn, cls)(I, H, **kw).train(train), params)
        if not st:
            return _flat(mod(x))
        return _flat(mod(x, tuple(st) if cls == "LSTM" else st[0]))
    return Case(name, fn, [x_shape] + states + shapes, dtype=dtype)


_KINDS = [("RNN", "RNN", {}), ("RNN_relu", "RNN", {"nonlinearity": "relu"}),
          ("LSTM", "LSTM", {}), ("GRU", "GRU", {})]

MODULES = []
for _tag, _cls, _kw in _KINDS:
    MODULES += [
        rnn_case(f"{_tag}_basic", _cls, **_kw),
        rnn_case(f"{_tag}_state_batch_first", _cls, state=True, batch_first=True, **_kw),
        rnn_case(f"{_tag}_bidir_2layers_state", _cls, state=True, num_layers=2,
                 bidirectional=True, **_kw),
        rnn_case(f"{_tag}_nobias_bidir_bf", _cls, bias=False, bidirectional=True,
                 batch_first=True, **_kw),
        rnn_case(f"{_tag}_nobias_2layers_state", _cls, bias=False, num_layers=2, state=True,
                 **_kw),
        rnn_case(f"{_tag}_unbatched_state", _cls, state=True, unbatched=True, **_kw),
        rnn_case(f"{_tag}_unbatched_bidir_bf", _cls, unbatched=True, bidirectional=True,
                 batch_first=True, **_kw),
        rnn_case(f"{_tag}_dropout_eval", _cls, num_layers=2, dropout=0.5, train=False, **_kw),
        # p=1 zeroes the first layer's output: deterministic in training mode too
        rnn_case(f"{_tag}_dropout1_train", _cls, num_layers=2, dropout=1.0, state=True, **_kw),
        rnn_case(f"{_tag}_float32", _cls, state=True, bidirectional=True, dtype=np.float32,
                 **_kw),
        rnn_case(f"{_tag}_seq1", _cls, T=1, state=True, **_kw),
    ]
MODULES += [
    rnn_case("LSTM_proj_bidir_2layers_state", "LSTM", proj_size=2, num_layers=2,
             bidirectional=True, state=True),
    rnn_case("LSTM_proj_unbatched", "LSTM", proj_size=3, unbatched=True, state=True),
    rnn_case("LSTM_proj_nobias_bf", "LSTM", proj_size=1, bias=False, batch_first=True),
    rnn_case("LSTM_long_wide", "LSTM", T=9, B=5, I=2, H=6, state=True),
]


@cases(MODULES)
def test_module(case):
    check(case)


def cell_case(name, cls, state=True, unbatched=False, I=3, H=4, B=3, **kw):
    x_shape = (I,) if unbatched else (B, I)
    s = (H,) if unbatched else (B, H)
    states = ([s, s] if cls == "LSTMCell" else [s]) if state else []
    shapes = _param_shapes(cls, (I, H), kw)

    def fn(m, x, *rest):
        st, params = rest[:len(states)], rest[len(states):]
        mod = with_params(getattr(m.nn, cls)(I, H, **kw), params)
        if not st:
            return _flat(mod(x))
        return _flat(mod(x, tuple(st) if cls == "LSTMCell" else st[0]))
    return Case(name, fn, [x_shape] + states + shapes)


CELLS = []
for _tag, _cls, _kw in [("RNNCell", "RNNCell", {}),
                        ("RNNCell_relu", "RNNCell", {"nonlinearity": "relu"}),
                        ("LSTMCell", "LSTMCell", {}), ("GRUCell", "GRUCell", {})]:
    CELLS += [
        cell_case(f"{_tag}_state", _cls, **_kw),
        cell_case(f"{_tag}_nostate", _cls, state=False, **_kw),
        cell_case(f"{_tag}_unbatched", _cls, unbatched=True, **_kw),
        cell_case(f"{_tag}_unbatched_nostate", _cls, unbatched=True, state=False, **_kw),
        cell_case(f"{_tag}_nobias", _cls, bias=False, **_kw),
    ]


@cases(CELLS)
def test_cell(case):
    check(case)


def test_cell_loop_matches_module():
    """A Python loop over a cell gives the same gradients as torch's loop."""
    def fn(m, x, h, *params):
        cell = with_params(m.nn.GRUCell(3, 4), params)
        hs = []
        for t in range(x.shape[0]):
            h = cell(x[t], h)
            hs.append(h)
        return m.stack(hs)
    check(Case("GRUCell_loop", fn, [(5, 2, 3), (2, 4)] + _param_shapes("GRUCell", (3, 4), {}),
               gradgrad=False))


# ----- packed sequences -------------------------------------------------------------------
def _pad_packed(m, p, batch_first=False, **kw):
    padded, lengths = m.nn.utils.rnn.pad_packed_sequence(p, batch_first=batch_first, **kw)
    return padded, lengths


def _packed_fields(p):
    out = [p.data, p.batch_sizes]
    if p.sorted_indices is not None:
        out += [p.sorted_indices, p.unsorted_indices]
    return out


def packed_case(name, cls, lengths, enforce_sorted=True, state=False, batch_first=False,
                I=3, H=4, **kw):
    T, B = max(lengths), len(lengths)
    D = 2 if kw.get("bidirectional") else 1
    L = kw.get("num_layers", 1)
    Hout = kw.get("proj_size") or H
    states = ([(L * D, B, Hout)] + ([(L * D, B, H)] if cls == "LSTM" else [])) if state else []
    shapes = _param_shapes(cls, (I, H), kw)
    x_shape = (B, T, I) if batch_first else (T, B, I)

    def fn(m, x, *rest):
        st, params = rest[:len(states)], rest[len(states):]
        mod = with_params(getattr(m.nn, cls)(I, H, batch_first=batch_first, **kw), params)
        p = m.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=batch_first,
                                                enforce_sorted=enforce_sorted)
        if st:
            out, hidden = mod(p, tuple(st) if cls == "LSTM" else st[0])
        else:
            out, hidden = mod(p)
        assert isinstance(out, m.nn.utils.rnn.PackedSequence)
        padded, lens = _pad_packed(m, out, batch_first)
        return tuple(_packed_fields(out)) + (padded, lens) + _flat(hidden)
    return Case(name, fn, [x_shape] + states + shapes)


PACKED = []
for _tag, _cls, _kw in _KINDS:
    PACKED += [
        packed_case(f"{_tag}_packed_sorted", _cls, [4, 3, 3, 1], **_kw),
        packed_case(f"{_tag}_packed_unsorted_bidir_2layers_state", _cls, [2, 4, 1, 3],
                    enforce_sorted=False, state=True, bidirectional=True, num_layers=2, **_kw),
        packed_case(f"{_tag}_packed_ties_bf_bidir", _cls, [1, 3, 1, 3, 2], enforce_sorted=False,
                    batch_first=True, bidirectional=True, **_kw),
    ]
PACKED += [
    packed_case("LSTM_proj_packed_unsorted", "LSTM", [2, 5, 3], enforce_sorted=False,
                state=True, proj_size=2, bidirectional=True),
    packed_case("GRU_packed_equal_lengths_state", "GRU", [3, 3], state=True, num_layers=2),
]


@cases(PACKED)
def test_packed(case):
    check(case)


def _pack_round_trip(lengths, batch_first, enforce_sorted, total_length=None,
                     padding_value=0.0):
    def fn(m, x):
        p = m.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=batch_first,
                                                enforce_sorted=enforce_sorted)
        padded, lens = _pad_packed(m, p, batch_first, total_length=total_length,
                                   padding_value=padding_value)
        return tuple(_packed_fields(p)) + (padded, lens)
    return fn


def _pad_seq(lengths, trail=(2,), **kw):
    def make(rng):
        return [rng.standard_normal((n,) + trail) for n in lengths]

    def fn(m, *seqs):
        out = m.nn.utils.rnn.pad_sequence(list(seqs), **kw)
        return out
    return make, fn


def _pack_seq(lengths, enforce_sorted):
    def make(rng):
        return [rng.standard_normal((n, 2)) for n in lengths]

    def fn(m, *seqs):
        p = m.nn.utils.rnn.pack_sequence(list(seqs), enforce_sorted=enforce_sorted)
        return tuple(_packed_fields(p)) + tuple(m.nn.utils.rnn.unpack_sequence(p))
    return make, fn


def _unpad(batch_first):
    def fn(m, x):
        lengths = m.tensor([4, 1, 3])
        return tuple(m.nn.utils.rnn.unpad_sequence(x * 1, lengths, batch_first=batch_first))
    return fn


PACKING = [
    Case("pack_sorted", _pack_round_trip([4, 2, 2], False, True), [(4, 3, 2)]),
    Case("pack_sorted_bf_longer_input", _pack_round_trip([3, 2, 1], True, True), [(3, 5, 2)]),
    Case("pack_unsorted", _pack_round_trip([1, 4, 2], False, False), [(4, 3, 2)]),
    Case("pack_unsorted_bf_total_length", _pack_round_trip([2, 3, 1, 3], True, False, 6, -1.0),
         [(4, 3)]),
    # ties beyond 16 sequences: torch's (unstable) sort order must be reproduced
    Case("pack_unsorted_ties_20", _pack_round_trip(
        [2, 5, 2, 3, 5, 1, 2, 2, 3, 5, 5, 5, 2, 2, 2, 3, 3, 3, 1, 2], False, False),
        [(5, 20, 2)], gradgrad=False),
    Case("pack_scalar_features", _pack_round_trip([3, 1], False, True), [(3, 2)]),
    Case("pack_int", _pack_round_trip([3, 1], False, False),
         lambda rng: [rng.integers(0, 9, (3, 2, 2))], grad=False),
    Case("pack_float32", _pack_round_trip([2, 3], True, False), [(2, 3, 4)], dtype=np.float32),
    Case("pad_sequence", _pad_seq([3, 5, 1])[1], _pad_seq([3, 5, 1])[0]),
    Case("pad_sequence_bf_value", _pad_seq([2, 4], batch_first=True, padding_value=7.5)[1],
         _pad_seq([2, 4])[0]),
    Case("pad_sequence_left", _pad_seq([2, 4, 3], (2, 3), padding_side="left")[1],
         _pad_seq([2, 4, 3], (2, 3))[0]),
    Case("pad_sequence_left_bf", _pad_seq([1, 3], (), batch_first=True,
                                          padding_side="left")[1], _pad_seq([1, 3], ())[0]),
    Case("pad_sequence_broadcast", lambda m, a, b: m.nn.utils.rnn.pad_sequence([a, b]),
         [(2, 3), (3, 1)]),
    Case("pad_sequence_mixed_dtypes", lambda m, a, b: m.nn.utils.rnn.pad_sequence(
        [a, b.double()]), [(2, 3), (3, 3)], dtype=np.float32),
    Case("pack_sequence", _pack_seq([4, 2, 2], True)[1], _pack_seq([4, 2, 2], True)[0]),
    Case("pack_sequence_unsorted", _pack_seq([1, 4, 2], False)[1],
         _pack_seq([1, 4, 2], False)[0]),
    Case("unpad_sequence", _unpad(False), [(4, 3, 2)]),
    Case("unpad_sequence_bf", _unpad(True), [(3, 4)]),
]


@cases(PACKING)
def test_packing(case):
    check(case)


def test_sort_ties_like_torch():
    from ember.ops.rnn_packing import sort_descending
    rng = np.random.default_rng(5)
    for n in (1, 2, 16, 17, 40, 300):
        for hi in (1, 3, 50):
            a = rng.integers(1, hi + 1, n)
            for arr in (a, np.sort(a), np.sort(a)[::-1].copy()):
                tv, ti = torch.sort(torch.tensor(arr), descending=True)
                ev, ei = sort_descending(arr)
                np.testing.assert_array_equal(ev, tv.numpy())
                np.testing.assert_array_equal(ei, ti.numpy())


def test_packed_sequence_object():
    for m in (ember, torch):
        p = m.nn.utils.rnn.pack_sequence([m.tensor([1.0, 2.0, 3.0]), m.tensor([4.0, 5.0])])
        assert p._fields == ("data", "batch_sizes", "sorted_indices", "unsorted_indices")
        assert p.sorted_indices is None and p.unsorted_indices is None
        assert p.batch_sizes.tolist() == [2, 2, 1] and p.data.tolist() == [1, 4, 2, 5, 3]
        assert p.batch_sizes.dtype == m.int64
        q = p.double()
        assert q.data.dtype == m.float64 and q.batch_sizes.dtype == m.int64
        assert p.long().data.dtype == m.int64 and p.to(m.float32) is p
        assert not p.is_cuda and not p.is_pinned()
        u = m.nn.utils.rnn.pack_sequence([m.tensor([1.0]), m.tensor([2.0, 3.0])],
                                         enforce_sorted=False)
        assert u.sorted_indices.tolist() == [1, 0] and u.unsorted_indices.tolist() == [1, 0]
        r = m.nn.utils.rnn.PackedSequence(u.data, u.batch_sizes, u.sorted_indices)
        assert r.unsorted_indices.tolist() == [1, 0]
        assert m.nn.utils.rnn.invert_permutation(m.tensor([2, 0, 1])).tolist() == [1, 2, 0]
        assert m.nn.utils.rnn.invert_permutation(None) is None
        data, bs, si, ui = u
        assert si.tolist() == [1, 0]


def test_unpad_transposes_in_place_like_torch():
    for m in (ember, torch):
        x = m.zeros(4, 3, 2)
        m.nn.utils.rnn.unpad_sequence(x, m.tensor([4, 2, 1]))
        assert tuple(x.shape) == (3, 4, 2)


# ----- errors --------------------------------------------------------------------------------
def _msg(fn, *arrays):
    e = check_raises(fn, *arrays)
    with pytest.raises(Exception) as t:
        fn(torch, *[torch.from_numpy(a) for a in arrays])
    return str(e), str(t.value)


@pytest.mark.parametrize("fn,arrays", [
    (lambda m, x: m.nn.RNN(10, 20)(x), [np.zeros((5, 3, 7), np.float32)]),
    (lambda m, x, h: m.nn.RNN(10, 20)(x, h),
     [np.zeros((5, 3, 10), np.float32), np.zeros((1, 4, 20), np.float32)]),
    (lambda m, x, h: m.nn.GRU(10, 20, 2)(x, h),
     [np.zeros((5, 3, 10), np.float32), np.zeros((1, 3, 20), np.float32)]),
    (lambda m, x, h: m.nn.LSTM(10, 20)(x, (h, h)),
     [np.zeros((5, 3, 10), np.float32), np.zeros((1, 3, 21), np.float32)]),
    (lambda m, x, h, c: m.nn.LSTM(10, 20)(x, (h, c)),
     [np.zeros((5, 3, 10), np.float32), np.zeros((1, 3, 20), np.float32),
      np.zeros((1, 4, 20), np.float32)]),
    (lambda m, x, h: m.nn.RNN(10, 20)(x, h),
     [np.zeros((5, 3, 10), np.float32), np.zeros((3, 20), np.float32)]),
    (lambda m, x, h: m.nn.GRU(10, 20)(x, h),
     [np.zeros((5, 10), np.float32), np.zeros((1, 1, 20), np.float32)]),
    (lambda m, x, h: m.nn.LSTM(10, 20)(x, (h, h[0])),
     [np.zeros((5, 3, 10), np.float32), np.zeros((1, 3, 20), np.float32)]),
    (lambda m, x: m.nn.RNN(10, 20)(x), [np.zeros((5, 3, 10, 1), np.float32)]),
    (lambda m, x: m.nn.LSTM(10, 20)(x), [np.zeros((5,), np.float32)]),
    (lambda m, x: m.nn.GRU(10, 20)(x), [np.zeros((5, 3, 10, 1), np.float32)]),
    (lambda m, x: m.nn.LSTM(10, 20)(x), [np.zeros((0, 3, 10), np.float32)]),
    (lambda m, x: m.nn.RNNCell(10, 20)(x), [np.zeros((3, 7), np.float32)]),
    (lambda m, x, h: m.nn.RNNCell(10, 20)(x, h),
     [np.zeros((3, 10), np.float32), np.zeros((4, 20), np.float32)]),
    (lambda m, x, h: m.nn.GRUCell(10, 20)(x, h),
     [np.zeros((3, 10), np.float32), np.zeros((3, 5), np.float32)]),
    (lambda m, x, h: m.nn.LSTMCell(10, 20)(x, (h, h[:, :3])),
     [np.zeros((3, 10), np.float32), np.zeros((3, 20), np.float32)]),
    (lambda m, x, h: m.nn.LSTMCell(10, 20)(x, (h,)),
     [np.zeros((3, 10), np.float32), np.zeros((3, 20), np.float32)]),
    (lambda m, x: m.nn.LSTMCell(10, 20)(x), [np.zeros((3, 10, 1), np.float32)]),
    (lambda m, x, h: m.nn.GRUCell(10, 20)(x, h),
     [np.zeros((3, 10), np.float32), np.zeros((1, 3, 20), np.float32)]),
    (lambda m, x: m.nn.RNNCell(10, 20, nonlinearity="sig")(x), [np.zeros((2, 10), np.float32)]),
    (lambda m, x: m.nn.RNNCell(10, 20)(x), [np.zeros((2, 10), np.float64)]),
    (lambda m, x, h: m.nn.GRUCell(3, 4)(x, h),
     [np.zeros((2, 3), np.float32), np.zeros((2, 4), np.float64)]),
    (lambda m, x, h: m.nn.RNN(3, 4)(x, h),
     [np.zeros((5, 2, 3), np.float32), np.zeros((1, 2, 4), np.float64)]),
    (lambda m, x: m.nn.utils.rnn.pack_padded_sequence(x, [3, 2, 4]),
     [np.zeros((4, 3, 2), np.float32)]),
    (lambda m, x: m.nn.utils.rnn.pack_padded_sequence(x, [4, 2, 0]),
     [np.zeros((4, 3, 2), np.float32)]),
    (lambda m, x: m.nn.utils.rnn.pack_padded_sequence(x, [4, 2]),
     [np.zeros((4, 3, 2), np.float32)]),
    (lambda m, x: m.nn.utils.rnn.pack_padded_sequence(x, [0, 2, 1], enforce_sorted=False),
     [np.zeros((4, 3, 2), np.float32)]),
    (lambda m, x: m.nn.utils.rnn.pad_packed_sequence(
        m.nn.utils.rnn.pack_padded_sequence(x, [4, 2, 1]), total_length=3),
     [np.zeros((4, 3, 2), np.float32)]),
    (lambda m, x: m.nn.utils.rnn.pad_sequence([x, x[:, :2, :]]), [np.zeros((2, 3, 4))]),
    (lambda m, x: m.nn.utils.rnn.pad_sequence([x], padding_side="up"), [np.zeros((2, 3))]),
    (lambda m: m.nn.utils.rnn.pad_sequence([]), []),
])
def test_errors_match_torch(fn, arrays):
    e, t = _msg(fn, *arrays)
    assert e.replace("ember.", "torch.") == t


def test_dtype_mismatch_error():
    for m in (ember, torch):
        with pytest.raises(ValueError, match=r"RNN input dtype \(\w+.float64\) does not match"):
            m.nn.LSTM(10, 20)(m.zeros(5, 3, 10, dtype=m.float64))


@pytest.mark.parametrize("make", [
    lambda m: m.nn.LSTM(10, 20, proj_size=20),
    lambda m: m.nn.LSTM(10, 20, proj_size=-1),
    lambda m: m.nn.GRU(10, 20, proj_size=2),
    lambda m: m.nn.RNN(10, 20, proj_size=2),
    lambda m: m.nn.RNN(10, 20, nonlinearity="sigmoid"),
    lambda m: m.nn.RNN(10, 20, dropout=2),
    lambda m: m.nn.RNN(10, 20, dropout=True),
    lambda m: m.nn.RNN(10, 20, num_layers=0),
    lambda m: m.nn.RNN(10.0, 20),
    lambda m: m.nn.RNN(10, 0),
    lambda m: m.nn.GRU(0, 20),
    lambda m: m.nn.LSTM(10, 20, bias=1),
    lambda m: m.nn.LSTM(10, 20, batch_first=None),
])
def test_constructor_errors(make):
    with pytest.raises(Exception) as t:
        make(torch)
    with pytest.raises(type(t.value)) as e:
        make(ember)
    assert str(e.value) == str(t.value)


def test_dropout_single_layer_warns():
    for m in (ember, torch):
        with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
            m.nn.GRU(3, 4, dropout=0.2)


# ----- module API ------------------------------------------------------------------------------
_CONFIGS = [
    ("RNN", (5, 7), {}), ("RNN", (5, 7, 2), {"nonlinearity": "relu", "bias": False}),
    ("LSTM", (5, 7), {"num_layers": 2, "bidirectional": True}),
    ("LSTM", (5, 7), {"proj_size": 3, "num_layers": 2, "bidirectional": True,
                      "batch_first": True, "dropout": 0.25}),
    ("GRU", (5, 7), {"bias": False, "batch_first": True}),
    ("RNNCell", (5, 7), {}), ("RNNCell", (5, 7), {"nonlinearity": "relu", "bias": False}),
    ("LSTMCell", (5, 7), {}), ("GRUCell", (5, 7), {"bias": False}),
]


@pytest.mark.parametrize("cls,args,kw", _CONFIGS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_init_names_and_repr_match_torch(cls, args, kw, dtype):
    torch.manual_seed(11)
    ember.manual_seed(11)
    t = getattr(torch.nn, cls)(*args, dtype=getattr(torch, dtype), **kw)
    e = getattr(ember.nn, cls)(*args, dtype=getattr(ember, dtype), **kw)
    te, tt = list(e.named_parameters()), list(t.named_parameters())
    assert [n for n, _ in te] == [n for n, _ in tt]
    for (_, a), (_, b) in zip(te, tt):
        assert a.dtype.name == dtype
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    assert repr(e) == repr(t)
    assert ember.get_rng_state().numpy().tobytes() == torch.get_rng_state().numpy().tobytes()
    if not cls.endswith("Cell"):
        assert e._flat_weights_names == t._flat_weights_names
        assert [[tuple(p.shape) for p in ws] for ws in e.all_weights] == \
               [[tuple(p.shape) for p in ws] for ws in t.all_weights]
        assert e.flatten_parameters() is None


def test_reset_parameters_and_state_dict_from_torch():
    t = torch.nn.LSTM(4, 6, num_layers=2, bidirectional=True).double()
    e = ember.nn.LSTM(4, 6, num_layers=2, bidirectional=True).double()
    e.load_state_dict({k: ember.tensor(v.numpy()) for k, v in t.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((5, 2, 4))
    ye, (he, ce) = e(ember.tensor(x))
    yt, (ht, ct) = t(torch.tensor(x))
    for a, b in ((ye, yt), (he, ht), (ce, ct)):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12)
    torch.manual_seed(2)
    ember.manual_seed(2)
    t.reset_parameters()
    e.reset_parameters()
    for a, b in zip(e.parameters(), t.parameters()):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    assert list(e.state_dict()) == list(t.state_dict())


def test_dropout_train_mode():
    """Dropout between layers acts in training only, on every layer but the last."""
    ember.manual_seed(0)
    m = ember.nn.GRU(3, 8, num_layers=3, dropout=0.5)
    x = ember.randn(6, 4, 3)
    m.eval()
    y_eval = m(x)[0]
    np.testing.assert_array_equal(m(x)[0].detach().numpy(), y_eval.detach().numpy())
    m.train()
    y1, y2 = m(x)[0], m(x)[0]
    assert not np.allclose(y1.detach().numpy(), y2.detach().numpy())
    assert not np.allclose(y1.detach().numpy(), y_eval.detach().numpy())
    y1.sum().backward()
    assert all(p.grad is not None for p in m.parameters())


def test_outputs_do_not_alias():
    m = ember.nn.RNN(3, 4)
    y, h = m(ember.randn(1, 2, 3))
    before = y.detach().numpy().copy()
    with ember.no_grad():
        h.add_(1.0)
    np.testing.assert_array_equal(y.detach().numpy(), before)


def test_backward_twice_with_retain_graph():
    m = ember.nn.LSTM(3, 4, bidirectional=True)
    x = ember.randn(5, 2, 3, requires_grad=True)
    y, (h, c) = m(x)
    loss = y.pow(2).sum() + c.sum()
    g1 = ember.autograd.grad(loss, [x] + list(m.parameters()), retain_graph=True)
    g2 = ember.autograd.grad(loss, [x] + list(m.parameters()))
    for a, b in zip(g1, g2):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_no_grad_and_zero_batch():
    for m in (ember, torch):
        lstm = m.nn.LSTM(3, 4, num_layers=2)
        with m.no_grad():
            y, (h, c) = lstm(m.zeros(5, 0, 3))
        assert tuple(y.shape) == (5, 0, 4) and tuple(h.shape) == (2, 0, 4)
        assert not y.requires_grad


# ----- training ----------------------------------------------------------------------------------
def _train_classifier(m, params, steps):
    nn = m.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(3, 8, batch_first=True, bidirectional=True)
            self.head = nn.Linear(16, 3)

        def forward(self, x, lengths):
            p = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True,
                                                  enforce_sorted=False)
            out, (h, _) = self.lstm(p)
            padded, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
            return self.head(m.cat([h[0], h[1]], 1) + padded.mean(1).sum(1, keepdim=True))

    net = Net().double()
    with m.no_grad():
        for p, v in zip(net.parameters(), params):
            p.copy_(m.tensor(v))
    opt = m.optim.Adam(net.parameters(), lr=0.02)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((48, 7, 3))
    lengths = rng.integers(1, 8, 48)
    for i, n in enumerate(lengths):
        x[i, n:] = 0.0
    # the class: where the running sum of the first feature ends up, in three bins
    y = np.digitize(x[:, :, 0].sum(1), [-1.0, 1.0])
    losses = []
    for step in range(steps):
        idx = slice(step % 6 * 8, step % 6 * 8 + 8)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(net(m.tensor(x[idx]), lengths[idx].tolist()),
                                           m.tensor(y[idx]))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return np.array(losses)


def test_lstm_classifier_training_matches_torch():
    torch.manual_seed(0)
    init = [p.detach().double().numpy().copy() for p in
            torch.nn.LSTM(3, 8, batch_first=True, bidirectional=True).parameters()]
    init += [p.detach().double().numpy().copy() for p in torch.nn.Linear(16, 3).parameters()]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # torch's thread pool crawls on tiny ops on a loaded machine
    try:
        t = _train_classifier(torch, init, 240)
    finally:
        torch.set_num_threads(threads)
    e = _train_classifier(ember, init, 240)
    np.testing.assert_allclose(e, t, rtol=1e-6, atol=1e-8)
    assert t[-24:].mean() < 0.5 * t[:24].mean()


@pytest.mark.parametrize("cls, which", [("LSTM", "weight_ih_l0"), ("GRU", "weight_hh_l0"),
                                        ("RNN", "bias_ih_l0")])
def test_a_weight_with_rows_for_another_hidden_size_raises(cls, which):
    # PyTorch reads the first gates * hidden_size rows of such a weight and gives their
    # result silently; ember refuses it (its kernels would read the rows otherwise)
    mod = getattr(ember.nn, cls)(3, 4)
    w = getattr(mod, which)
    bigger = ember.cat([w.detach(), w.detach()[:1]], 0)
    with ember.no_grad():
        setattr(mod, which, ember.nn.Parameter(bigger))
    with pytest.raises(RuntimeError, match="hidden_size rows"):
        mod(ember.ones(2, 1, 3))
