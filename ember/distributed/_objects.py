"""Collectives on picklable Python objects: ``broadcast_object_list``,
``all_gather_object``, ``gather_object``, ``scatter_object_list``. Objects are pickled
to bytes; first the sizes travel, then the bytes."""
import pickle

import numpy as np

from ember.distributed._collectives import _root, agree
from ember.distributed._mpi import mpi
from ember.distributed._pg import resolve

__all__ = ["broadcast_object_list", "all_gather_object", "gather_object",
           "scatter_object_list"]


def _dumps(obj):
    return np.frombuffer(pickle.dumps(obj), np.uint8)


def _loads(a):
    return pickle.loads(a.tobytes())


def _displs(counts):
    return np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)


def broadcast_object_list(object_list, src=None, group=None, device=None, group_src=None):
    """Replace ``object_list``'s items on every rank with rank ``src``'s (same length)."""
    what = "broadcast_object_list"
    MPI = mpi()
    pg = resolve(group)
    if pg is None:
        return
    root = _root(pg, what, 0 if src is None and group_src is None else src, group_src, "src")
    seq = pg.next_seq()
    agree(pg, seq, what, np.uint8, (len(object_list),), root=root)
    data = _dumps(list(object_list)) if pg.rank() == root else None
    n = np.array([0 if data is None else data.size], np.int64)
    pg.wait([pg.comm.Ibcast([n, MPI.INT64_T], root=root)], what, seq)
    if data is None:
        data = np.empty(int(n[0]), np.uint8)
    pg.wait([pg.comm.Ibcast([data, MPI.BYTE], root=root)], what, seq)
    if pg.rank() != root:
        object_list[:] = _loads(data)


def _gather_bytes(pg, what, seq, data, root=None):
    """Every rank's byte string on every rank (``root`` None) or on ``root``."""
    MPI = mpi()
    n = np.array([data.size], np.int64)
    counts = np.empty(pg.size(), np.int64)
    if root is None:
        pg.wait([pg.comm.Iallgather([n, MPI.INT64_T], [counts, MPI.INT64_T])], what, seq)
    else:
        pg.wait([pg.comm.Igather([n, MPI.INT64_T], [counts, MPI.INT64_T], root=root)],
                what, seq)
    here = root is None or pg.rank() == root
    out = np.empty(int(counts.sum()) if here else 0, np.uint8)
    recv = [out, (counts, _displs(counts)), MPI.BYTE] if here else None
    if root is None:
        req = pg.comm.Iallgatherv([data, MPI.BYTE], recv)
    else:
        req = pg.comm.Igatherv([data, MPI.BYTE], recv, root=root)
    pg.wait([req], what, seq)
    if not here:
        return None
    offs = _displs(counts)
    return [_loads(out[o:o + c]) for o, c in zip(offs, counts)]


def all_gather_object(object_list, obj, group=None):
    """``object_list[r]`` = ``obj`` of rank ``r``, on every rank."""
    what = "all_gather_object"
    pg = resolve(group)
    if pg is None:
        return
    if len(object_list) != pg.size():
        raise ValueError(f"{what}: object_list must have one slot per rank ({pg.size()})")
    seq = pg.next_seq()
    agree(pg, seq, what, np.uint8, ())
    object_list[:] = _gather_bytes(pg, what, seq, _dumps(obj))


def gather_object(obj, object_gather_list=None, dst=None, group=None, group_dst=None):
    """``object_gather_list[r]`` on rank ``dst`` = ``obj`` of rank ``r``."""
    what = "gather_object"
    pg = resolve(group)
    if pg is None:
        return
    root = _root(pg, what, 0 if dst is None and group_dst is None else dst, group_dst, "dst")
    if pg.rank() == root:
        if object_gather_list is None or len(object_gather_list) != pg.size():
            raise ValueError(f"{what}: object_gather_list must have one slot per rank "
                             f"({pg.size()}) on the destination rank")
    elif object_gather_list is not None:
        raise ValueError("Argument ``object_gather_list`` must NOT be specified on "
                         "non-destination ranks.")
    seq = pg.next_seq()
    agree(pg, seq, what, np.uint8, (), root=root)
    got = _gather_bytes(pg, what, seq, _dumps(obj), root)
    if got is not None:
        object_gather_list[:] = got


def scatter_object_list(scatter_object_output_list, scatter_object_input_list=None, src=None,
                        group=None, group_src=None):
    """``scatter_object_output_list[0]`` on rank ``r`` = ``scatter_object_input_list[r]``
    of rank ``src``."""
    what = "scatter_object_list"
    MPI = mpi()
    pg = resolve(group)
    if pg is None:
        return
    root = _root(pg, what, 0 if src is None and group_src is None else src, group_src, "src")
    if not isinstance(scatter_object_output_list, list) or not scatter_object_output_list:
        raise ValueError("Expected argument scatter_object_output_list to be a list of size "
                         "at least 1.")
    at_root = pg.rank() == root
    if at_root and (scatter_object_input_list is None
                    or len(scatter_object_input_list) != pg.size()):
        raise ValueError(f"{what}: scatter_object_input_list must have one object per rank "
                         f"({pg.size()}) on the source rank")
    seq = pg.next_seq()
    agree(pg, seq, what, np.uint8, (), root=root)
    parts = [_dumps(o) for o in scatter_object_input_list] if at_root else []
    counts = np.array([p.size for p in parts], np.int64) if at_root else None
    n = np.empty(1, np.int64)
    pg.wait([pg.comm.Iscatter([counts, MPI.INT64_T] if at_root else None, [n, MPI.INT64_T],
                              root=root)], what, seq)
    data = np.empty(int(n[0]), np.uint8)
    send = [np.concatenate(parts), (counts, _displs(counts)), MPI.BYTE] if at_root else None
    pg.wait([pg.comm.Iscatterv(send, [data, MPI.BYTE], root=root)], what, seq)
    scatter_object_output_list[0] = _loads(data)
