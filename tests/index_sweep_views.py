"""Sweep table: nonzero (as_tuple), where (1-arg and 3-arg with scalars), narrow,
select, unbind, diagonal, diag_embed, tril_indices/triu_indices; cases as
(op, name, fn(E))."""
import numpy as np

CASES = []


def case(op, name, fn, rtol=1e-6):
    CASES.append((op, name, fn, rtol))


# nonzero ---------------------------------------------------------------------------------
NZ = {
    "2d": ([[0, 1.5, 0], [-0.0, float("nan"), 2]], "f32"),
    "1d_int": ([0, 3, 0, -1], "i64"),
    "bool": ([[True, False], [False, True]], "b"),
    "u8": ([0, 5, 255], "u8"),
    "complex": ([0, 1j, 1], "c64"),
    "0d_true": (3.0, "f32"),
    "0d_false": (0.0, "f32"),
    "empty": (np.zeros((0, 3)), "f32"),
    "3d": (np.arange(12).reshape(2, 3, 2) % 3, "i32"),
}
for name, (data, dt) in NZ.items():
    case("nonzero", name, lambda E, data=data, dt=dt: E.t(data, dt).nonzero())
    case("nonzero", name + "_tuple", lambda E, data=data, dt=dt: E.t(data, dt).nonzero(
        as_tuple=True))
    case("nonzero", name + "_fn", lambda E, data=data, dt=dt: E.m.nonzero(E.t(data, dt)))
case("nonzero", "nc", lambda E: E.t(np.eye(3, 4), layout="T").nonzero())
case("nonzero", "out", lambda E: E.m.nonzero(E.t([0, 1, 1]), out=E.m.empty(0, dtype=E.m.long)))
case("nonzero", "argwhere", lambda E: E.m.argwhere(E.t([[0, 1], [1, 1]])))
case("nonzero", "count_nonzero", lambda E: E.m.count_nonzero(E.t([[0, 1], [1, 1]]), dim=0))

# where -----------------------------------------------------------------------------------
COND = [[True, False, True], [False, True, False]]
case("where", "1arg", lambda E: E.m.where(E.t([[0, 1.0, 0], [2, 0, -0.0]])))
case("where", "1arg_bool", lambda E: E.m.where(E.t(COND, "b")))
case("where", "1arg_0d", lambda E: E.m.where(E.t(1.0)))
case("where", "1arg_empty", lambda E: E.m.where(E.t(np.zeros((0, 2)))))
SCALARS = {"int": 2, "float": 2.5, "bool": True, "complex": 1 + 2j, "neg_int": -3}
TENS = {"f32": "f32", "f64": "f64", "i64": "i64", "i32": "i32", "u8": "u8", "b": "b",
        "f16": "f16"}
for sn, sv in SCALARS.items():
    for tn, tdt in TENS.items():
        case("where", f"tensor_{tn}_scalar_{sn}", lambda E, sv=sv, tdt=tdt: E.m.where(
            E.t(COND, "b"), E.t((2, 3), tdt), sv))
        case("where", f"scalar_{sn}_tensor_{tn}", lambda E, sv=sv, tdt=tdt: E.m.where(
            E.t(COND, "b"), sv, E.t((2, 3), tdt)))
        case("where", f"tensor0d_{tn}_scalar_{sn}", lambda E, sv=sv, tdt=tdt: E.m.where(
            E.t(COND, "b"), E.t(1, tdt), sv))
    for sn2, sv2 in SCALARS.items():
        case("where", f"scalars_{sn}_{sn2}", lambda E, sv=sv, sv2=sv2: E.m.where(
            E.t(COND, "b"), sv, sv2))
for a in ["f32", "f64", "i64", "u8", "b", "f16"]:
    for b in ["f32", "i32", "b", "f16"]:
        case("where", f"tensors_{a}_{b}", lambda E, a=a, b=b: E.m.where(
            E.t(COND, "b"), E.t((2, 3), a), E.t((2, 3), b)))
        case("where", f"tensors_{a}_0d{b}", lambda E, a=a, b=b: E.m.where(
            E.t(COND, "b"), E.t((2, 3), a), E.t(1, b)))
case("where", "cond_u8", lambda E: E.m.where(E.t(COND, "u8"), E.t((2, 3)), 0.0))
case("where", "cond_f32", lambda E: E.m.where(E.t(COND, "f32"), E.t((2, 3)), 0.0))
case("where", "cond_0d", lambda E: E.m.where(E.t(True, "b"), E.t((2, 3), grad=True), 0.0))
case("where", "broadcast_grad", lambda E: E.m.where(E.t([[True], [False]], "b"),
                                                    E.t((1, 3), grad=True), E.t((2, 1), grad=True)))
case("where", "bad_broadcast", lambda E: E.m.where(E.t(COND, "b"), E.t((4,)), 0.0))
case("where", "grad_nc", lambda E: E.m.where(E.t(COND, "b", layout="s"),
                                             E.t((3, 2), layout="T", grad=True),
                                             E.t((2, 3), "f64", grad=True)))
case("where", "method", lambda E: E.t((2, 3), grad=True).where(E.t(COND, "b"), 1.5))
case("where", "method_tensor", lambda E: E.t((2, 3), "i64").where(E.t(COND, "b"), 1.5))
case("where", "empty", lambda E: E.m.where(E.t((0, 3), "b"), E.t((0, 3)), 1))
case("where", "nan_inf", lambda E: E.m.where(E.t(COND, "b"), E.t([[float("nan"), 1, -0.0]] * 2),
                                             float("-inf")))
case("where", "out", lambda E: E.m.where(E.t(COND, "b"), E.t((2, 3)), 0.0, out=E.m.empty(2, 3)))
case("where", "scalar_none", lambda E: E.m.where(E.t(COND, "b"), E.t((2, 3)), None))

# narrow / select / unbind ------------------------------------------------------------------
NARROW = {"basic": (0, 1, 2), "neg_dim": (-1, 1, 2), "neg_start": (1, -3, 2), "zero_len": (1, 4, 0),
          "oob_start": (1, 5, 0), "oob_len": (1, 2, 3), "neg_len": (1, 0, -1),
          "dim_oob": (2, 0, 1), "start_neg_oob": (1, -5, 1), "start_at_end": (0, 3, 0)}
for name, (d, s, n) in NARROW.items():
    case("narrow", name, lambda E, d=d, s=s, n=n: E.t((3, 4), grad=True).narrow(d, s, n))
    case("narrow", name + "_T", lambda E, d=d, s=s, n=n: E.t((4, 3), layout="T", grad=True).narrow(
        d, s, n))
case("narrow", "tensor_start", lambda E: E.t((3, 4), grad=True).narrow(1, E.i(1), 2))
case("narrow", "tensor_start_f", lambda E: E.t((3, 4)).narrow(1, E.t(1.0), 2))
case("narrow", "tensor_start_1d", lambda E: E.t((3, 4)).narrow(1, E.i([1]), 2))
case("narrow", "0d", lambda E: E.t(2.0).narrow(0, 0, 1))
case("narrow", "fn", lambda E: E.m.narrow(E.t((3, 4)), 0, 1, 1))
case("narrow", "int_dtype", lambda E: E.t((3, 4), "i32").narrow(1, 1, 2))
case("narrow_copy", "basic", lambda E: E.t((3, 4)).narrow_copy(1, 1, 2))
case("narrow_copy", "oob", lambda E: E.t((3, 4)).narrow_copy(1, 3, 2))
SELECT = {"basic": (0, 1), "neg_idx": (1, -1), "neg_dim": (-1, 0), "oob": (0, 3),
          "neg_oob": (0, -4), "dim_oob": (2, 0)}
for name, (d, i) in SELECT.items():
    case("select", name, lambda E, d=d, i=i: E.t((3, 4), grad=True).select(d, i))
    case("select", name + "_T", lambda E, d=d, i=i: E.t((4, 3), layout="T", grad=True).select(
        d, i))
case("select", "0d", lambda E: E.t(2.0).select(0, 0))
case("select", "empty", lambda E: E.t((0, 3)).select(0, 0))
case("select", "empty_other", lambda E: E.t((0, 3)).select(1, 2))
case("select", "tensor_index", lambda E: E.t((3, 4), grad=True).select(0, E.i(2)))
case("select", "fn", lambda E: E.m.select(E.t((3, 4)), 1, 2))
case("select", "int_self", lambda E: E.t((3, 4), "u8").select(1, -2))
for d in [0, 1, -1, 2]:
    case("unbind", f"dim{d}", lambda E, d=d: E.t((3, 4), grad=True).unbind(d))
    case("unbind", f"dim{d}_T", lambda E, d=d: E.t((4, 3), layout="T", grad=True).unbind(d))
case("unbind", "0d", lambda E: E.t(2.0).unbind(0))
case("unbind", "empty", lambda E: E.t((0, 3)).unbind(0))
case("unbind", "empty_other", lambda E: E.t((0, 3)).unbind(1))
case("unbind", "fn", lambda E: E.m.unbind(E.t((2, 2), "b")))
case("unbind", "partial_grad", lambda E: E.t((3, 4), grad=True).unbind(0)[1])

# diagonal / diag_embed ------------------------------------------------------------------
DIAG = {"basic": (0, 0, 1), "off1": (1, 0, 1), "off_neg": (-2, 0, 1), "off_big": (5, 0, 1),
        "off_big_neg": (-5, 0, 1), "swap": (1, 1, 0), "neg_dims": (0, -1, -2),
        "same_dim": (0, 1, 1), "dim_oob": (0, 0, 2)}
for name, (o, d1, d2) in DIAG.items():
    case("diagonal", name, lambda E, o=o, d1=d1, d2=d2: E.t((3, 4), grad=True).diagonal(o, d1, d2))
    case("diagonal", name + "_T", lambda E, o=o, d1=d1, d2=d2: E.t(
        (4, 3), layout="T", grad=True).diagonal(o, d1, d2))
case("diagonal", "3d", lambda E: E.t((2, 3, 4), grad=True).diagonal(1, 0, 2))
case("diagonal", "1d", lambda E: E.t((3,)).diagonal())
case("diagonal", "empty", lambda E: E.t((0, 3)).diagonal())
case("diagonal", "int", lambda E: E.m.diagonal(E.t((3, 3), "i64"), offset=-1))
case("diagonal", "diag_2d", lambda E: E.m.diag(E.t((3, 4), grad=True), 1))
case("diagonal", "diag_1d", lambda E: E.m.diag(E.t((3,), grad=True), -1))
case("diagonal", "diag_0d", lambda E: E.m.diag(E.t(2.0)))
case("diagonal", "diagonal_scatter", lambda E: E.m.diagonal_scatter(
    E.t((3, 4), grad=True), E.t((2,), grad=True), 2))
case("diagonal", "diagonal_scatter_bad", lambda E: E.m.diagonal_scatter(
    E.t((3, 4)), E.t((3,)), 2))
EMB = {"basic": (0, -2, -1), "off": (1, -2, -1), "off_neg": (-2, -2, -1), "dims": (0, 0, 2),
       "swap": (0, -1, -2), "same": (0, 1, 1), "dim_oob": (0, 0, 3)}
for name, (o, d1, d2) in EMB.items():
    case("diag_embed", name, lambda E, o=o, d1=d1, d2=d2: E.m.diag_embed(
        E.t((2, 3), grad=True), o, d1, d2))
case("diag_embed", "nc", lambda E: E.m.diag_embed(E.t((3, 2), layout="T", grad=True), 1))
case("diag_embed", "0d", lambda E: E.m.diag_embed(E.t(2.0)))
case("diag_embed", "1d", lambda E: E.m.diag_embed(E.t((3,), "i32")))
case("diag_embed", "empty", lambda E: E.m.diag_embed(E.t((2, 0))))
case("diag_embed", "bool", lambda E: E.m.diag_embed(E.t([True, False], "b")))

# tril_indices / triu_indices -------------------------------------------------------------
for fn in ["tril_indices", "triu_indices"]:
    for r, c in [(3, 3), (3, 5), (5, 3), (0, 3), (3, 0), (1, 1), (0, 0)]:
        for off in [0, 1, -1, 4, -4, 10]:
            case(fn, f"{r}x{c}_off{off}", lambda E, fn=fn, r=r, c=c, off=off: getattr(E.m, fn)(
                r, c, off))
    case(fn, "dtype_i32", lambda E, fn=fn: getattr(E.m, fn)(3, 4, 1, dtype=E.m.int32))
    case(fn, "dtype_f32", lambda E, fn=fn: getattr(E.m, fn)(3, 4, dtype=E.m.float32))
    case(fn, "neg_row", lambda E, fn=fn: getattr(E.m, fn)(-1, 3))
    case(fn, "neg_col", lambda E, fn=fn: getattr(E.m, fn)(3, -1))
    case(fn, "kw", lambda E, fn=fn: getattr(E.m, fn)(row=3, col=2, offset=-1))
    case(fn, "no_col", lambda E, fn=fn: getattr(E.m, fn)(3))

# more forms: augmented assignment, function spellings, views of a graph ------------------
case("setitem", "iadd_dups", lambda E: _iadd(E.t((3, 4)), E.i([0, 0, 2]), 1.0))
case("setitem", "iadd_dups_grad", lambda E: _iadd(E.t((3, 4), grad=True).clone(),
                                                  E.i([0, 0]), E.t((4,), grad=True)))
case("gather", "sparse_grad_true", lambda E: E.m.gather(E.t((3, 4), grad=True), 1,
                                                        E.i([[0], [1], [3]]), sparse_grad=True))
case("scatter", "fn_reduce", lambda E: E.m.scatter(E.t((3, 4)), 0, E.i([[0, 0]]),
                                                   E.t((1, 2)), reduce="multiply"))
case("scatter", "value_kw", lambda E: E.m.scatter(E.t((3, 4)), 0, E.i([[0, 1]]), value=2.0))
case("scatter_", "into_view", lambda E: E.t((3, 4), grad=True).clone()[1:].scatter_(
    1, E.i([[0], [3]]), E.t((2, 1), grad=True)))
case("index_fill", "neg_dim", lambda E: E.t((2, 3), grad=True).index_fill(-1, E.i([0]), 1.0))
case("index_copy", "0d_src_1elt", lambda E: E.t((3,), grad=True).index_copy(
    0, E.i([1]), E.t(4.0, grad=True)))
case("masked_select", "f16_grad", lambda E: E.t((2, 3), "f16", grad=True).masked_select(
    E.t([[True, False, True], [False, False, True]], "b")))
case("masked_fill_", "nc_inplace_grad", lambda E: E.t((4, 3), layout="T", grad=True).clone(
).t().masked_fill_(E.t([[True, False, True]] * 3, "b"), 2.0))
case("take", "bool", lambda E: E.t([[True, False], [False, True]], "b").take(E.i([3, 0])))
case("nonzero", "static", lambda E: E.m.nonzero_static(E.t([0, 1, 0, 2]), size=4))
case("nonzero", "static_small", lambda E: E.m.nonzero_static(E.t([0, 1, 0, 2]), size=1,
                                                              fill_value=-5))
case("index_select", "bool_grad_none", lambda E: E.t([True, False], "b").index_select(
    0, E.i([1, 1])))
case("index_reduce", "prod", lambda E: E.t((3, 4), grad=True).index_reduce(
    0, E.i([0, 0, 2]), E.t((3, 4), grad=True), "prod"))
case("index_reduce", "amax_exc", lambda E: E.t((3, 4), grad=True).index_reduce(
    0, E.i([0, 0, 2]), E.t((3, 4), grad=True), "amax", include_self=False))
case("index_reduce", "mean_int", lambda E: E.t([[5, -3]], "i64").index_reduce(
    0, E.i([0, 0]), E.t([[2, 2], [-7, 1]], "i64"), "mean"))
case("index_reduce", "neg", lambda E: E.t((3, 4)).index_reduce(
    0, E.i([-1]), E.t((1, 4)), "prod"))
case("index_reduce", "f16_prod", lambda E: (E.m.ones(1, 2, dtype=E.m.float16)).index_reduce(
    0, E.i([0, 0, 0]), E.t([[300.0] * 2, [300.0] * 2, [1 / 300] * 2], "f16"), "prod"))
case("select_scatter", "basic", lambda E: E.m.select_scatter(E.t((3, 4), grad=True),
                                                             E.t((4,), grad=True), 0, -1))
case("slice_scatter", "basic", lambda E: E.m.slice_scatter(E.t((3, 4), grad=True),
                                                           E.t((3, 2), grad=True), 1, 1, 4, 2))


def _iadd(x, key, v):
    x[key] += v
    return x

# ties of signed zeros along other dims, out= of other dtypes, 3-d scatters ------------------
for red in ["amax", "amin"]:
    for inc in [True, False]:
        case("scatter_reduce", f"{red}_{inc}_zeros_dim1", lambda E, red=red, inc=inc: E.t(
            [[0.0, -0.0], [-0.0, 0.0]]).scatter_reduce(1, E.i([[0, 0, 1], [1, 1, 0]]), E.t(
                [[-0.0, 0.0, -0.0], [0.0, -0.0, 0.0]]), red, include_self=inc))
        case("scatter_reduce", f"{red}_{inc}_zeros_3d", lambda E, red=red, inc=inc: E.t(
            np.zeros((2, 2, 2))).scatter_reduce(0, E.i(np.zeros((3, 2, 2), "int64")), E.t(
                np.array([-0.0, 0.0, -0.0] * 4).reshape(3, 2, 2)), red, include_self=inc))
case("scatter", "3d_dim2_grad", lambda E: E.t((2, 3, 4), grad=True).scatter(
    2, E.i(np.array([[[0, 3], [1, 1], [2, 0]], [[3, 3], [0, 1], [2, 2]]])),
    E.t((2, 3, 2), grad=True)))
case("scatter_add", "3d_dim1_i32", lambda E: E.t((2, 3, 4), grad=True).scatter_add(
    1, E.i(np.array([[[0, 2, 1, 1]], [[2, 2, 0, 1]]]), "i32"), E.t((2, 1, 4), grad=True)))
for op in ["index_add", "index_copy"]:
    case(op, "out_f64", lambda E, op=op: getattr(E.m, op)(
        E.t((3, 4)), 0, E.i([1]), E.t((1, 4)), out=E.m.empty(3, 4, dtype=E.m.float64)))
case("index_select", "out_f64", lambda E: E.m.index_select(
    E.t((3, 4)), 0, E.i([1]), out=E.m.empty(0, dtype=E.m.float64)))
case("gather", "out_int_resize", lambda E: E.m.gather(
    E.t((3, 4), "i64"), 0, E.i([[1, 2]]), out=E.m.empty(0, dtype=E.m.int64)))
case("take", "out_f64", lambda E: E.m.take(E.t((3, 4)), E.i([1]),
                                           out=E.m.empty(1, dtype=E.m.float64)))
case("masked_select", "out_f64", lambda E: E.m.masked_select(
    E.t((2, 2)), E.t([[True, False], [True, True]], "b"), out=E.m.empty(0, dtype=E.m.float64)))
case("scatter_reduce", "mean_int_neg", lambda E: E.t([[-7, 5]], "i64").scatter_reduce(
    1, E.i([[0, 0, 1]]), E.t([[2, 0, -8]], "i64"), "mean", include_self=False))
case("scatter_reduce", "mean_u8", lambda E: E.t([[7, 5]], "u8").scatter_reduce(
    1, E.i([[0, 0, 1]]), E.t([[2, 0, 8]], "u8"), "mean"))
case("scatter_reduce", "prod_int_overflow", lambda E: E.t([[2 ** 40]], "i64").scatter_reduce(
    1, E.i([[0, 0]]), E.t([[2 ** 30, 4]], "i64"), "prod"))
case("index_put", "acc_int_broadcast", lambda E: E.t((3, 4), "i32").index_put(
    (E.i([0, 0]), E.i([[1], [1]])), E.t([5], "i32"), accumulate=True))
case("index_put", "noacc_bool_self", lambda E: E.t(np.zeros((2, 2), bool), "b").index_put(
    (E.i([1]),), E.t(True, "b")))
