"""Process groups: ``init_process_group``, ``new_group``, ranks, ``barrier`` and ``Work``.

Every backend name runs on MPI. A process group owns two duplicates of an MPI
communicator: one carries the collectives, the other the small "I am waiting in
collective #k" notes that let a timeout name the ranks that never arrived.
"""
import atexit
import logging
import os
import socket
import sys
import time
import weakref
from datetime import timedelta

import numpy as np

from ember.distributed import _departures
from ember.distributed._mpi import DistError, DistTimeoutError, mpi, wait_all

__all__ = ["init_process_group", "destroy_process_group", "is_initialized", "get_rank",
           "get_world_size", "get_backend", "new_group", "barrier", "monitored_barrier",
           "ProcessGroup", "GroupMember", "group", "Work", "Backend", "default_pg_timeout",
           "get_process_group_ranks", "get_global_rank", "get_group_rank",
           "is_torchelastic_launched", "get_node_local_rank"]

log = logging.getLogger("ember.distributed")

default_pg_timeout = timedelta(minutes=30)  # PyTorch's default for gloo
_ANNOUNCE_TAG = 7301


class Backend(str):
    """A backend name. ember accepts ``"mpi"``, ``"gloo"`` and ``"nccl"`` (also
    ``"cpu:gloo,cuda:nccl"``); all of them run on MPI."""
    MPI, GLOO, NCCL, UCC, UNDEFINED = "mpi", "gloo", "nccl", "ucc", "undefined"

    def __new__(cls, name):
        if not isinstance(name, str):
            raise ValueError(f"Backend name must be a string, but got: {name}")
        value = name.lower()
        parts = [p.split(":")[-1] for p in value.split(",")]
        bad = [p for p in parts if p not in ("mpi", "gloo", "nccl")]
        if bad:
            raise ValueError(f"Invalid backend: '{name}'. ember accepts 'mpi', 'gloo' and "
                             "'nccl', which all run on MPI")
        return super().__new__(cls, value)


class ProcessGroup:
    """A set of ranks that run collectives together (``torch.distributed.ProcessGroup``).

    ``rank()`` and ``size()`` are this process's rank in the group and the group's size.
    """

    def __init__(self, comm, ranks, backend, timeout, info, gid=0):
        self.comm = comm
        self.ctrl = comm.Dup()
        for c in (self.comm, self.ctrl):
            c.Set_errhandler(mpi().ERRORS_RETURN)
        self._ranks = list(ranks)  # group rank -> global rank
        self._rank = comm.Get_rank()
        self._size = comm.Get_size()
        self.backend = backend
        self.timeout = timeout
        self.timeout_s = timeout.total_seconds()
        self.info = info  # group rank -> (host, pid)
        self.gid = gid  # the group's number, the same on every rank (new_group's order)
        self.seq = 0  # collectives started
        self.waiting = None  # the collective a wait is in (left set if it was interrupted)
        self.pending = weakref.WeakSet()  # async Works not waited for yet
        self.error = None
        self._seen = {}
        self._sends = []

    def rank(self):
        return self._rank

    def size(self):
        return self._size

    def name(self):
        return str(self.backend)

    def __repr__(self):
        return f"ProcessGroup(ranks={self._ranks}, backend={self.backend!r})"

    # ---- bookkeeping for the wait loop (ember.distributed._mpi.wait_all)
    def check(self):
        if self.error is not None:
            raise DistError(f"this process group can no longer be used after an earlier "
                            f"error: {self.error}")

    def next_seq(self):
        self.check()
        self.seq += 1
        return self.seq

    def fail(self, exc):
        self.error = exc
        self.waiting = None
        raise exc

    def label(self):
        return "the default group" if self is _state.world else f"group {self._ranks}"

    def describe(self, r):
        host, pid = self.info[r]
        return f"{self._ranks[r]} (pid {pid} on {host})"

    def dead_peers(self, peers):
        from ember.distributed._mpi import _alive
        me = self.info[self._rank][0]
        return [r for r in peers if r != self._rank and self.info[r][0] == me
                and not _alive(self.info[r][1])]

    def finished_through(self):
        """The last collective this rank finished, with every one before it: what its
        departure note tells the others."""
        open_ = [w._seq for w in self.pending if not w._done and w._seq is not None]
        if self.waiting is not None:
            open_.append(self.waiting)
        return min(open_) - 1 if open_ else self.seq

    def check_departures(self, peers, seq, what):
        """Raise when a rank of ``peers`` left without joining collective ``seq``."""
        left = _departures.left_before(self, peers, seq)
        if left:
            self.fail(DistError(_departures.departure_message(self, what, seq, left)))

    def announce(self, seq, what):
        # best effort: a note to a dead peer may fail, and the wait loop reports that
        # peer itself
        try:
            for r in range(self._size):
                if r != self._rank:
                    self._sends.append(self.ctrl.isend((seq, what), dest=r,
                                                       tag=_ANNOUNCE_TAG))
        except mpi().Exception:
            pass

    def drain_announcements(self):
        MPI = mpi()
        status = MPI.Status()
        try:
            while self.ctrl.Iprobe(source=MPI.ANY_SOURCE, tag=_ANNOUNCE_TAG, status=status):
                src = status.Get_source()
                seq, what = self.ctrl.recv(source=src, tag=_ANNOUNCE_TAG)
                if seq >= self._seen.get(src, (0, ""))[0]:
                    self._seen[src] = (seq, what)
            self._sends = [r for r in self._sends if not r.Test()]
        except MPI.Exception:
            pass

    def timeout_message(self, what, seq, peers):
        head = (f"{what} timed out after {self.timeout} on rank {self._ranks[self._rank]}"
                f" (pid {os.getpid()})")
        if seq is None:
            return (f"{head}: rank {', '.join(self.describe(r) for r in peers)} never "
                    "answered; the process group can no longer be used")
        self.drain_announcements()
        missing = [r for r in peers if r != self._rank and self._seen.get(r, (0,))[0] < seq]
        where = [f"rank {self._ranks[r]} is waiting in {self._seen[r][1]} "
                 f"(collective #{self._seen[r][0]})" for r in missing if r in self._seen]
        if not missing:
            missing_txt = "all ranks arrived but the collective did not finish"
        else:
            ranks = [self._ranks[r] for r in missing]
            missing_txt = (f"missing rank{'s' if len(ranks) > 1 else ''} {ranks} never "
                           f"reached it (collective #{seq} of this group)")
        tail = f"; {'; '.join(where)}" if where else ""
        return f"{head}: {missing_txt}{tail}; the process group can no longer be used"

    def wait(self, requests, what, seq=None, peers=None, deadline=None, statuses=None):
        if seq is not None:
            self.waiting = seq
        wait_all(self, requests, what, range(self._size) if peers is None else peers, seq,
                 deadline, statuses)
        self.waiting = None

    def free(self):
        for c in (self.comm, self.ctrl):
            try:
                c.Free()
            except Exception:  # noqa: BLE001 - a group broken by a dead rank may not free
                pass


class _GroupMember:
    """``GroupMember.WORLD`` is the default group; ``NON_GROUP_MEMBER`` is what
    ``new_group`` gives ranks outside the new group."""
    NON_GROUP_MEMBER = object()

    @property
    def WORLD(self):  # noqa: N802 - PyTorch's name
        return _state.world


GroupMember = _GroupMember()
group = GroupMember  # ``torch.distributed.group.WORLD``


class _State:
    world = None
    pid = None
    crashed = False
    reason = None  # why this rank leaves, when an uncaught exception ends it
    exit_hooked = False
    groups = []
    every_group = []  # every group this rank was in, freed or not (for the exit note)
    next_gid = 0


def _add_group(pg):
    _state.groups.append(pg)
    _state.every_group.append(pg)


def _new_gid():
    # every rank numbers the groups in the same order: creating one is collective
    _state.next_gid += 1
    return _state.next_gid


_state = _State()


def _default_group():
    if _state.world is None:
        raise ValueError("Default process group has not been initialized, please make sure "
                         "to call init_process_group.")
    return _state.world


def resolve(group):
    """The ProcessGroup to use, or None when this rank is not in ``group``."""
    pg = _default_group()
    if group is None or group is GroupMember.WORLD:
        return pg
    if group is GroupMember.NON_GROUP_MEMBER:
        return None
    if not isinstance(group, ProcessGroup):
        raise TypeError(f"expected a process group, got {type(group).__name__}")
    return group


def is_initialized():
    """Whether ``init_process_group`` has run (and ``destroy_process_group`` has not)."""
    return _state.world is not None


def is_torchelastic_launched():
    """True under ``ember.distributed.run`` (it sets ``TORCHELASTIC_RUN_ID`` as torchrun)."""
    return os.environ.get("TORCHELASTIC_RUN_ID") is not None


def get_node_local_rank(fallback_rank=None):
    """``LOCAL_RANK`` from the launcher's environment."""
    if "LOCAL_RANK" in os.environ:
        return int(os.environ["LOCAL_RANK"])
    if fallback_rank is not None:
        return int(fallback_rank)
    raise RuntimeError("LOCAL_RANK is not in the environment: start the program with "
                       "python -m ember.distributed.run")


def _at_exit():
    # MPI_Finalize waits for every rank; a rank that leaves first tells the others, who
    # may be waiting for it in a collective, and finalizes only when they all left
    # cleanly (see _departures)
    MPI = mpi()
    if os.getpid() != _state.pid:
        return  # a forked child (a DataLoader worker) must not finalize its parent's MPI
    if MPI.Is_finalized():
        _departures.tell_supervisor()
        return
    errors = [g.error for g in _state.every_group if g.error is not None]
    if _departures.active():
        if _state.crashed:
            reason = _state.reason or "crashed"
        elif errors:
            reason = f"exited after an error: {_first_line(errors[0])}"
        else:
            reason = "exited (sys.exit, or the end of its program)"
        _departures.leave(_state.every_group, not (_state.crashed or errors), reason)
        return
    if _state.crashed or errors:
        # mpi4py finalizes at exit too when the program imported it before ember did:
        # leave now, before that handler runs
        for f in (sys.stdout, sys.stderr):
            try:
                f.flush()
            except (OSError, ValueError):
                pass
        _departures.tell_supervisor()
        os._exit(1)
    MPI.Finalize()
    _departures.tell_supervisor()


def _hook_exit():
    if _state.exit_hooked:
        return
    _state.exit_hooked = True
    _state.pid = os.getpid()
    atexit.register(_at_exit)
    previous = sys.excepthook

    def hook(kind, value, tb):
        _state.crashed = True
        _state.reason = f"raised {kind.__name__}" + (f": {_first_line(value)}"
                                                      if str(value) else "")
        previous(kind, value, tb)
    sys.excepthook = hook


def _first_line(e):
    text = str(e).strip().splitlines()
    return text[0][:300] if text else type(e).__name__


def _exchange_info(comm, timeout):
    """Every rank's (host, pid), gathered without blocking past the timeout."""
    MPI = mpi()
    mine = np.zeros(72, np.uint8)
    host = socket.gethostname().encode()[:64]
    mine[:len(host)] = np.frombuffer(host, np.uint8)
    mine[64:] = np.frombuffer(np.int64(os.getpid()).tobytes(), np.uint8)
    everyone = np.empty((comm.Get_size(), 72), np.uint8)
    req = comm.Iallgather([mine, MPI.BYTE], [everyone, MPI.BYTE])
    deadline = time.monotonic() + timeout.total_seconds()
    while not req.Test():
        if time.monotonic() > deadline:
            # the exchange stays pending: MPI cannot cancel it, so this process must not
            # finalize MPI at exit
            _state.crashed = True
            raise DistTimeoutError(f"init_process_group timed out after {timeout} on rank "
                                   f"{comm.Get_rank()}: not all of the {comm.Get_size()} "
                                   "ranks called it")
        time.sleep(1e-3)
    return [(bytes(row[:64]).rstrip(b"\0").decode(), int(row[64:].view(np.int64)[0]))
            for row in everyone]


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1,
                       store=None, group_name="", pg_options=None, device_id=None):
    """Join the processes started by ``mpiexec`` (or ``python -m ember.distributed.run``).

    ``backend`` may be ``"mpi"``, ``"gloo"`` or ``"nccl"``: all run on MPI, and rank 0
    logs which one was asked for. ``init_method``, ``store`` and ``MASTER_ADDR`` /
    ``MASTER_PORT`` are not needed (MPI's launcher has already connected the processes);
    ``world_size`` and ``rank``, when given, must agree with MPI's.

    >>> import ember.distributed as dist
    >>> dist.init_process_group("gloo")          # doctest: +SKIP
    """
    if _state.world is not None:
        raise ValueError("trying to initialize the default process group twice!")
    name = Backend(backend if backend is not None else "mpi")
    if timeout is None:
        timeout = default_pg_timeout
    if not isinstance(timeout, timedelta):
        raise TypeError(f"Expected timeout argument to be of type datetime.timedelta, got "
                        f"{type(timeout).__name__}")
    if store is not None:
        raise NotImplementedError("init_process_group(store=...): ember's process groups "
                                  "come from MPI and need no store")
    # before MPI starts: under a bare mpiexec this process may stay behind as the rank's
    # supervisor, so that the others outlive its death long enough to report it
    _departures.supervise(timeout.total_seconds())
    # for ember.distributed.run's supervisor, which bounds MPI's start with it
    _departures.tell_supervisor(b"T%.3f;" % timeout.total_seconds())
    MPI = mpi()
    _departures.tell_supervisor(b"M")  # MPI started
    _hook_exit()
    world = MPI.COMM_WORLD
    size, me = world.Get_size(), world.Get_rank()
    if world_size not in (-1, None) and int(world_size) != size:
        if size == 1:
            raise RuntimeError(
                f"init_process_group(world_size={world_size}) in a process that MPI did not "
                f"start: ember.distributed runs on MPI, so start the {world_size} processes "
                f"with `{_launcher()} --nproc-per-node {world_size} {_program()}` or "
                f"`mpiexec -n {world_size} python {_program()}`")
        raise ValueError(f"init_process_group(world_size={world_size}) but MPI started "
                         f"{size} processes")
    if rank not in (-1, None) and int(rank) != me:
        raise ValueError(f"init_process_group(rank={rank}) but MPI gave this process rank "
                         f"{me}; ember's ranks are MPI's")
    # first a nonblocking exchange with the timeout: duplicating the communicator blocks
    # until every rank takes part, and a rank that never calls init would hang it
    info = _exchange_info(world, timeout)
    comm = world.Dup()
    comm.Set_errhandler(MPI.ERRORS_RETURN)
    _departures.setup(world, info)
    pg = ProcessGroup(comm, range(size), name, timeout, info, _new_gid())
    _state.world = pg
    _add_group(pg)
    if me == 0:
        version = " ".join(MPI.Get_library_version().splitlines()[0].split())
        level = logging.INFO if name == "mpi" else logging.WARNING
        log.log(level, "ember.distributed: backend %r runs on MPI (%s), %d processes",
                str(name), version, size)


def _launcher():
    from ember.distributed.run import _under_ember_alias
    if _under_ember_alias():
        return "python -m ember run -m torch.distributed.run"
    return "python -m ember.distributed.run"


def _program():
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "train.py"


def destroy_process_group(group=None):
    """Free ``group`` (by default every group, ending the distributed session)."""
    if group is None or group is GroupMember.WORLD:
        _default_group()  # raises when there is none, as PyTorch
        for g in _state.groups:
            if g.error is None:
                g.free()
        # broken groups are kept: at exit they tell _at_exit not to finalize MPI
        _state.groups = [g for g in _state.groups if g.error is not None]
        _state.world = None
        return
    if isinstance(group, ProcessGroup):
        group.free()
        if group in _state.groups and group.error is None:
            _state.groups.remove(group)


def get_rank(group=None):
    """This process's rank in ``group`` (the default group when None); -1 outside it."""
    pg = resolve(group)
    return -1 if pg is None else pg.rank()


def get_world_size(group=None):
    """The number of ranks in ``group``; -1 outside it."""
    pg = resolve(group)
    return -1 if pg is None else pg.size()


def get_backend(group=None):
    """The backend name given to ``init_process_group`` (``"mpi"``, ``"gloo"`` or
    ``"nccl"``). In ember every one of them runs on MPI (mpi4py and MPICH): the name is
    kept only so that programs written for PyTorch run unchanged."""
    pg = resolve(group)
    if pg is None:
        raise ValueError("Invalid process group specified")
    return pg.backend


def get_process_group_ranks(group):
    """The global ranks of ``group``'s members, in group-rank order."""
    pg = resolve(group)
    return list(pg._ranks)


def get_global_rank(group, group_rank):
    """The global rank of ``group_rank`` in ``group``."""
    pg = resolve(group)
    if not 0 <= group_rank < pg.size():
        raise ValueError(f"Group rank {group_rank} is not part of group {pg}")
    return pg._ranks[group_rank]


def get_group_rank(group, global_rank):
    """``global_rank``'s rank within ``group``."""
    pg = resolve(group)
    try:
        return pg._ranks.index(global_rank)
    except ValueError:
        raise ValueError(f"Global rank {global_rank} is not part of group {pg}") from None


def new_group(ranks=None, timeout=None, backend=None, pg_options=None,
              use_local_synchronization=False, group_desc=None, device_id=None):
    """A group of the given global ``ranks`` (all ranks when None). Every rank of the
    default group must call it, members or not, as in PyTorch; non-members get
    ``GroupMember.NON_GROUP_MEMBER``."""
    world = _default_group()
    world.check()
    ranks = sorted(range(world.size()) if ranks is None else {int(r) for r in ranks})
    for r in ranks:
        if not 0 <= r < world.size():
            raise ValueError(f"new_group: rank {r} is not in the default group of size "
                             f"{world.size()}")
    # MPI's communicator creation blocks; agreeing first (with the timeout) makes a rank
    # that never calls new_group, or calls it with other ranks, an error and not a hang
    from ember.distributed._collectives import agree
    agree(world, world.next_seq(), "new_group", np.uint8, tuple(ranks),
          detail=f"new_group(ranks={ranks})")
    comm = world.comm.Create(world.comm.Get_group().Incl(ranks))
    gid = _new_gid()
    if comm == mpi().COMM_NULL:
        return GroupMember.NON_GROUP_MEMBER
    pg = ProcessGroup(comm, ranks, Backend(backend) if backend else world.backend,
                      timeout or world.timeout, [world.info[r] for r in ranks], gid)
    _add_group(pg)
    return pg


def barrier(group=None, async_op=False, device_ids=None):
    """Wait until every rank of ``group`` has reached this call."""
    pg = resolve(group)
    if pg is None:
        return None
    seq = pg.next_seq()
    req = pg.comm.Ibarrier()
    work = Work(pg, [req], "barrier", seq)
    if async_op:
        return work
    work.wait()
    return None


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """A barrier whose timeout names the ranks that did not arrive (every barrier in
    ember does; ``timeout`` overrides the group's)."""
    pg = resolve(group)
    if pg is None:
        return None
    seq = pg.next_seq()
    req = pg.comm.Ibarrier()
    deadline = None
    if timeout is not None:
        deadline = time.monotonic() + timeout.total_seconds()
    pg.wait([req], "monitored_barrier", seq, deadline=deadline)


class Work:
    """The handle of an ``async_op=True`` call: ``wait()`` blocks until it is done (and
    its tensors hold the result), ``is_completed()`` asks without blocking."""

    def __init__(self, pg, requests, what, seq, finish=None, result=None, peers=None,
                 statuses=None):
        self._statuses = statuses
        self._pg = pg
        self._requests = requests
        self._what = what
        self._seq = seq
        self._finish = finish
        self._result = result
        self._peers = peers
        self._done = False
        if seq is not None and requests:
            pg.pending.add(self)

    def _complete(self):
        self._done = True
        self._requests = []
        if self._finish is not None:
            self._finish()
            self._finish = None

    def wait(self, timeout=None):
        """Block until the operation has finished; True, as PyTorch's."""
        if not self._done:
            deadline = None if timeout is None else time.monotonic() + (
                timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout))
            self._pg.wait(self._requests, self._what, self._seq, self._peers, deadline,
                          self._statuses)
            self._complete()
        return True

    def is_completed(self):
        """Whether the operation has finished (without blocking)."""
        if not self._done and mpi().Request.Testall([r for r in self._requests
                                                     if r is not None], self._statuses):
            self._complete()
        return self._done

    def is_success(self):
        return self.is_completed()

    def exception(self):
        return None

    def result(self):
        """The output tensors."""
        self.wait()
        return self._result if self._result is not None else []

    def synchronize(self):
        self.wait()

    def get_future(self):
        raise NotImplementedError("Work.get_future is not implemented in ember; call wait()")


def done_work(pg, result=None):
    """A Work that is already complete (for calls with nothing to communicate)."""
    w = Work(pg, [], "", None, result=result)
    w._done = True
    return w
