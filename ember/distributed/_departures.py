"""How a rank that leaves reaches the others, so that no rank waits for it in vain.

A rank leaves when its interpreter exits (``sys.exit``, the end of the program, an
uncaught exception) or when it dies (a signal, ``os._exit``). The others must then raise
within seconds, naming it and the collective it will never join, instead of waiting
out the process group's timeout.

- **Departure notes.** At exit (``atexit``) a rank sends every other rank a note on a
  communicator of its own (a duplicate of ``COMM_WORLD`` that outlives
  ``destroy_process_group``): why it leaves and, for each of its groups, the number of
  the last collective it finished. A rank waiting in collective ``#k`` of a group reads
  these notes every 0.2 s and raises when a rank it waits for left having finished
  fewer than ``k``.
- **No blocking ``MPI_Finalize`` that cannot return.** ``MPI_Finalize`` waits for every
  rank, and MPICH's launcher stops the whole job (without a word from the survivors)
  as soon as one process exits without it. So a leaving rank finalizes only once every
  other rank has left cleanly too; until then it stays, polling (which keeps its MPI
  requests moving). As soon as some rank failed (an error, a death) it waits at most
  ``LINGER_S`` for the others to leave, so that they can report the failure
  themselves, then exits without finalizing, and ``mpiexec`` stops whatever is left.
- **Deaths.** A rank killed by a signal sends no note: the others see its process
  gone (process ids on the same host are checked while waiting). Under a bare
  ``mpiexec`` the rank's process is MPICH launcher's own child, and the launcher
  kills every other rank the instant it sees one die, before they can say which rank
  they lost; so ``init_process_group`` forks there (see ``supervise``): the launcher's
  child stays as a small supervisor that waits for the rank, reports a death and keeps
  the job up for ``STAY_S`` seconds. ``ember.distributed.run`` has the same supervisor
  in ``_agent.py``.
"""
import os
import signal
import socket
import sys
import time

from ember.distributed._mpi import _alive, mpi

LEAVE_TAG = 7302
CHECK_EVERY_S = 0.2  # how often a waiting rank reads the notes (as _mpi.wait_all checks)
LINGER_S = 5.0       # after a failure, how long a leaving rank waits for the others
STAY_S = 5.0         # how long a dead rank's supervisor keeps the job up
P2P_GRACE_S = 1.0    # a message sent just before its sender left may still be arriving
SUPERVISED_ENV = "EMBER_DIST_SUPERVISED"
EXIT_FD_ENV = "EMBER_DIST_EXIT_FD"  # the pipe on which a rank tells its supervisor it left


class _Departures:
    comm = None  # COMM_WORLD's duplicate for the notes; lives until exit
    info = None  # world rank -> (host, pid)
    notes = {}   # world rank -> note (a dict, see _note)
    seen_at = {}  # world rank -> time.monotonic() when its note arrived here
    sends = []


_d = _Departures()


def setup(world_comm, info):
    """Called by ``init_process_group`` once every rank has joined (``Dup`` blocks)."""
    if _d.comm is None:
        _d.comm = world_comm.Dup()
        _d.comm.Set_errhandler(mpi().ERRORS_RETURN)
    _d.info = list(info)
    tell_supervisor(b"J")


def active():
    return _d.comm is not None


def poll():
    """Read the departure notes that have arrived (never blocks, never raises)."""
    if _d.comm is None:
        return
    MPI = mpi()
    status = MPI.Status()
    try:
        while _d.comm.Iprobe(source=MPI.ANY_SOURCE, tag=LEAVE_TAG, status=status):
            src = status.Get_source()
            _d.notes[src] = _d.comm.recv(source=src, tag=LEAVE_TAG)
            _d.seen_at.setdefault(src, time.monotonic())
        _d.sends = [r for r in _d.sends if not r.Test()]
    except MPI.Exception:
        pass


def _dead(world_rank):
    host, pid = _d.info[world_rank]
    return host == _d.info[_d.comm.Get_rank()][0] and not _alive(pid)


def left_before(pg, peers, seq):
    """The group ranks of ``peers`` that left without joining (or finishing) collective
    ``seq`` of ``pg`` (``seq`` None: a send or receive), with their notes."""
    poll()
    if not _d.notes:
        return []
    now = time.monotonic()
    out = []
    for r in peers:
        note = _d.notes.get(pg._ranks[r])
        if note is None or r == pg.rank():
            continue
        if seq is None:
            # point to point: the last message may still be arriving
            if now - _d.seen_at[pg._ranks[r]] >= P2P_GRACE_S:
                out.append((r, note))
            continue
        done = note["done"].get(pg.gid, 0)
        if done >= seq:
            continue  # it finished this collective: its part is on its way
        if note["started"].get(pg.gid, 0) >= seq and \
                now - _d.seen_at[pg._ranks[r]] < P2P_GRACE_S:
            continue  # it started this one without waiting for it (async_op)
        out.append((r, note))
    if seq is not None and any(n["started"].get(pg.gid, 0) < seq for _, n in out):
        # a rank that gave up on this very collective is a bystander: name the rank that
        # never came
        out = [(r, n) for r, n in out if n["started"].get(pg.gid, 0) < seq]
    return out


def departure_message(pg, what, seq, left):
    """The error for the ranks ``left`` (from ``left_before``)."""
    where = "" if seq is None else f" (collective #{seq} of {pg.label()})"
    parts = []
    for r, note in left:
        if seq is None:
            when = ""
        else:
            done = note["done"].get(pg.gid, 0)
            when = (f" during collective #{seq}" if note["started"].get(pg.gid, 0) >= seq
                    else f" after collective #{done}" if done else
                    " before its first collective")
        parts.append(f"rank {pg.describe(r)} left{when} and will never join it: it "
                     f"{note['reason']}")
    return (f"{what}{where} cannot complete on rank {pg._ranks[pg.rank()]}: "
            f"{'; '.join(parts)}; the process group can no longer be used")


def _note(groups, clean, reason):
    return {"reason": reason, "clean": clean,
            "done": {g.gid: g.finished_through() for g in groups},
            "started": {g.gid: g.seq for g in groups}}


def _flush():
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except (OSError, ValueError, AttributeError):
            pass


def leave(groups, clean, reason):
    """At exit: tell every rank this one leaves, wait as the module docstring says, then
    finalize MPI (every rank left cleanly) or exit without it (status 1)."""
    MPI = mpi()
    comm = _d.comm
    me, size = comm.Get_rank(), comm.Get_size()
    _flush()  # what this rank printed comes out before anyone stops the job
    try:
        note = _note(groups, clean, reason)
        _d.sends += [comm.isend(note, dest=r, tag=LEAVE_TAG) for r in range(size) if r != me]
    except MPI.Exception:
        clean = False
    others = [r for r in range(size) if r != me]
    deadline = None if clean else time.monotonic() + LINGER_S
    sleep = 1e-4
    while True:
        poll()
        gone = [r for r in others if r in _d.notes or _dead(r)]
        failed = [r for r in gone if not _d.notes.get(r, {}).get("clean", False)]
        if failed and deadline is None:
            deadline = time.monotonic() + LINGER_S
        if len(gone) == len(others) or (deadline is not None and
                                        time.monotonic() >= deadline):
            break
        time.sleep(sleep)
        sleep = min(sleep * 2, 0.01)
    if all(r in _d.notes for r in others):
        # every rank left through here (cleanly or not) and finalizes: the job ends
        # without mpiexec stopping anyone, and each process with its own exit status
        MPI.Finalize()
        tell_supervisor()
        return
    for _ in range(100):  # the notes to the others are out before this process goes
        poll()
        if not _d.sends:
            break
        time.sleep(0.01)
    _flush()
    tell_supervisor()
    # mpiexec stops the others when this process exits without finalizing: a moment for
    # it to pass on what they printed
    time.sleep(0.3)
    os._exit(1)


def tell_supervisor(what=b"L"):
    """Tell the supervisor (``supervise``, or ``_agent.py``) that this rank joined
    (``b"J"``) or left through ember's exit (``b"L"``): it then exits as soon as this
    process does, since the others know."""
    fd = os.environ.get(EXIT_FD_ENV)
    if fd:
        try:
            os.write(int(fd), what)
        except (OSError, ValueError):
            pass


# ---- the supervisor under a bare mpiexec

def supervise(timeout_s):
    """Under MPICH's ``mpiexec`` (and not already under a supervisor), fork before MPI
    starts: the child goes on as the rank; this process, ``mpiexec``'s child, waits for
    it and never returns. Skipped where forking is not safe: MPI already started by the
    program, other threads running, or ``EMBER_DIST_SUPERVISOR=0``.

    Starting MPI waits for every process of the job, and cannot time out: when one has
    exited without starting it, the supervisor stops the rank after ``timeout_s`` (the
    group's timeout) with an error instead of letting it hang."""
    import threading
    env = os.environ
    if (env.get("PMI_FD") is None or env.get("PMI_SIZE", "1") == "1" or
            env.get(SUPERVISED_ENV) or
            env.get("EMBER_DIST_SUPERVISOR", "1") == "0" or "mpi4py.MPI" in sys.modules or
            not hasattr(os, "fork") or threading.active_count() > 1):
        return
    _flush()
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read)
        env[SUPERVISED_ENV] = "1"
        env[EXIT_FD_ENV] = str(write)
        return
    os.close(write)
    _wait_child(child, env.get("PMI_RANK", "?"), read, timeout_s)


def _wait_child(child, rank, read, timeout_s):
    import select

    def forward(signum, frame):
        try:
            os.kill(child, signum)
        except ProcessLookupError:
            pass
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
              signal.SIGUSR2):
        signal.signal(s, forward)
    told = b""
    deadline = time.monotonic() + timeout_s
    status = None
    while b"M" not in told:  # MPI has not started yet: wait for it with the timeout
        pid, status = os.waitpid(child, os.WNOHANG)
        if pid:
            break
        left = deadline - time.monotonic()
        if left <= 0:
            _say(f"ember.distributed: init_process_group timed out after "
                 f"{_hms(timeout_s)} on rank {rank} (pid {child}): MPI did not start, "
                 "because not every process of the job started it (one exited, or has "
                 "not called init_process_group)")
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
            os._exit(1)
        if select.select([read], [], [], min(left, 0.2))[0]:
            more = os.read(read, 64)
            if not more:
                break  # the child closed the pipe: it is exiting
            told += more
        status = None
    while status is None:
        try:
            _, status = os.waitpid(child, 0)
        except ChildProcessError:
            os._exit(1)
    code = os.waitstatus_to_exitcode(status)
    os.set_blocking(read, False)
    try:
        told += os.read(read, 64)
    except OSError:
        pass
    if b"J" not in told or b"L" in told:
        os._exit(code)  # it never joined, or it left through ember's exit (they know)
    how = (f"was killed by {signal.Signals(-code).name}" if code < 0 else
           f"exited with status {code} without leaving the process group (os._exit?)")
    _say(f"ember.distributed: rank {rank} (pid {child} on {socket.gethostname()}) {how}")
    time.sleep(STAY_S)  # the others see the process gone and report it themselves
    os._exit(128 - code if code < 0 else code)


def _say(line):
    try:
        os.write(2, (line + "\n").encode())
    except (OSError, ValueError):
        pass


def _hms(seconds):
    from datetime import timedelta
    return str(timedelta(seconds=seconds))
