"""Collectives on tensors, in place as PyTorch's: ``all_reduce``, ``broadcast``,
``reduce``, ``all_gather``, ``all_gather_into_tensor``, ``reduce_scatter``,
``reduce_scatter_tensor``, ``gather``, ``scatter``, ``all_to_all``, ``all_to_all_single``.

Before moving data, the ranks agree on what they are doing: a small all-reduce of
each rank's (call, dtype, shape, root, op) tells whether every rank called the same
collective on the same kind of tensor; if not, every rank raises an error listing what
each one passed (MPI itself would truncate, hang or crash). Data that is only moved
travels as bytes, so every dtype works; reductions use MPI's operators where MPI has
the type and, for the rest (float16), gather the contributions and reduce them here in
rank order, so every rank gets the same bits.
"""
import functools
from enum import IntEnum

import numpy as np

from ember._tensor import Tensor
from ember.distributed._mpi import DistError, mpi
from ember.distributed._pg import Work, resolve

__all__ = ["ReduceOp", "all_reduce", "broadcast", "reduce", "all_gather",
           "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor", "gather",
           "scatter", "all_to_all", "all_to_all_single"]


class RedOpType(IntEnum):
    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4
    BAND = 5
    BOR = 6
    BXOR = 7
    PREMUL_SUM = 8
    UNUSED = 9


class ReduceOp:
    """The reduction of ``all_reduce``, ``reduce`` and ``reduce_scatter``:
    ``ReduceOp.SUM``, ``AVG``, ``PRODUCT``, ``MIN``, ``MAX``, ``BAND``, ``BOR``, ``BXOR``."""
    RedOpType = RedOpType
    SUM = RedOpType.SUM
    AVG = RedOpType.AVG
    PRODUCT = RedOpType.PRODUCT
    MIN = RedOpType.MIN
    MAX = RedOpType.MAX
    BAND = RedOpType.BAND
    BOR = RedOpType.BOR
    BXOR = RedOpType.BXOR
    PREMUL_SUM = RedOpType.PREMUL_SUM


_OPS = ("all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor",
        "reduce_scatter", "reduce_scatter_tensor", "gather", "scatter", "all_to_all",
        "all_to_all_single", "bucket_all_reduce", "broadcast_object_list",
        "all_gather_object", "gather_object", "scatter_object_list", "new_group")
_NUMPY_REDUCE = {RedOpType.SUM: np.add, RedOpType.AVG: np.add, RedOpType.PRODUCT: np.multiply,
                 RedOpType.MIN: np.minimum, RedOpType.MAX: np.maximum,
                 RedOpType.BAND: np.bitwise_and, RedOpType.BOR: np.bitwise_or,
                 RedOpType.BXOR: np.bitwise_xor}
# bool tensors reduce as 0/1 bytes: a sum is "any", a product "all", as in PyTorch
_BOOL_OPS = {RedOpType.SUM: RedOpType.MAX, RedOpType.PRODUCT: RedOpType.MIN}


_TYPES = {}
_MPI_OPS = {}


def _mpi_type(dt):
    """MPI's datatype for a NumPy dtype that MPI can reduce, else None."""
    if not _TYPES:
        MPI = mpi()
        _TYPES.update({np.dtype(np.float32): MPI.FLOAT, np.dtype(np.float64): MPI.DOUBLE,
                       np.dtype(np.int8): MPI.INT8_T, np.dtype(np.int16): MPI.INT16_T,
                       np.dtype(np.int32): MPI.INT32_T, np.dtype(np.int64): MPI.INT64_T,
                       np.dtype(np.uint8): MPI.UINT8_T})
    return _TYPES.get(dt)


def _mpi_op(op):
    if not _MPI_OPS:
        MPI = mpi()
        _MPI_OPS.update({RedOpType.SUM: MPI.SUM, RedOpType.AVG: MPI.SUM,
                         RedOpType.PRODUCT: MPI.PROD, RedOpType.MIN: MPI.MIN,
                         RedOpType.MAX: MPI.MAX, RedOpType.BAND: MPI.BAND,
                         RedOpType.BOR: MPI.BOR, RedOpType.BXOR: MPI.BXOR})
    return _MPI_OPS[op]


def _op(op, arr, what):
    """Check ``op`` against the array's dtype; the op to run on its (maybe byte) view."""
    if op is RedOpType.SUM and arr.dtype.kind != "b":
        return op  # the common case, checked first
    try:
        op = RedOpType(int(op))
    except (TypeError, ValueError):
        raise ValueError(f"{what}: unknown reduce op {op!r}; use dist.ReduceOp") from None
    if op in (RedOpType.PREMUL_SUM, RedOpType.UNUSED):
        raise NotImplementedError(f"{what}: ReduceOp.{op.name} is not implemented in ember")
    kind = arr.dtype.kind
    if op in (RedOpType.BAND, RedOpType.BOR, RedOpType.BXOR) and kind == "f":
        raise RuntimeError(f"{what}: Cannot use ReduceOp.{op.name} with "
                           f"{_torch_dtype_name(arr.dtype)}")
    if op is RedOpType.AVG and kind in "iub":
        raise RuntimeError(f"{what}: ReduceOp.AVG needs a floating point tensor, got "
                           f"{_torch_dtype_name(arr.dtype)}")
    if kind == "b":
        op = _BOOL_OPS.get(op, op)
    return op


def _torch_dtype_name(dt):
    from ember.backend.dtypes import FROM_NP
    d = FROM_NP.get(np.dtype(dt))
    return d.name.capitalize() if d is not None else str(dt)


def _tensor_array(t, what, name="tensor"):
    if not isinstance(t, Tensor):
        raise TypeError(f"{what}: {name} must be a Tensor, got {type(t).__name__}")
    a = t._data
    if not isinstance(a, np.ndarray):
        raise NotImplementedError(f"{what}: ember.distributed moves CPU tensors; move "
                                  f"{name} to the CPU first (CUDA-aware MPI is not wired)")
    return a


class _Bufs:
    """Contiguous arrays standing in for tensors during a call; ``finish`` copies them
    back into non-contiguous tensors and bumps every written tensor's version."""

    def __init__(self):
        self.writes = []

    def out(self, t, what, name="tensor"):
        a = _tensor_array(t, what, name)
        if a.flags.c_contiguous:
            self.writes.append((t, None))
            return a
        c = np.ascontiguousarray(a)
        self.writes.append((t, c))
        return c

    def finish(self):
        for t, c in self.writes:
            if c is not None:
                t._data[...] = c
            t._vc[0] += 1


def _src_array(t, what, name="tensor"):
    return np.ascontiguousarray(_tensor_array(t, what, name))


def _bytes(a):
    return [a.reshape(-1).view(np.uint8), mpi().BYTE]


@functools.lru_cache(maxsize=1024)
def _signature(what, dtype, shape, root, op):
    """The int64 vector [sig, -sig] that ``agree`` all-reduces with MAX."""
    sig = np.array([_OPS.index(what), _dtype_code(dtype), _shape_code(shape), root, op],
                   np.int64)
    return np.concatenate([sig, -sig])


def _shape_code(shape):
    h = 1469598103934665603
    for d in (len(shape),) + tuple(shape):
        h = ((h ^ int(d)) * 1099511628211) % (1 << 61)
    return h


def _dtype_code(dt):
    return sum(ord(c) << (8 * i) for i, c in enumerate(np.dtype(dt).str[:7]))


def agree(pg, seq, what, dtype, shape, root=-1, op=-1, detail=None):
    """Every rank checks that the others called ``what`` with the same dtype, shape,
    root and op; raises DistError (on every rank) listing what each passed if not."""
    MPI = mpi()
    both = _signature(what, np.dtype(dtype), tuple(shape), root, op).copy()
    req = pg.comm.Iallreduce(MPI.IN_PLACE, [both, MPI.INT64_T], op=MPI.MAX)
    pg.wait([req], what, seq)
    n = len(both) // 2
    vals = both.tolist()
    if vals[:n] == [-v for v in vals[n:]]:
        return
    mine = detail or (f"{what}({_torch_dtype_name(dtype)} tensor of shape {list(shape)}"
                      + (f", root {root}" if root >= 0 else "")
                      + (f", op {RedOpType(op).name}" if op >= 0 else "") + ")")
    req = pg.comm.Iallgather([np.frombuffer(mine.encode()[:200].ljust(200), np.uint8),
                              MPI.BYTE], [everyone := np.empty((pg.size(), 200), np.uint8),
                                          MPI.BYTE])
    pg.wait([req], what, seq)
    lines = [f"rank {pg._ranks[r]}: {bytes(row).decode(errors='replace').rstrip()}"
             for r, row in enumerate(everyone)]
    raise DistError(f"{what}: the ranks disagree (every rank must call the same collective "
                    f"with tensors of the same dtype and shape): " + "; ".join(lines))


def _finish_work(pg, reqs, what, seq, async_op, finish, result=None):
    work = Work(pg, reqs, what, seq, finish=finish, result=result)
    if async_op:
        return work
    work.wait()
    return None


def _group_rank(pg, global_rank, what, name):
    try:
        return pg._ranks.index(int(global_rank))
    except ValueError:
        raise ValueError(f"{what}: {name} rank {global_rank} is not part of the group "
                         f"(its ranks are {pg._ranks})") from None


def _root(pg, what, src, group_src, name):
    if group_src is not None:
        if not 0 <= group_src < pg.size():
            raise ValueError(f"{what}: group_{name} {group_src} is not in the group")
        return int(group_src)
    if src is None:
        raise ValueError(f"{what}: {name} is required")
    return _group_rank(pg, src, what, name)


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``tensor`` over the ranks of ``group``, in place, on every rank.

    >>> t = ember.ones(3) * (dist.get_rank() + 1)   # doctest: +SKIP
    >>> dist.all_reduce(t)                          # every rank: 1 + 2 + ... + world
    """
    what = "all_reduce"
    pg = resolve(group)
    if pg is None:
        return None
    a = _tensor_array(tensor, what)
    rop = _op(op, a, what)
    seq = pg.next_seq()
    agree(pg, seq, what, a.dtype, a.shape, op=int(op))
    bufs = _Bufs()
    buf = bufs.out(tensor, what)
    reqs, after = start_all_reduce(pg, buf, rop)

    def finish():
        after()
        if rop is RedOpType.AVG:
            np.divide(buf, pg.size(), out=buf, casting="unsafe")
        bufs.finish()
    return _finish_work(pg, reqs, what, seq, async_op, finish, [tensor])


def start_all_reduce(pg, buf, rop):
    """Start an in-place all-reduce of the contiguous array ``buf`` (no checks); the MPI
    requests and a function to call once they are complete."""
    MPI = mpi()
    view = buf.view(np.uint8) if buf.dtype.kind == "b" else buf
    mt = _mpi_type(view.dtype)
    if mt is not None:
        req = pg.comm.Iallreduce(MPI.IN_PLACE, [view.reshape(-1), mt], op=_mpi_op(rop))
        return [req], lambda: None
    everyone = np.empty((pg.size(),) + buf.shape, buf.dtype)
    req = pg.comm.Iallgather(_bytes(buf), _bytes(everyone))

    def after():
        buf[...] = functools.reduce(_NUMPY_REDUCE[rop], everyone)
    return [req], after


def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    """Copy ``tensor`` from rank ``src`` into ``tensor`` on every rank of ``group``."""
    what = "broadcast"
    pg = resolve(group)
    if pg is None:
        return None
    root = _root(pg, what, src, group_src, "src")
    a = _tensor_array(tensor, what)
    seq = pg.next_seq()
    agree(pg, seq, what, a.dtype, a.shape, root=root)
    bufs = _Bufs()
    buf = bufs.out(tensor, what)
    req = pg.comm.Ibcast(_bytes(buf), root=root)
    return _finish_work(pg, [req], what, seq, async_op, bufs.finish, [tensor])


def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op=False, group_dst=None):
    """Reduce ``tensor`` over the ranks into ``tensor`` on rank ``dst`` (the others keep
    theirs)."""
    what = "reduce"
    MPI = mpi()
    pg = resolve(group)
    if pg is None:
        return None
    root = _root(pg, what, dst, group_dst, "dst")
    a = _tensor_array(tensor, what)
    rop = _op(op, a, what)
    seq = pg.next_seq()
    agree(pg, seq, what, a.dtype, a.shape, root=root, op=int(op))
    bufs = _Bufs()
    buf = bufs.out(tensor, what) if pg.rank() == root else _src_array(tensor, what)
    view = buf.view(np.uint8) if buf.dtype.kind == "b" else buf
    mt = _mpi_type(view.dtype)
    at_root = pg.rank() == root
    if mt is not None:
        send = MPI.IN_PLACE if at_root else [view.reshape(-1), mt]
        req = pg.comm.Ireduce(send, [view.reshape(-1), mt], op=_mpi_op(rop), root=root)

        def after():
            pass
    else:
        everyone = np.empty((pg.size(),) + buf.shape, buf.dtype) if at_root else None
        req = pg.comm.Igather(_bytes(buf), _bytes(everyone) if at_root else None, root=root)

        def after():
            if at_root:
                buf[...] = functools.reduce(_NUMPY_REDUCE[rop], everyone)

    def finish():
        after()
        if at_root:
            if rop is RedOpType.AVG:
                np.divide(buf, pg.size(), out=buf, casting="unsafe")
            bufs.finish()
    return _finish_work(pg, [req], what, seq, async_op, finish, [tensor])


def _check_list(lst, n, what, name, like):
    if not isinstance(lst, (list, tuple)) or len(lst) != n:
        raise ValueError(f"{what}: {name} must be a list of {n} tensors (one per rank)")
    for t in lst:
        a = _tensor_array(t, what, name)
        if a.shape != like.shape or a.dtype != like.dtype:
            raise ValueError(f"{what}: every tensor of {name} must have the dtype and shape "
                             f"of the input ({_torch_dtype_name(like.dtype)} "
                             f"{list(like.shape)}), got {_torch_dtype_name(a.dtype)} "
                             f"{list(a.shape)}")


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """``tensor_list[r]`` = ``tensor`` of rank ``r``, on every rank."""
    what = "all_gather"
    pg = resolve(group)
    if pg is None:
        return None
    a = _src_array(tensor, what)
    _check_list(tensor_list, pg.size(), what, "tensor_list", a)
    seq = pg.next_seq()
    agree(pg, seq, what, a.dtype, a.shape)
    everyone = np.empty((pg.size(),) + a.shape, a.dtype)
    req = pg.comm.Iallgather(_bytes(a), _bytes(everyone))

    def finish():
        _scatter_rows(everyone, tensor_list)
    return _finish_work(pg, [req], what, seq, async_op, finish, tensor_list)


def _scatter_rows(rows, tensors):
    for row, t in zip(rows, tensors):
        t._data[...] = row
        t._vc[0] += 1


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """Every rank's ``input_tensor`` concatenated (along dim 0, or stacked) into
    ``output_tensor``, whose size is the world size times the input's."""
    what = "all_gather_into_tensor"
    pg = resolve(group)
    if pg is None:
        return None
    a = _src_array(input_tensor, what, "input_tensor")
    o = _tensor_array(output_tensor, what, "output_tensor")
    if o.dtype != a.dtype or o.size != a.size * pg.size():
        raise ValueError(f"{what}: output_tensor must hold world_size ({pg.size()}) times "
                         f"the input's elements of dtype {_torch_dtype_name(a.dtype)}, got "
                         f"{_torch_dtype_name(o.dtype)} {list(o.shape)} for input "
                         f"{list(a.shape)}")
    seq = pg.next_seq()
    agree(pg, seq, what, a.dtype, a.shape)
    bufs = _Bufs()
    buf = bufs.out(output_tensor, what, "output_tensor")
    req = pg.comm.Iallgather(_bytes(a), _bytes(buf))
    return _finish_work(pg, [req], what, seq, async_op, bufs.finish, [output_tensor])


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """``output`` on rank ``r`` = the reduction over ranks of their ``input_list[r]``."""
    what = "reduce_scatter"
    pg = resolve(group)
    if pg is None:
        return None
    o = _tensor_array(output, what, "output")
    _check_list(input_list, pg.size(), what, "input_list", o)
    stacked = np.stack([np.asarray(t._data) for t in input_list])
    return _reduce_scatter(pg, what, output, stacked, op, async_op)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """``output`` on rank ``r`` = the reduction over ranks of chunk ``r`` of ``input``
    (whose size is the world size times the output's)."""
    what = "reduce_scatter_tensor"
    pg = resolve(group)
    if pg is None:
        return None
    o = _tensor_array(output, what, "output")
    a = _src_array(input, what, "input")
    if a.dtype != o.dtype or a.size != o.size * pg.size():
        raise ValueError(f"{what}: input must hold world_size ({pg.size()}) times the "
                         f"output's elements, got {list(a.shape)} for output "
                         f"{list(o.shape)}")
    return _reduce_scatter(pg, what, output, a.reshape((pg.size(),) + o.shape), op, async_op)


def _reduce_scatter(pg, what, output, stacked, op, async_op):
    rop = _op(op, stacked, what)
    seq = pg.next_seq()
    agree(pg, seq, what, stacked.dtype, stacked.shape, op=int(op))
    bufs = _Bufs()
    buf = bufs.out(output, what, "output")
    view = stacked.view(np.uint8) if stacked.dtype.kind == "b" else stacked
    mt = _mpi_type(view.dtype)
    if mt is not None:
        out_view = buf.view(np.uint8) if buf.dtype.kind == "b" else buf
        req = pg.comm.Ireduce_scatter_block([np.ascontiguousarray(view).reshape(-1), mt],
                                            [out_view.reshape(-1), mt], op=_mpi_op(rop))

        def after():
            pass
    else:
        # the whole input is reduced and each rank keeps its chunk: simple, and only
        # float16 takes this path
        work = np.ascontiguousarray(stacked).copy()
        reqs, reduced = start_all_reduce(pg, work, rop)
        req = reqs[0]

        def after():
            reduced()
            buf[...] = work[pg.rank()]

    def finish():
        after()
        if rop is RedOpType.AVG:
            np.divide(buf, pg.size(), out=buf, casting="unsafe")
        bufs.finish()
    return _finish_work(pg, [req], what, seq, async_op, finish, [output])


def gather(tensor, gather_list=None, dst=None, group=None, async_op=False, group_dst=None):
    """``gather_list[r]`` on rank ``dst`` = ``tensor`` of rank ``r``."""
    what = "gather"
    pg = resolve(group)
    if pg is None:
        return None
    root = _root(pg, what, 0 if dst is None and group_dst is None else dst, group_dst, "dst")
    a = _src_array(tensor, what)
    at_root = pg.rank() == root
    if at_root:
        _check_list(gather_list, pg.size(), what, "gather_list", a)
    elif gather_list:
        raise ValueError("Argument ``gather_list`` must NOT be specified on non-destination "
                         "ranks.")
    seq = pg.next_seq()
    agree(pg, seq, what, a.dtype, a.shape, root=root)
    everyone = np.empty((pg.size(),) + a.shape, a.dtype) if at_root else None
    req = pg.comm.Igather(_bytes(a), _bytes(everyone) if at_root else None, root=root)

    def finish():
        if at_root:
            _scatter_rows(everyone, gather_list)
    return _finish_work(pg, [req], what, seq, async_op, finish, gather_list)


def scatter(tensor, scatter_list=None, src=None, group=None, async_op=False, group_src=None):
    """``tensor`` on rank ``r`` = ``scatter_list[r]`` of rank ``src``."""
    what = "scatter"
    pg = resolve(group)
    if pg is None:
        return None
    root = _root(pg, what, 0 if src is None and group_src is None else src, group_src, "src")
    o = _tensor_array(tensor, what)
    at_root = pg.rank() == root
    if at_root:
        _check_list(scatter_list, pg.size(), what, "scatter_list", o)
        stacked = np.stack([np.asarray(t._data) for t in scatter_list])
    elif scatter_list:
        raise ValueError("Argument ``scatter_list`` must NOT be specified on non-source "
                         "ranks.")
    seq = pg.next_seq()
    agree(pg, seq, what, o.dtype, o.shape, root=root)
    bufs = _Bufs()
    buf = bufs.out(tensor, what)
    req = pg.comm.Iscatter(_bytes(stacked) if at_root else None, _bytes(buf), root=root)
    return _finish_work(pg, [req], what, seq, async_op, bufs.finish, [tensor])


def _all_to_all_bytes(pg, what, seq, send, send_counts, recv, recv_counts, itemsize):
    """Exchange the byte blocks; first the ranks check that what each sends to each other
    is what that one expects to receive."""
    MPI = mpi()
    counts = np.array(send_counts, np.int64)
    theirs = np.empty(pg.size(), np.int64)
    req = pg.comm.Ialltoall([counts, MPI.INT64_T], [theirs, MPI.INT64_T])
    pg.wait([req], what, seq)
    want = np.array(recv_counts, np.int64)
    bad = np.nonzero(theirs != want)[0]
    ok = np.array([0 if len(bad) else 1], np.int64)
    req = pg.comm.Iallreduce(MPI.IN_PLACE, [ok, MPI.INT64_T], op=MPI.MIN)
    pg.wait([req], what, seq)
    if not ok[0]:
        detail = "; ".join(f"rank {pg._ranks[r]} sends {theirs[r]} elements, this rank "
                           f"expects {want[r]}" for r in bad)
        raise DistError(f"{what}: the split sizes disagree across ranks"
                        + (f" ({detail})" if detail else " (on another rank)"))
    sc = counts * itemsize
    rc = want * itemsize
    sd = np.concatenate([[0], np.cumsum(sc)[:-1]])
    rd = np.concatenate([[0], np.cumsum(rc)[:-1]])
    return pg.comm.Ialltoallv([send.reshape(-1).view(np.uint8), (sc, sd), MPI.BYTE],
                              [recv.reshape(-1).view(np.uint8), (rc, rd), MPI.BYTE])


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    """``output_tensor_list[j]`` on rank ``i`` = ``input_tensor_list[i]`` of rank ``j``
    (sizes may differ per pair, dtypes may not)."""
    what = "all_to_all"
    pg = resolve(group)
    if pg is None:
        return None
    n = pg.size()
    if len(output_tensor_list) != n or len(input_tensor_list) != n:
        raise ValueError(f"{what}: both lists must hold one tensor per rank ({n})")
    ins = [_src_array(t, what, "input_tensor_list") for t in input_tensor_list]
    outs = [_tensor_array(t, what, "output_tensor_list") for t in output_tensor_list]
    dt = ins[0].dtype
    if any(a.dtype != dt for a in ins + outs):
        raise ValueError(f"{what}: all tensors must have the same dtype")
    seq = pg.next_seq()
    agree(pg, seq, what, dt, ())
    send = np.concatenate([a.reshape(-1) for a in ins]) if ins else np.empty(0, dt)
    recv = np.empty(sum(a.size for a in outs), dt)
    req = _all_to_all_bytes(pg, what, seq, send, [a.size for a in ins], recv,
                            [a.size for a in outs], dt.itemsize)

    def finish():
        off = 0
        for t, a in zip(output_tensor_list, outs):
            t._data[...] = recv[off:off + a.size].reshape(a.shape)
            t._vc[0] += 1
            off += a.size
    return _finish_work(pg, [req], what, seq, async_op, finish, output_tensor_list)


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None,
                      group=None, async_op=False):
    """Split ``input`` along dim 0 (evenly, or by ``input_split_sizes``), send part ``j``
    to rank ``j``, and concatenate what arrives into ``output``."""
    what = "all_to_all_single"
    pg = resolve(group)
    if pg is None:
        return None
    n = pg.size()
    a = _src_array(input, what, "input")
    o = _tensor_array(output, what, "output")
    if a.dtype != o.dtype:
        raise ValueError(f"{what}: input and output must have the same dtype")
    row_in = int(np.prod(a.shape[1:])) if a.ndim else 1
    row_out = int(np.prod(o.shape[1:])) if o.ndim else 1

    def splits(sizes, rows, name):
        if sizes is None or len(sizes) == 0:
            if rows % n:
                raise ValueError(f"{what}: dim 0 of {name} ({rows}) must divide by the "
                                 f"world size ({n}) when no split sizes are given")
            return [rows // n] * n
        sizes = [int(s) for s in sizes]
        if len(sizes) != n or sum(sizes) != rows:
            raise ValueError(f"{what}: {name} split sizes {sizes} must have {n} entries "
                             f"summing to dim 0 ({rows})")
        return sizes
    si = splits(input_split_sizes, a.shape[0] if a.ndim else 1, "input")
    so = splits(output_split_sizes, o.shape[0] if o.ndim else 1, "output")
    seq = pg.next_seq()
    agree(pg, seq, what, a.dtype, a.shape[1:])
    bufs = _Bufs()
    buf = bufs.out(output, what, "output")
    req = _all_to_all_bytes(pg, what, seq, a, [s * row_in for s in si], buf,
                            [s * row_out for s in so], a.dtype.itemsize)
    return _finish_work(pg, [req], what, seq, async_op, bufs.finish, [output])
