"""Sweep table: index_put(_), masked_fill, masked_scatter, masked_select, take,
take_along_dim, put(_), advanced indexing (get and set); cases as (op, name, fn(E))."""
import numpy as np

CASES = []


def case(op, name, fn, rtol=1e-6):
    CASES.append((op, name, fn, rtol))


def _set(x, key, v):
    x[key] = v
    return x


MASK = [[True, False, True, False], [False, False, True, True], [True, True, False, False]]
EMPTY = np.zeros((0,), "int64")

# index_put / index_put_ ------------------------------------------------------------------
for acc in [False, True]:
    a = "acc" if acc else "noacc"
    for dt in ["f32", "f64", "i64", "i32", "u8", "b", "f16"]:
        case("index_put", f"{a}_{dt}", lambda E, acc=acc, dt=dt: E.t((3, 4), dt).index_put(
            (E.i([0, 2, 0]),), E.t((3, 4), dt), accumulate=acc))
    case("index_put", f"{a}_grad", lambda E, acc=acc: E.t((3, 4), grad=True).index_put(
        (E.i([0, 2]), E.i([1, 3])), E.t((2,), grad=True), accumulate=acc))
    case("index_put", f"{a}_dups_grad", lambda E, acc=acc: E.t((3, 4), "f64", grad=True).index_put(
        (E.i([1, 1, 1]),), E.t((3, 4), "f64", grad=True), accumulate=acc))
    case("index_put", f"{a}_broadcast_value", lambda E, acc=acc: E.t((3, 4), grad=True).index_put(
        (E.i([0, 2]),), E.t((4,), grad=True), accumulate=acc))
    case("index_put", f"{a}_0d_value", lambda E, acc=acc: E.t((3, 4), grad=True).index_put(
        (E.i([0, 2]), E.i([[1], [2]])), E.t(5.0, grad=True), accumulate=acc))
    case("index_put", f"{a}_mask", lambda E, acc=acc: E.t((3, 4), grad=True).index_put(
        (E.t(MASK, "b"),), E.t(5.0, grad=True), accumulate=acc))
    case("index_put", f"{a}_mask_values", lambda E, acc=acc: E.t((3, 4)).index_put(
        (E.t(MASK, "b"),), E.t((6,)), accumulate=acc))
    case("index_put", f"{a}_mask_u8", lambda E, acc=acc: E.t((3, 4)).index_put(
        (E.t(MASK, "u8"),), E.t(1.0), accumulate=acc))
    case("index_put", f"{a}_mask_rows", lambda E, acc=acc: E.t((3, 4)).index_put(
        (E.t([True, False, True], "b"),), E.t((2, 4)), accumulate=acc))
    case("index_put", f"{a}_i32", lambda E, acc=acc: E.t((3, 4)).index_put(
        (E.i([0, 2], "i32"),), E.t((4,)), accumulate=acc))
    case("index_put", f"{a}_f32_index", lambda E, acc=acc: E.t((3, 4)).index_put(
        (E.i([0, 2], "f32"),), E.t((4,)), accumulate=acc))
    case("index_put", f"{a}_neg", lambda E, acc=acc: E.t((3, 4)).index_put(
        (E.i([-1, -3]),), E.t((4,)), accumulate=acc))
    case("index_put", f"{a}_oob", lambda E, acc=acc: E.t((3, 4)).index_put(
        (E.i([3]),), E.t((4,)), accumulate=acc))
    case("index_put", f"{a}_neg_oob", lambda E, acc=acc: E.t((3, 4)).index_put(
        (E.i([-4]),), E.t((4,)), accumulate=acc))
    case("index_put", f"{a}_empty", lambda E, acc=acc: E.t((3, 4), grad=True).index_put(
        (E.i(EMPTY),), E.t((4,), grad=True), accumulate=acc))
    case("index_put", f"{a}_bad_value_shape", lambda E, acc=acc: E.t((3, 4)).index_put(
        (E.i([0, 1]),), E.t((3,)), accumulate=acc))
    case("index_put", f"{a}_value_dtype", lambda E, acc=acc: E.t((3, 4)).index_put(
        (E.i([0, 1]),), E.t((4,), "f64"), accumulate=acc))
    case("index_put", f"{a}_too_many", lambda E, acc=acc: E.t((3,)).index_put(
        (E.i([0]), E.i([0])), E.t(1.0), accumulate=acc))
    case("index_put", f"{a}_nc", lambda E, acc=acc: E.t((4, 3), layout="T", grad=True).index_put(
        (E.i([2, 0, 2], layout="s"),), E.t((3, 4), layout="T", grad=True), accumulate=acc))
    case("index_put", f"{a}_0d_self", lambda E, acc=acc: E.t(3.0, grad=True).index_put(
        (E.i(0),), E.t(1.0, grad=True), accumulate=acc))
    case("index_put", f"{a}_0d_index", lambda E, acc=acc: E.t((3, 4)).index_put(
        (E.i(1),), E.t((4,)), accumulate=acc))
    case("index_put", f"{a}_none_index", lambda E, acc=acc: E.t((3, 4)).index_put(
        (None, E.i([1, 1])), E.t((3, 2)), accumulate=acc))
    case("index_put_", f"{a}_inplace", lambda E, acc=acc: E.t((3, 4)).index_put_(
        (E.i([0, 0]), E.i([1, 1])), E.t([2.0, 3.0]), accumulate=acc))
    case("index_put_", f"{a}_inplace_grad", lambda E, acc=acc: E.t((3, 4), grad=True).clone(
    ).index_put_((E.i([0, 0]),), E.t((4,), grad=True), accumulate=acc))
    case("index_put_", f"{a}_inplace_T", lambda E, acc=acc: E.t((4, 3), layout="T").index_put_(
        (E.i([1, 1]), E.i([0, 2])), E.t(1.5), accumulate=acc))
case("index_put", "acc_f16_dups", lambda E: E.t([0.1, 0.2], "f16").index_put(
    (E.i([0] * 7),), E.t([0.1] * 7, "f16"), accumulate=True), rtol=0)
case("index_put", "acc_f32_dups_order", lambda E: E.t([1e8, 0.0], "f32").index_put(
    (E.i([0, 0, 0, 0]),), E.t([1.0, 1.0, -1e8, 1.0], "f32"), accumulate=True), rtol=0)

# masked_fill -------------------------------------------------------------------------------
for dt in ["f32", "f64", "i64", "i32", "u8", "b", "f16", "c64"]:
    for v in [2, -1.5, True, float("nan"), 1j]:
        case("masked_fill", f"{dt}_value_{v!r}", lambda E, dt=dt, v=v: E.t((3, 4), dt).masked_fill(
            E.t(MASK, "b"), v))
case("masked_fill", "mask_u8", lambda E: E.t((3, 4)).masked_fill(E.t(MASK, "u8"), 1.0))
case("masked_fill", "mask_i64", lambda E: E.t((3, 4)).masked_fill(E.t(MASK, "i64"), 1.0))
case("masked_fill", "mask_broadcast", lambda E: E.t((3, 4), grad=True).masked_fill(
    E.t([True, False, False, True], "b"), 1.0))
case("masked_fill", "mask_bigger", lambda E: E.t((4,), grad=True).masked_fill(
    E.t(MASK, "b"), 1.0))
case("masked_fill_", "mask_bigger_inplace", lambda E: E.t((4,)).masked_fill_(
    E.t(MASK, "b"), 1.0))
case("masked_fill", "mask_mismatch", lambda E: E.t((3, 4)).masked_fill(
    E.t([True, False], "b"), 1.0))
case("masked_fill", "value_0d_tensor_grad", lambda E: E.t((3, 4), grad=True).masked_fill(
    E.t(MASK, "b"), E.t(2.0, grad=True)))
case("masked_fill", "value_0d_f64", lambda E: E.t((3, 4)).masked_fill(E.t(MASK, "b"),
                                                                      E.t(2.0, "f64")))
case("masked_fill", "value_0d_int_into_int", lambda E: E.t((3, 4), "i32").masked_fill(
    E.t(MASK, "b"), E.t(2, "i64")))
case("masked_fill", "value_0d_float_into_int", lambda E: E.t((3, 4), "i32").masked_fill(
    E.t(MASK, "b"), E.t(2.5, "f32")))
case("masked_fill", "value_1d", lambda E: E.t((3, 4)).masked_fill(E.t(MASK, "b"), E.t([2.0])))
case("masked_fill", "0d", lambda E: E.t(2.0, grad=True).masked_fill(E.t(True, "b"), 0.0))
case("masked_fill", "0d_mask", lambda E: E.t((3, 4), grad=True).masked_fill(E.t(True, "b"), 0.0))
case("masked_fill", "empty", lambda E: E.t((0, 4)).masked_fill(E.t((0, 4), "b"), 1.0))
case("masked_fill", "nc", lambda E: E.t((4, 3), layout="T", grad=True).masked_fill(
    E.t(MASK, "b", layout="s"), 1.0))
case("masked_fill_", "inplace", lambda E: E.t((3, 4)).masked_fill_(E.t(MASK, "b"), 1.0))
case("masked_fill_", "inplace_T", lambda E: E.t((4, 3), layout="T").masked_fill_(
    E.t(MASK, "b"), 1.0))

# masked_scatter / masked_select ---------------------------------------------------------------
for dt in ["f32", "f64", "i64", "u8", "b", "f16"]:
    case("masked_scatter", dt, lambda E, dt=dt: E.t((3, 4), dt).masked_scatter(
        E.t(MASK, "b"), E.t((3, 4), dt)))
    case("masked_select", dt, lambda E, dt=dt: E.t((3, 4), dt).masked_select(E.t(MASK, "b")))
case("masked_scatter", "grad", lambda E: E.t((3, 4), grad=True).masked_scatter(
    E.t(MASK, "b"), E.t((2, 5), grad=True)))
case("masked_scatter", "src_small", lambda E: E.t((3, 4)).masked_scatter(
    E.t(MASK, "b"), E.t((5,))))
case("masked_scatter", "src_dtype", lambda E: E.t((3, 4)).masked_scatter(
    E.t(MASK, "b"), E.t((6,), "f64")))
case("masked_scatter", "mask_u8", lambda E: E.t((3, 4)).masked_scatter(
    E.t(MASK, "u8"), E.t((6,))))
case("masked_scatter", "broadcast", lambda E: E.t((3, 4), grad=True).masked_scatter(
    E.t([True, False, False, True], "b"), E.t((7,), grad=True)))
case("masked_scatter", "self_broadcast", lambda E: E.t((4,), grad=True).masked_scatter(
    E.t(MASK, "b"), E.t((7,), grad=True)))
case("masked_scatter", "0d", lambda E: E.t(1.0, grad=True).masked_scatter(
    E.t(True, "b"), E.t([5.0], grad=True)))
case("masked_scatter", "nc", lambda E: E.t((4, 3), layout="T", grad=True).masked_scatter(
    E.t(MASK, "b", layout="s"), E.t((3, 4), layout="T", grad=True)))
case("masked_scatter", "empty", lambda E: E.t((0, 4)).masked_scatter(
    E.t((0, 4), "b"), E.t((0,))))
case("masked_scatter_", "inplace", lambda E: E.t((3, 4)).masked_scatter_(
    E.t(MASK, "b"), E.t((6,))))
case("masked_scatter_", "inplace_bigger_mask", lambda E: E.t((4,)).masked_scatter_(
    E.t(MASK, "b"), E.t((6,))))
case("masked_select", "grad", lambda E: E.t((3, 4), grad=True).masked_select(E.t(MASK, "b")))
case("masked_select", "mask_u8", lambda E: E.t((3, 4)).masked_select(E.t(MASK, "u8")))
case("masked_select", "mask_f32", lambda E: E.t((3, 4)).masked_select(E.t(MASK, "f32")))
case("masked_select", "broadcast_self", lambda E: E.t((4,), grad=True).masked_select(
    E.t(MASK, "b")))
case("masked_select", "broadcast_mask", lambda E: E.t((3, 4), grad=True).masked_select(
    E.t([[True], [False], [True]], "b")))
case("masked_select", "mismatch", lambda E: E.t((3, 4)).masked_select(E.t([True, False], "b")))
case("masked_select", "0d", lambda E: E.t(2.0, grad=True).masked_select(E.t(True, "b")))
case("masked_select", "0d_false", lambda E: E.t(2.0, grad=True).masked_select(E.t(False, "b")))
case("masked_select", "empty", lambda E: E.t((0, 4)).masked_select(E.t((0, 4), "b")))
case("masked_select", "nc", lambda E: E.t((4, 3), layout="T", grad=True).masked_select(
    E.t(MASK, "b", layout="s")))
case("masked_select", "out", lambda E: E.m.masked_select(E.t((3, 4)), E.t(MASK, "b"),
                                                         out=E.m.empty(0)))

# take / take_along_dim / put -----------------------------------------------------------------
for dt in ["f32", "i64", "b", "f16", "c64"]:
    case("take", dt, lambda E, dt=dt: E.t((3, 4), dt).take(E.i([[0, 11], [-1, -12]])))
    case("put", dt, lambda E, dt=dt: E.t((3, 4), dt).put(E.i([0, -1]), E.t((2,), dt)))
for idt in ["i32", "u8", "f32"]:
    case("take", f"index_{idt}", lambda E, idt=idt: E.t((3, 4)).take(E.i([1, 2], idt)))
    case("put", f"index_{idt}", lambda E, idt=idt: E.t((3, 4)).put(E.i([1, 2], idt), E.t((2,))))
    case("take_along_dim", f"index_{idt}", lambda E, idt=idt: E.m.take_along_dim(
        E.t((3, 4)), E.i([[1, 2]], idt), 1))
case("take", "grad_dups", lambda E: E.t((3, 4), grad=True).take(E.i([[0, 0], [5, 0]])))
case("take", "oob", lambda E: E.t((3, 4)).take(E.i([12])))
case("take", "neg_oob", lambda E: E.t((3, 4)).take(E.i([-13])))
case("take", "0d", lambda E: E.t(3.0, grad=True).take(E.i(0)))
case("take", "0d_index", lambda E: E.t((3, 4), grad=True).take(E.i(5)))
case("take", "empty_index", lambda E: E.t((3, 4), grad=True).take(E.i(np.zeros((2, 0), "int64"))))
case("take", "empty_self", lambda E: E.t((0,)).take(E.i([0])))
case("take", "empty_self_empty", lambda E: E.t((0,)).take(E.i(EMPTY)))
case("take", "nc", lambda E: E.t((4, 3), layout="T", grad=True).take(E.i([[1, 5], [7, 2]],
                                                                        layout="T")))
case("take", "out", lambda E: E.m.take(E.t((3, 4)), E.i([1, 2]), out=E.m.empty(2)))
for acc in [False, True]:
    a = "acc" if acc else "noacc"
    case("put", f"{a}_dups", lambda E, acc=acc: E.t((3, 4)).put(
        E.i([1, 1, 1, -11]), E.t((4,)), accumulate=acc))
    case("put", f"{a}_grad", lambda E, acc=acc: E.t((3, 4), grad=True).put(
        E.i([[1, 2], [-1, 0]]), E.t((2, 2), grad=True), accumulate=acc))
    case("put", f"{a}_oob", lambda E, acc=acc: E.t((3, 4)).put(E.i([12]), E.t((1,)),
                                                               accumulate=acc))
    case("put", f"{a}_size_mismatch", lambda E, acc=acc: E.t((3, 4)).put(
        E.i([1, 2]), E.t((3,)), accumulate=acc))
    case("put", f"{a}_dtype_mismatch", lambda E, acc=acc: E.t((3, 4)).put(
        E.i([1, 2]), E.t((2,), "f64"), accumulate=acc))
    case("put", f"{a}_0d", lambda E, acc=acc: E.t(1.0, grad=True).put(
        E.i(0), E.t(3.0, grad=True), accumulate=acc))
    case("put", f"{a}_empty", lambda E, acc=acc: E.t((3, 4), grad=True).put(
        E.i(EMPTY), E.t((0,), grad=True), accumulate=acc))
    case("put", f"{a}_nc", lambda E, acc=acc: E.t((4, 3), layout="T", grad=True).put(
        E.i([0, 4, 4], layout="s"), E.t((3,), layout="s", grad=True), accumulate=acc))
    case("put_", f"{a}_inplace", lambda E, acc=acc: E.t((3, 4)).put_(
        E.i([0, 4, 4]), E.t((3,)), accumulate=acc))
    case("put_", f"{a}_inplace_T", lambda E, acc=acc: E.t((4, 3), layout="T").put_(
        E.i([0, 1, 2]), E.t((3,)), accumulate=acc))
case("take_along_dim", "grad", lambda E: E.m.take_along_dim(
    E.t((3, 4), grad=True), E.i([[0, 3], [1, 1], [2, 0]]), 1))
case("take_along_dim", "broadcast", lambda E: E.m.take_along_dim(
    E.t((3, 4), grad=True), E.i([[0, 3]]), 1))
case("take_along_dim", "broadcast_self", lambda E: E.m.take_along_dim(
    E.t((1, 4), grad=True), E.i([[0], [1], [0]]), 1))
case("take_along_dim", "no_dim", lambda E: E.m.take_along_dim(E.t((3, 4), grad=True),
                                                              E.i([[5, 11]])))
case("take_along_dim", "neg_dim", lambda E: E.m.take_along_dim(E.t((3, 4)), E.i([[1]]), -2))
case("take_along_dim", "neg_index", lambda E: E.m.take_along_dim(E.t((3, 4)), E.i([[-1]]), 1))
case("take_along_dim", "oob", lambda E: E.m.take_along_dim(E.t((3, 4)), E.i([[4]]), 1))
case("take_along_dim", "ndim_mismatch", lambda E: E.m.take_along_dim(E.t((3, 4)), E.i([1]), 1))
case("take_along_dim", "bad_broadcast", lambda E: E.m.take_along_dim(
    E.t((3, 4)), E.i([[1], [1]]), 1))
case("take_along_dim", "0d", lambda E: E.m.take_along_dim(E.t(3.0, grad=True), E.i(0), 0))
case("take_along_dim", "0d_no_dim", lambda E: E.m.take_along_dim(E.t(3.0), E.i(0)))
case("take_along_dim", "empty", lambda E: E.m.take_along_dim(E.t((3, 4)),
                                                             E.i(np.zeros((3, 0), "int64")), 1))
case("take_along_dim", "nc", lambda E: E.m.take_along_dim(
    E.t((4, 3), layout="T", grad=True), E.i([[0, 2, 1], [3, 3, 3]], layout="T"), 1))
case("take_along_dim", "out", lambda E: E.m.take_along_dim(E.t((3, 4)), E.i([[1]]), 1,
                                                           out=E.m.empty(0)))
case("take_along_dim", "method", lambda E: E.t((3, 4), "i32").take_along_dim(E.i([[1]]), 0))

# advanced indexing: get ------------------------------------------------------------------
GET = {
    "list": lambda x, E: x[[0, 2, 0]],
    "tensor_i64": lambda x, E: x[E.i([[0, 2], [1, 1]])],
    "tensor_i32": lambda x, E: x[E.i([2, -1], "i32")],
    "tensor_i16": lambda x, E: x[E.i([2, 1], "i16")],
    "tensor_u8_mask": lambda x, E: x[E.t([1, 0, 1], "u8")],
    "tensor_f32": lambda x, E: x[E.i([1], "f32")],
    "mask": lambda x, E: x[E.t(MASK, "b")],
    "mask_rows": lambda x, E: x[E.t([True, False, True], "b")],
    "mask_cols": lambda x, E: x[:, E.t([True, False, True, True], "b")],
    "mask_wrong_len": lambda x, E: x[E.t([True, False], "b")],
    "mask_wrong_shape": lambda x, E: x[E.t([[True, False]], "b")],
    "mask_0d_true": lambda x, E: x[E.t(True, "b")],
    "mask_0d_false": lambda x, E: x[E.t(False, "b")],
    "mask_and_index": lambda x, E: x[E.t([True, False, True], "b"), E.i([0, 3])],
    "two_lists": lambda x, E: x[[0, 2], [3, -4]],
    "broadcast_idx": lambda x, E: x[E.i([[0], [2]]), E.i([1, 2, 3])],
    "bad_broadcast": lambda x, E: x[E.i([0, 1]), E.i([1, 2, 3])],
    "oob": lambda x, E: x[E.i([3])],
    "neg_oob": lambda x, E: x[E.i([-4])],
    "oob_second": lambda x, E: x[:, E.i([4])],
    "too_many": lambda x, E: x[E.i([0]), E.i([0]), E.i([0])],
    "empty_idx": lambda x, E: x[E.i(EMPTY)],
    "empty_list": lambda x, E: x[[]],
    "0d_tensor": lambda x, E: x[E.i(1)],
    "0d_tensor_pair": lambda x, E: x[E.i(1), E.i(-1)],
    "idx_T": lambda x, E: x[E.i([[0, 1], [2, 2]], layout="T")],
    "slice_adv": lambda x, E: x[1:, [0, 0]],
    "none_adv": lambda x, E: x[None, [0, 2]],
    "ellipsis_adv": lambda x, E: x[..., [3, 0]],
}
for name, g in GET.items():
    case("getitem", name, lambda E, g=g: g(E.t((3, 4), grad=True), E))
    case("getitem", name + "_nc", lambda E, g=g: g(E.t((4, 3), layout="T", grad=True), E))
case("getitem", "0d_self_mask", lambda E: E.t(2.0, grad=True)[E.t(True, "b")])
case("getitem", "0d_self_idx", lambda E: E.t(2.0)[E.i(0)])
case("getitem", "0d_self_list", lambda E: E.t(2.0)[[0]])
case("getitem", "empty_self_mask", lambda E: E.t((0, 3))[E.t((0, 3), "b")])
case("getitem", "empty_self_idx", lambda E: E.t((0, 3))[E.i([0])])
case("getitem", "u8_self", lambda E: E.t((3, 4), "u8")[E.i([2, 0])])
case("getitem", "bool_self", lambda E: E.t(MASK, "b")[E.t(MASK, "b")])
case("getitem", "3d_mask_2d", lambda E: E.t((3, 4, 2), grad=True)[E.t(MASK, "b")])
case("getitem", "3d_mask_2d_last", lambda E: E.t((2, 3, 4), grad=True)[:, E.t(MASK, "b")])

# advanced indexing: set ------------------------------------------------------------------
SET = {
    "list_scalar": lambda x, E: _set(x, [0, 2], 5.0),
    "list_dups": lambda x, E: _set(x, E.i([0, 0]), E.t([[1.0] * 4, [2.0] * 4])),
    "tensor_row_bcast": lambda x, E: _set(x, E.i([0, 2]), E.t((4,))),
    "tensor_col_bcast": lambda x, E: _set(x, E.i([0, 2]), E.t((2, 1))),
    "bad_bcast": lambda x, E: _set(x, E.i([0, 2]), E.t((3,))),
    "mask_scalar": lambda x, E: _set(x, E.t(MASK, "b"), 0.0),
    "mask_values": lambda x, E: _set(x, E.t(MASK, "b"), E.t((6,))),
    "mask_wrong_count": lambda x, E: _set(x, E.t(MASK, "b"), E.t((5,))),
    "mask_rows_bcast": lambda x, E: _set(x, E.t([True, False, True], "b"), E.t((4,))),
    "mask_rows_wrong": lambda x, E: _set(x, E.t([True, False], "b"), 1.0),
    "mask_0d": lambda x, E: _set(x, E.t(True, "b"), 1.0),
    "mask_u8": lambda x, E: _set(x, E.t([1, 0, 1], "u8"), 1.0),
    "value_f64": lambda x, E: _set(x, E.i([1]), E.t((4,), "f64")),
    "value_int": lambda x, E: _set(x, E.i([1]), 7),
    "value_i64_tensor": lambda x, E: _set(x, E.i([1]), E.t([1, 2, 3, 4], "i64")),
    "value_complex": lambda x, E: _set(x, E.i([1]), 1j),
    "value_complex_tensor": lambda x, E: _set(x, E.i([1]), E.t([1j] * 4, "c64")),
    "value_nan": lambda x, E: _set(x, E.i([1]), float("nan")),
    "oob": lambda x, E: _set(x, E.i([3]), 1.0),
    "neg": lambda x, E: _set(x, E.i([-1, -3]), 1.0),
    "i32": lambda x, E: _set(x, E.i([1, 2], "i32"), 1.0),
    "pair": lambda x, E: _set(x, (E.i([0, 1]), E.i([3, 3])), E.t([5.0, 6.0])),
    "slice_adv": lambda x, E: _set(x, (slice(None), E.i([0, 0])), E.t((3, 1))),
    "empty_idx": lambda x, E: _set(x, E.i(EMPTY), 1.0),
    "empty_idx_values": lambda x, E: _set(x, E.i(EMPTY), E.t((0, 4))),
    "0d_idx": lambda x, E: _set(x, E.i(1), E.t((4,))),
}
for name, s in SET.items():
    case("setitem", name, lambda E, s=s: s(E.t((3, 4)), E))
    case("setitem", name + "_T", lambda E, s=s: s(E.t((4, 3), layout="T"), E))
    case("setitem", name + "_grad", lambda E, s=s: s(E.t((3, 4), grad=True).clone(), E))
case("setitem", "leaf", lambda E: _set(E.t((3, 4), grad=True), [0], 1.0))
case("setitem", "value_grad", lambda E: _set(E.t((3, 4), grad=True).clone(), [0, 2],
                                             E.t((4,), grad=True)))
case("setitem", "mask_value_grad", lambda E: _set(E.t((3, 4), grad=True).clone(),
                                                  E.t(MASK, "b"), E.t((6,), grad=True)))
case("setitem", "int_self_float", lambda E: _set(E.t((3, 4), "i64"), [0], 2.9))
case("setitem", "u8_self_neg", lambda E: _set(E.t((3, 4), "u8"), [0], -1))
case("setitem", "bool_self", lambda E: _set(E.t(MASK, "b"), [0], 2))
case("setitem", "0d_self", lambda E: _set(E.t(2.0), E.t(True, "b"), 5.0))
case("setitem", "empty_self", lambda E: _set(E.t((0, 3)), E.t((0, 3), "b"), 5.0))

# fill values past a dtype's range: the fills check (PyTorch's checked conversion), an
# assignment converts float16/bfloat16 through float32 unchecked; ints wrap into uint8
for v in [65519.99, 70000.0, 1e39, -1, -300, 2.5, float("inf"), 1 + 0j]:
    for dt in ["f16", "f32", "u8", "i32", "b"]:
        case("setitem", f"value_{v!r}_{dt}", lambda E, v=v, dt=dt: _set(E.t((2,), dt), 0, v))
        case("masked_fill", f"value_{v!r}_{dt}_range", lambda E, v=v, dt=dt: E.t(
            (2,), dt).masked_fill(E.t([True, False], "b"), v))
        case("index_fill", f"value_{v!r}_{dt}_range", lambda E, v=v, dt=dt: E.t(
            (2,), dt).index_fill(0, E.i([1]), v))
        case("scatter", f"value_{v!r}_{dt}_range", lambda E, v=v, dt=dt: E.t(
            (2,), dt).scatter(0, E.i([1]), v))
