"""Sweep table: gather, scatter (src, value, reduce=), scatter_add, scatter_reduce,
index_select, index_add, index_copy, index_fill; cases as (op, name, fn(E))."""

CASES = []


def case(op, name, fn, rtol=1e-6):
    CASES.append((op, name, fn, rtol))


IDX = [[0, 2, 1], [1, 0, 0]]  # a (2, 3) index into a (3, 4) or (2, 3)

# gather ------------------------------------------------------------------------------
for dt in ["f32", "f64", "f16", "i64", "i32", "u8", "b", "c64"]:
    case("gather", f"self_{dt}", lambda E, dt=dt: E.m.gather(E.t((3, 4), dt), 0, E.i(IDX)))
for idt in ["i64", "i32", "i16", "u8", "f32"]:
    case("gather", f"index_{idt}", lambda E, idt=idt: E.m.gather(E.t((3, 4)), 1, E.i(IDX, idt)))
for dim in [0, 1, -1, -2, 2, -3]:
    case("gather", f"dim{dim}", lambda E, dim=dim: E.m.gather(E.t((3, 4), grad=True), dim,
                                                              E.i(IDX)))
case("gather", "grad_dups", lambda E: E.t((3, 4), grad=True).gather(0, E.i([[0, 0, 0], [0, 0, 2]])))
case("gather", "grad_f64", lambda E: E.t((3, 4), "f64", grad=True).gather(1, E.i(IDX)))
case("gather", "self_T", lambda E: E.t((4, 3), grad=True, layout="T").gather(1, E.i(IDX)))
case("gather", "self_strided", lambda E: E.t((3, 4), grad=True, layout="s").gather(0, E.i(IDX)))
case("gather", "index_T", lambda E: E.t((3, 4)).gather(1, E.i([[0, 1], [2, 0], [1, 1]],
                                                                 layout="T")))
case("gather", "index_oob", lambda E: E.t((3, 4)).gather(0, E.i([[3]])))
case("gather", "index_neg", lambda E: E.t((3, 4)).gather(0, E.i([[-1]])))
case("gather", "index_bigger", lambda E: E.t((3, 4)).gather(0, E.i([[0] * 5])))
case("gather", "index_bigger_gdim", lambda E: E.t((3, 4)).gather(0, E.i([[0]] * 5)))
case("gather", "index_ndim", lambda E: E.t((3, 4)).gather(0, E.i([0, 1])))
case("gather", "empty_index", lambda E: E.t((3, 4), grad=True).gather(0, E.i(
    __import__("numpy").zeros((0, 4), "int64"))))
case("gather", "empty_self", lambda E: E.t((0, 4)).gather(0, E.i(
    __import__("numpy").zeros((0, 4), "int64"))))
case("gather", "empty_self_idx", lambda E: E.t((0, 4)).gather(0, E.i([[0]])))
case("gather", "0d_0d", lambda E: E.t(2.5, grad=True).gather(0, E.i(0)))
case("gather", "0d_1d", lambda E: E.t(2.5, grad=True).gather(0, E.i([0, 0])))
case("gather", "1d_0d", lambda E: E.t((3,), grad=True).gather(0, E.i(2)))
case("gather", "0d_oob", lambda E: E.t(2.5).gather(0, E.i(1)))
case("gather", "0d_dim1", lambda E: E.t(2.5).gather(1, E.i(0)))
case("gather", "out", lambda E: E.m.gather(E.t((3, 4)), 1, E.i(IDX), out=E.t((2, 3))))
case("gather", "out_wrong_dtype", lambda E: E.m.gather(E.t((3, 4)), 1, E.i(IDX),
                                                        out=E.t((2, 3), "f64")))
case("gather", "sparse_grad", lambda E: E.m.gather(E.t((3, 4), grad=True), 1, E.i(IDX),
                                                    sparse_grad=False))
case("gather", "nan_inf", lambda E: E.t([[float("nan"), float("inf"), -0.0]]).gather(
    1, E.i([[2, 1, 0, 0]])))
case("gather", "3d", lambda E: E.t((2, 3, 4), grad=True).gather(2, E.i(
    [[[0, 3], [1, 1]], [[2, 2], [3, 0]]])))

# scatter / scatter_ (src, value, reduce=) -----------------------------------------------
SRC = (2, 3)
for dt in ["f32", "f64", "i64", "i32", "u8", "b", "f16", "c64"]:
    case("scatter", f"src_{dt}", lambda E, dt=dt: E.t((3, 4), dt).scatter(0, E.i(IDX),
                                                                          E.t(SRC, dt)))
    case("scatter", f"value_{dt}", lambda E, dt=dt: E.t((3, 4), dt).scatter(1, E.i(IDX), 2))
for idt in ["i32", "i16", "u8"]:
    case("scatter", f"index_{idt}", lambda E, idt=idt: E.t((3, 4)).scatter(1, E.i(IDX, idt),
                                                                           E.t(SRC)))
case("scatter", "src_dtype_mismatch", lambda E: E.t((3, 4)).scatter(0, E.i(IDX),
                                                                     E.t(SRC, "f64")))
case("scatter", "value_float_into_int", lambda E: E.t((3, 4), "i64").scatter(1, E.i(IDX), 2.7))
case("scatter", "value_neg_float_into_u8", lambda E: E.t([[1, 2, 3]], "u8").scatter(
    1, E.i([[0]]), -1.5))
case("scatter", "value_bool", lambda E: E.t((3, 4)).scatter(1, E.i(IDX), True))
case("scatter", "value_complex_into_float", lambda E: E.t((3, 4)).scatter(1, E.i(IDX), 1j))
case("scatter", "value_0d_tensor", lambda E: E.t((3, 4)).scatter(1, E.i(IDX), E.t(3.0)))
case("scatter", "value_1d_tensor", lambda E: E.t((3, 4)).scatter(1, E.i(IDX), E.t([3.0])))
case("scatter", "value_nan", lambda E: E.t((3, 4)).scatter(1, E.i(IDX), float("nan")))
case("scatter", "grad_src_self", lambda E: E.t((3, 4), grad=True).scatter(
    0, E.i([[0, 2, 1, 0]]), E.t((2, 4), grad=True)))
case("scatter", "grad_value", lambda E: E.t((3, 4), grad=True).scatter(0, E.i(IDX), 5.0))
case("scatter", "grad_src_bigger", lambda E: E.t((3, 4), grad=True).scatter(
    1, E.i([[3], [1]]), E.t((3, 5), grad=True)))
case("scatter", "dups", lambda E: E.t((3, 4)).scatter(0, E.i([[0, 0], [0, 0], [0, 0]]),
                                                      E.t((3, 2))))
case("scatter", "oob", lambda E: E.t((3, 4)).scatter(0, E.i([[3]]), E.t((1, 1))))
case("scatter", "neg", lambda E: E.t((3, 4)).scatter(0, E.i([[-1]]), E.t((1, 1))))
case("scatter", "index_bigger_than_src", lambda E: E.t((3, 4)).scatter(
    0, E.i([[0, 1, 2]]), E.t((1, 2))))
case("scatter", "index_bigger_than_self", lambda E: E.t((3, 4)).scatter(
    0, E.i([[0] * 5]), E.t((1, 5))))
case("scatter", "index_ndim", lambda E: E.t((3, 4)).scatter(0, E.i([0]), E.t((3, 4))))
case("scatter", "empty_index", lambda E: E.t((3, 4), grad=True).scatter(
    0, E.i(__import__("numpy").zeros((0, 4), "int64")), E.t((2, 4), grad=True)))
case("scatter", "0d", lambda E: E.t(1.0, grad=True).scatter(0, E.i(0), E.t(7.0, grad=True)))
case("scatter", "0d_value", lambda E: E.t(1.0).scatter(0, E.i(0), 7.0))
case("scatter", "1d_0d_index", lambda E: E.t((3,)).scatter(0, E.i(1), E.t(7.0)))
case("scatter", "self_T", lambda E: E.t((4, 3), layout="T", grad=True).scatter(
    1, E.i(IDX), E.t((2, 3), layout="s", grad=True)))
case("scatter", "index_T", lambda E: E.t((3, 4)).scatter(1, E.i([[0, 1], [2, 0], [1, 3]],
                                                                  layout="T"), E.t((2, 3))))
case("scatter", "dim_oob", lambda E: E.t((3, 4)).scatter(2, E.i(IDX), E.t(SRC)))
for red in ["add", "multiply", "sum", "mean"]:
    case("scatter", f"reduce_{red}_src", lambda E, red=red: E.t((3, 4)).scatter(
        0, E.i([[0, 0, 1], [0, 2, 1]]), E.t(SRC), reduce=red))
    case("scatter", f"reduce_{red}_value", lambda E, red=red: E.t((3, 4)).scatter(
        0, E.i([[0, 0, 1], [0, 2, 1]]), 3.0, reduce=red))
    case("scatter", f"reduce_{red}_int", lambda E, red=red: E.t([[1, 2], [3, 4]], "i64").scatter(
        0, E.i([[0, 0], [0, 1]]), E.t([[5, 6], [7, 8]], "i64"), reduce=red))
case("scatter", "reduce_add_grad", lambda E: E.t((3, 4), grad=True).scatter(
    0, E.i(IDX), E.t(SRC, grad=True), reduce="add"))
case("scatter_", "inplace_src", lambda E: E.t((3, 4)).scatter_(0, E.i(IDX), E.t(SRC)))
case("scatter_", "inplace_value", lambda E: E.t((3, 4), "i32").scatter_(1, E.i(IDX), 9))
case("scatter_", "inplace_reduce", lambda E: E.t((3, 4)).scatter_(
    0, E.i(IDX), E.t(SRC), reduce="multiply"))
case("scatter_", "inplace_grad", lambda E: E.t((3, 4), grad=True).clone().scatter_(
    0, E.i(IDX), E.t(SRC, grad=True)))
case("scatter_", "inplace_leaf", lambda E: E.t((3, 4), grad=True).scatter_(0, E.i(IDX), 1.0))
case("scatter_", "inplace_self_T", lambda E: E.t((4, 3), layout="T").scatter_(
    0, E.i(IDX), E.t(SRC)))
case("scatter", "out", lambda E: E.m.scatter(E.t((3, 4)), 0, E.i(IDX), E.t(SRC),
                                             out=E.t((3, 4))))

# scatter_add ---------------------------------------------------------------------------
for dt in ["f32", "f64", "i64", "i32", "u8", "b", "f16"]:
    case("scatter_add", f"{dt}", lambda E, dt=dt: E.t((3, 4), dt).scatter_add(
        0, E.i([[0, 0, 0], [0, 2, 1]]), E.t(SRC, dt)))
case("scatter_add", "grad", lambda E: E.t((3, 4), grad=True).scatter_add(
    0, E.i([[0, 0, 0], [0, 2, 1]]), E.t(SRC, grad=True)))
case("scatter_add", "src_bigger_grad", lambda E: E.t((3, 4), grad=True).scatter_add(
    1, E.i([[3], [3]]), E.t((3, 5), grad=True)))
case("scatter_add", "mismatch", lambda E: E.t((3, 4)).scatter_add(0, E.i(IDX), E.t(SRC, "f64")))
case("scatter_add", "oob", lambda E: E.t((3, 4)).scatter_add(0, E.i([[5]]), E.t((1, 1))))
case("scatter_add", "i32_index", lambda E: E.t((3, 4)).scatter_add(0, E.i(IDX, "i32"),
                                                                   E.t(SRC)))
case("scatter_add", "0d", lambda E: E.t(1.0, grad=True).scatter_add(
    0, E.i(0), E.t(2.0, grad=True)))
case("scatter_add", "empty", lambda E: E.t((0, 4)).scatter_add(
    0, E.i(__import__("numpy").zeros((0, 4), "int64")), E.t((0, 4))))
case("scatter_add", "nc", lambda E: E.t((4, 3), layout="T", grad=True).scatter_add(
    1, E.i([[0, 1], [2, 0], [1, 3]], layout="T"), E.t((2, 3), layout="s", grad=True)))
case("scatter_add", "out", lambda E: E.m.scatter_add(E.t((3, 4)), 0, E.i(IDX), E.t(SRC),
                                                     out=E.t((3, 4))))
case("scatter_add_", "inplace", lambda E: E.t((3, 4)).scatter_add_(0, E.i(IDX), E.t(SRC)))
case("scatter_add", "value_scalar", lambda E: E.t((3, 4)).scatter_add(0, E.i(IDX), 1.0))

# scatter_reduce -------------------------------------------------------------------------
DUP = [[0, 0, 2], [0, 2, 2], [1, 0, 2]]
for red in ["sum", "prod", "mean", "amax", "amin"]:
    for inc in [True, False]:
        for dt in ["f32", "f64", "i64", "i32", "u8", "f16", "b"]:
            case("scatter_reduce", f"{red}_{'inc' if inc else 'exc'}_{dt}",
                 lambda E, red=red, inc=inc, dt=dt: E.t([[1, -2, 3, 0], [5, 0, 7, 9],
                                                        [2, 2, 0, 4]], dt).scatter_reduce(
                     0, E.i(DUP), E.t([[4, 1, 3], [-7, 9, 8], [5, 2, 3]], dt), red,
                     include_self=inc), rtol=1e-3)
        case("scatter_reduce", f"{red}_{'inc' if inc else 'exc'}_grad",
             lambda E, red=red, inc=inc: E.t((3, 4), "f64", grad=True).scatter_reduce(
                 0, E.i(DUP), E.t((3, 3), "f64", grad=True), red, include_self=inc))
        case("scatter_reduce", f"{red}_{'inc' if inc else 'exc'}_ties_grad",
             lambda E, red=red, inc=inc: E.t([[1.0, 2.0, 0.0]], "f64", grad=True).scatter_reduce(
                 1, E.i([[0, 0, 1, 2]]), E.t([[1.0, 1.0, 2.0, 0.0]], "f64", grad=True), red,
                 include_self=inc))
        case("scatter_reduce", f"{red}_{'inc' if inc else 'exc'}_nan",
             lambda E, red=red, inc=inc: E.t([[1.0, float("nan"), 0.0]]).scatter_reduce(
                 1, E.i([[0, 0, 1, 2]]), E.t([[float("nan"), 1.0, 2.0, -0.0]]), red,
                 include_self=inc))
        case("scatter_reduce", f"{red}_{'inc' if inc else 'exc'}_int_mean_round",
             lambda E, red=red, inc=inc: E.t([[-3, 4, 0]], "i64").scatter_reduce(
                 1, E.i([[0, 0, 1, 1]]), E.t([[-2, 0, 5, 2]], "i64"), red, include_self=inc))
    case("scatter_reduce", f"{red}_0d", lambda E, red=red: E.t(3.0, grad=True).scatter_reduce(
        0, E.i(0), E.t(2.0, grad=True), red))
    case("scatter_reduce", f"{red}_empty_index", lambda E, red=red: E.t((3,)).scatter_reduce(
        0, E.i(__import__("numpy").zeros((0,), "int64")), E.t((0,)), red, include_self=False))
    case("scatter_reduce_", f"{red}_inplace", lambda E, red=red: E.t((3, 4)).scatter_reduce_(
        0, E.i(DUP), E.t((3, 3)), red))
    case("scatter_reduce", f"{red}_out", lambda E, red=red: E.m.scatter_reduce(
        E.t((3, 4)), 0, E.i(DUP), E.t((3, 3)), red, out=E.t((3, 4))))
    case("scatter_reduce", f"{red}_nc", lambda E, red=red: E.t((4, 3), "f64", layout="T",
                                                               grad=True).scatter_reduce(
        1, E.i([[0, 0], [2, 0], [1, 3]], layout="T"), E.t((2, 3), "f64", layout="s", grad=True),
        red, include_self=False))
case("scatter_reduce", "bad_reduce", lambda E: E.t((3, 4)).scatter_reduce(
    0, E.i(DUP), E.t((3, 3)), "max"))
case("scatter_reduce", "oob", lambda E: E.t((3, 4)).scatter_reduce(
    0, E.i([[4]]), E.t((3, 3)), "sum"))
case("scatter_reduce", "mismatch", lambda E: E.t((3, 4)).scatter_reduce(
    0, E.i(DUP), E.t((3, 3), "f64"), "sum"))

# index_select --------------------------------------------------------------------------
for dt in ["f32", "f64", "i64", "i32", "u8", "b", "f16", "c64"]:
    case("index_select", f"self_{dt}", lambda E, dt=dt: E.t((3, 4), dt).index_select(
        1, E.i([3, 0, 3])))
for idt in ["i64", "i32", "i16", "u8", "f32", "b"]:
    case("index_select", f"index_{idt}", lambda E, idt=idt: E.t((3, 4)).index_select(
        0, E.i([1, 0], idt)))
case("index_select", "grad_dups", lambda E: E.t((3, 4), grad=True).index_select(
    0, E.i([2, 2, 0])))
case("index_select", "neg", lambda E: E.t((3, 4)).index_select(0, E.i([-1])))
case("index_select", "oob", lambda E: E.t((3, 4)).index_select(0, E.i([3])))
case("index_select", "index_2d", lambda E: E.t((3, 4)).index_select(0, E.i([[0, 1]])))
case("index_select", "index_0d", lambda E: E.t((3, 4), grad=True).index_select(1, E.i(2)))
case("index_select", "empty_index", lambda E: E.t((3, 4), grad=True).index_select(
    1, E.i(__import__("numpy").zeros((0,), "int64"))))
case("index_select", "empty_self", lambda E: E.t((0, 4)).index_select(1, E.i([1])))
case("index_select", "empty_self_oob", lambda E: E.t((0, 4)).index_select(0, E.i([0])))
case("index_select", "0d_self", lambda E: E.t(3.0, grad=True).index_select(0, E.i([0, 0])))
case("index_select", "0d_self_0d", lambda E: E.t(3.0, grad=True).index_select(0, E.i(0)))
case("index_select", "0d_self_oob", lambda E: E.t(3.0).index_select(0, E.i([1])))
case("index_select", "nc", lambda E: E.t((4, 3), layout="T", grad=True).index_select(
    0, E.i([2, 0, 2, 1], layout="s")))
case("index_select", "dim_neg", lambda E: E.t((2, 3, 4), grad=True).index_select(-2, E.i([2])))
case("index_select", "dim_oob", lambda E: E.t((3, 4)).index_select(2, E.i([0])))
case("index_select", "out", lambda E: E.m.index_select(E.t((3, 4)), 0, E.i([1]),
                                                       out=E.t((1, 4))))
case("index_select", "out_resize", lambda E: E.m.index_select(E.t((3, 4)), 0, E.i([1, 2]),
                                                              out=E.m.empty(0)))

# index_add / index_copy / index_fill ----------------------------------------------------
for dt in ["f32", "f64", "i64", "i32", "u8", "b", "f16"]:
    case("index_add", f"{dt}", lambda E, dt=dt: E.t((3, 4), dt).index_add(
        0, E.i([2, 0, 2]), E.t((3, 4), dt)))
    case("index_copy", f"{dt}", lambda E, dt=dt: E.t((3, 4), dt).index_copy(
        1, E.i([3, 0]), E.t((3, 2), dt)))
    case("index_fill", f"{dt}", lambda E, dt=dt: E.t((3, 4), dt).index_fill(1, E.i([3, 0]), 2))
for op in ["index_add", "index_copy"]:
    src = (lambda E: E.t((2, 4), grad=True))
    case(op, "grad", lambda E, op=op, src=src: getattr(E.t((3, 4), grad=True), op)(
        0, E.i([2, 0]), src(E)))
    case(op, "i32_index", lambda E, op=op: getattr(E.t((3, 4)), op)(
        0, E.i([2, 0], "i32"), E.t((2, 4))))
    case(op, "f32_index", lambda E, op=op: getattr(E.t((3, 4)), op)(
        0, E.i([2, 0], "f32"), E.t((2, 4))))
    case(op, "neg_index", lambda E, op=op: getattr(E.t((3, 4)), op)(
        0, E.i([-1, 0]), E.t((2, 4))))
    case(op, "oob", lambda E, op=op: getattr(E.t((3, 4)), op)(0, E.i([3, 0]), E.t((2, 4))))
    case(op, "index_2d", lambda E, op=op: getattr(E.t((3, 4)), op)(0, E.i([[1]]), E.t((1, 4))))
    case(op, "index_0d", lambda E, op=op: getattr(E.t((3, 4), grad=True), op)(
        0, E.i(1), E.t((1, 4), grad=True)))
    case(op, "src_0d_index_0d", lambda E, op=op: getattr(E.t((3,), grad=True), op)(
        0, E.i(1), E.t(5.0, grad=True)))
    case(op, "0d_self", lambda E, op=op: getattr(E.t(3.0, grad=True), op)(
        0, E.i([0]), E.t([4.0], grad=True)))
    case(op, "0d_self_0d", lambda E, op=op: getattr(E.t(3.0, grad=True), op)(
        0, E.i(0), E.t(4.0, grad=True)))
    case(op, "src_wrong_shape", lambda E, op=op: getattr(E.t((3, 4)), op)(
        0, E.i([1, 0]), E.t((2, 3))))
    case(op, "src_wrong_len", lambda E, op=op: getattr(E.t((3, 4)), op)(
        0, E.i([1, 0]), E.t((3, 4))))
    case(op, "dtype_mismatch", lambda E, op=op: getattr(E.t((3, 4)), op)(
        0, E.i([1, 0]), E.t((2, 4), "f64")))
    case(op, "empty_index", lambda E, op=op: getattr(E.t((3, 4), grad=True), op)(
        0, E.i(__import__("numpy").zeros((0,), "int64")), E.t((0, 4), grad=True)))
    case(op, "nc", lambda E, op=op: getattr(E.t((4, 3), layout="T", grad=True), op)(
        1, E.i([3, 0, 1], layout="s"), E.t((3, 3), layout="T", grad=True)))
    case(op, "dups", lambda E, op=op: getattr(E.t((3, 4)), op)(
        0, E.i([1, 1, 1]), E.t((3, 4))))
    case(op + "_", "inplace", lambda E, op=op: getattr(E.t((3, 4)), op + "_")(
        0, E.i([1, 2]), E.t((2, 4))))
    case(op, "out", lambda E, op=op: getattr(E.m, op)(E.t((3, 4)), 0, E.i([1, 2]), E.t((2, 4)),
                                                     out=E.t((3, 4))))
    case(op, "dim_neg", lambda E, op=op: getattr(E.t((2, 3, 4), grad=True), op)(
        -1, E.i([1, 2]), E.t((2, 3, 2), grad=True)))
case("index_add", "alpha", lambda E: E.t((3, 4), grad=True).index_add(
    0, E.i([2, 0]), E.t((2, 4), grad=True), alpha=2.5))
case("index_add", "alpha_int", lambda E: E.t((3, 4), "i64").index_add(
    0, E.i([2, 0]), E.t((2, 4), "i64"), alpha=3))
case("index_add", "alpha_float_int", lambda E: E.t((3, 4), "i64").index_add(
    0, E.i([2, 0]), E.t((2, 4), "i64"), alpha=1.5))
case("index_add", "alpha_bool", lambda E: E.t((3, 4), "b").index_add(
    0, E.i([2, 0]), E.t((2, 4), "b"), alpha=2))
for v in [2, 2.5, True, -1.5, 1j, float("nan")]:
    for dt in ["f32", "i64", "u8", "b"]:
        case("index_fill", f"value_{v!r}_{dt}", lambda E, v=v, dt=dt: E.t((3, 4), dt).index_fill(
            0, E.i([2, 0]), v))
case("index_fill", "value_0d_tensor_grad", lambda E: E.t((3, 4), grad=True).index_fill(
    0, E.i([2, 0]), E.t(1.5, grad=True)))
case("index_fill", "value_1d_tensor", lambda E: E.t((3, 4)).index_fill(0, E.i([2]), E.t([1.5])))
case("index_fill", "value_0d_f64_tensor", lambda E: E.t((3, 4)).index_fill(
    0, E.i([2]), E.t(1.5, "f64")))
case("index_fill", "value_0d_int_tensor", lambda E: E.t((3, 4)).index_fill(
    0, E.i([2]), E.t(2, "i64")))
case("index_fill", "grad", lambda E: E.t((3, 4), grad=True).index_fill(1, E.i([3, 3]), 0.5))
case("index_fill", "neg", lambda E: E.t((3, 4)).index_fill(1, E.i([-1]), 0.5))
case("index_fill", "oob", lambda E: E.t((3, 4)).index_fill(1, E.i([4]), 0.5))
case("index_fill", "neg_oob", lambda E: E.t((3, 4)).index_fill(1, E.i([-5]), 0.5))
case("index_fill", "index_0d", lambda E: E.t((3, 4)).index_fill(1, E.i(2), 0.5))
case("index_fill", "index_2d", lambda E: E.t((3, 4)).index_fill(1, E.i([[2]]), 0.5))
case("index_fill", "index_i32", lambda E: E.t((3, 4)).index_fill(1, E.i([2], "i32"), 0.5))
case("index_fill", "0d_self", lambda E: E.t(3.0, grad=True).index_fill(0, E.i([0]), 0.5))
case("index_fill", "0d_self_oob", lambda E: E.t(3.0).index_fill(0, E.i([1]), 0.5))
case("index_fill", "nc", lambda E: E.t((4, 3), layout="T", grad=True).index_fill(
    0, E.i([1, 0], layout="s"), 7.0))
case("index_fill", "empty", lambda E: E.t((0, 4)).index_fill(1, E.i([1]), 7.0))
case("index_fill_", "inplace", lambda E: E.t((3, 4)).index_fill_(1, E.i([1]), 7.0))
case("index_fill_", "inplace_T", lambda E: E.t((4, 3), layout="T").index_fill_(1, E.i([1]), 7))

# float16/bfloat16 sums: PyTorch accumulates some in float32 (rounding once), others in
# the dtype; [1000, 0.3, -1000] tells which (0.3 against 0.5)
_CANCEL = [1000.0, 0.3, -1000.0]
_ZEROS = [0, 0, 0]
for dt in ["f16", "bf16"]:
    def _src(E, dt=dt, rows=None):
        s = E.t(_CANCEL, "f32").to(getattr(E.m, "float16" if dt == "f16" else "bfloat16"))
        return s if rows is None else s[:, None].expand(3, rows).contiguous()

    def _zeros(E, *shape, dt=dt):
        return E.m.zeros(*shape, dtype=E.m.float16 if dt == "f16" else E.m.bfloat16)
    case("index_add", f"{dt}_acc_1d", lambda E, s=_src, z=_zeros: z(E, 1).index_add(
        0, E.i(_ZEROS), s(E)), rtol=0)
    case("index_add", f"{dt}_acc_2d", lambda E, s=_src, z=_zeros: z(E, 1, 2).index_add(
        0, E.i(_ZEROS), s(E, rows=2)), rtol=0)
    case("index_add", f"{dt}_acc_2d_alpha", lambda E, s=_src, z=_zeros: z(E, 1, 2).index_add(
        0, E.i(_ZEROS), s(E, rows=2), alpha=3), rtol=0)
    case("scatter_add", f"{dt}_acc", lambda E, s=_src, z=_zeros: z(E, 1).scatter_add(
        0, E.i(_ZEROS), s(E)), rtol=0)
    case("scatter", f"{dt}_acc_reduce_add", lambda E, s=_src, z=_zeros: z(E, 1).scatter(
        0, E.i(_ZEROS), s(E), reduce="add"), rtol=0)
    for red in ["sum", "mean", "prod", "amax"]:
        for inc in [True, False]:
            case("scatter_reduce", f"{dt}_acc_{red}_{inc}", lambda E, s=_src, z=_zeros, red=red,
                 inc=inc: (z(E, 2) + 1).scatter_reduce(0, E.i(_ZEROS), s(E) / 7, red,
                                                       include_self=inc), rtol=0)
    case("index_put", f"{dt}_acc", lambda E, s=_src, z=_zeros: z(E, 1, 2).index_put(
        (E.i(_ZEROS),), s(E, rows=2), accumulate=True), rtol=0)
    case("put", f"{dt}_acc", lambda E, s=_src, z=_zeros: z(E, 1).put(E.i(_ZEROS), s(E),
                                                                      accumulate=True), rtol=0)
    case("scatter_reduce", f"{dt}_prod_overflow", lambda E, z=_zeros: (z(E, 1) + 1).scatter_reduce(
        0, E.i([0, 0, 0]), E.t([300.0, 300.0, 1 / 300]).to(z(E, 1).dtype), "prod"), rtol=0)
