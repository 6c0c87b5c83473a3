"""Point-to-point: ``send``, ``recv``, ``isend``, ``irecv``, ``P2POp`` and
``batch_isend_irecv``. Tensors travel as bytes (every dtype); a receive checks that it
got as many bytes as its tensor holds."""
from ember.distributed._collectives import _Bufs, _bytes, _src_array
from ember.distributed._mpi import DistError, mpi
from ember.distributed._pg import Work, resolve

__all__ = ["send", "recv", "isend", "irecv", "P2POp", "batch_isend_irecv"]


def _peer(pg, rank, group_rank, what, name):
    if group_rank is not None:
        r = int(group_rank)
    elif rank is None:
        return None
    else:
        try:
            r = pg._ranks.index(int(rank))
        except ValueError:
            raise ValueError(f"{what}: {name} rank {rank} is not part of the group") from None
    if r == pg.rank():
        raise ValueError(f"Invalid destination rank: {name} rank should not be the same as "
                         "the rank of the current process.")
    return r


def isend(tensor, dst=None, group=None, tag=0, group_dst=None):
    """Start sending ``tensor`` to rank ``dst``; a Work to ``wait()`` on."""
    what = "isend"
    pg = resolve(group)
    if pg is None:
        return None
    pg.check()
    peer = _peer(pg, dst, group_dst, what, "dst")
    if peer is None:
        raise ValueError(f"{what}: dst is required")
    a = _src_array(tensor, what)
    req = pg.comm.Isend(_bytes(a), dest=peer, tag=tag)
    # the array is kept alive by the Work until the send completes
    return Work(pg, [req], f"{what} to rank {pg._ranks[peer]}", None, result=[tensor],
                peers=[peer], finish=lambda: a)


def irecv(tensor, src=None, group=None, tag=0, group_src=None):
    """Start receiving into ``tensor`` from rank ``src`` (any rank when None)."""
    what = "irecv"
    MPI = mpi()
    pg = resolve(group)
    if pg is None:
        return None
    pg.check()
    peer = _peer(pg, src, group_src, what, "src")
    bufs = _Bufs()
    buf = bufs.out(tensor, what)
    status = MPI.Status()
    req = pg.comm.Irecv(_bytes(buf), source=MPI.ANY_SOURCE if peer is None else peer, tag=tag)
    work = Work(pg, [req], f"{what} from rank "
                f"{'any' if peer is None else pg._ranks[peer]}", None, result=[tensor],
                peers=[] if peer is None else [peer], statuses=[status])

    def finish():
        got = status.Get_count(MPI.BYTE)
        if got != buf.nbytes:
            raise DistError(f"{what}: received {got} bytes from rank "
                            f"{pg._ranks[status.Get_source()]} into a tensor of "
                            f"{buf.nbytes} bytes (shape {list(buf.shape)}, {buf.dtype}): "
                            "sender and receiver disagree on the tensor")
        work.source = pg._ranks[status.Get_source()]
        bufs.finish()
    work._finish = finish
    return work


def send(tensor, dst=None, group=None, tag=0, group_dst=None):
    """Send ``tensor`` to rank ``dst`` and wait until it is sent."""
    work = isend(tensor, dst, group, tag, group_dst)
    if work is not None:
        work.wait()


def recv(tensor, src=None, group=None, tag=0, group_src=None):
    """Receive into ``tensor`` from rank ``src`` (any rank when None); the sender's rank."""
    work = irecv(tensor, src, group, tag, group_src)
    if work is None:
        return -1
    work.wait()
    return work.source


class P2POp:
    """One send or receive for ``batch_isend_irecv``: ``P2POp(dist.isend, tensor, peer)``."""

    def __init__(self, op, tensor, peer=None, group=None, tag=0, group_peer=None):
        if op not in (isend, irecv):
            raise ValueError("Invalid ``op``. Expected ``op`` to be of type "
                             "``torch.distributed.isend`` or ``torch.distributed.irecv``.")
        self.op, self.tensor, self.peer, self.group, self.tag = op, tensor, peer, group, tag
        self.group_peer = group_peer


def batch_isend_irecv(p2p_op_list):
    """Start every operation of ``p2p_op_list`` (P2POp's); their Works, in order."""
    if not p2p_op_list or not all(isinstance(p, P2POp) for p in p2p_op_list):
        raise ValueError("Invalid ``p2p_op_list``. Each op is expected to to be of type "
                         "``torch.distributed.P2POp``.")
    return [p.op(p.tensor, p.peer, p.group, p.tag, p.group_peer) for p in p2p_op_list]
