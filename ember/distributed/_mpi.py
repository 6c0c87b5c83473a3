"""The MPI underneath ``ember.distributed``: loading mpi4py lazily, and waiting on MPI
requests with a deadline, so that a missing or dead rank is an error and never a hang.

MPI's blocking calls cannot time out, so every collective here is started nonblocking
and then polled: spinning first (a small collective finishes in microseconds), then
sleeping in growing steps, so that several ranks sharing a few cores do not starve
each other. While it waits, a rank checks every 0.2 s that the ranks it waits for have
not left (their departure notes, see ``_departures``) and are alive (their process ids
on this host; see ``_alive``) and, past a grace period, tells the others which
collective it is in, so that a timeout can name the ranks that never arrived.
"""
import os
import time

_MPI = None

INSTALL_HINT = "pip install -e '.[distributed]'"  # mpi4py and the mpich wheel


def mpi():
    """The ``mpi4py.MPI`` module, imported on first use (importing it starts MPI)."""
    global _MPI
    if _MPI is None:
        try:
            import mpi4py
        except ImportError:
            raise ImportError(
                "ember.distributed runs on MPI through mpi4py, which is not installed: "
                f"{INSTALL_HINT} (installs mpi4py and the MPICH library)") from None
        # ember finalizes MPI itself at exit (see _pg._at_exit): after a rank died or a
        # collective timed out, MPI_Finalize would wait forever for the lost peer
        mpi4py.rc.finalize = False
        from mpi4py import MPI
        _MPI = MPI
    return _MPI


def available():
    """Whether mpi4py can be imported (without importing it, which would start MPI)."""
    import importlib.util
    return importlib.util.find_spec("mpi4py") is not None


class DistError(RuntimeError):
    """A collective failed: a rank is missing or dead, or the ranks disagree."""


class DistTimeoutError(DistError):
    """A collective or point-to-point call did not finish within the group's timeout."""


def _alive(pid):
    """Whether process ``pid`` on this host runs (a zombie, killed but not yet reaped,
    counts as dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in "ZX"
    except (OSError, IndexError):
        return True


SPIN_S = 0.2       # poll (yielding the core to others) this long before sleeping
MAX_SLEEP_S = 1e-3
CHECK_EVERY_S = 0.2  # how often a waiting rank looks for dead peers
GRACE_S = 0.5      # after this long a waiting rank announces which collective it is in


def wait_all(pg, requests, what, peers, seq=None, deadline=None, statuses=None):
    """Poll ``requests`` (MPI requests) until all complete.

    ``pg`` is the process group; ``what`` names the call for errors; ``peers`` are the
    group ranks being waited for; ``seq`` is the collective's number in the group (None
    for point-to-point calls). Raises DistError when a peer on this host dies and
    DistTimeoutError past the group's timeout, naming the ranks that never arrived.
    """
    MPI = mpi()
    testall = MPI.Request.Testall
    try:
        if testall(requests, statuses):
            return
    except MPI.Exception as e:
        pg.fail(DistError(f"{what} failed in MPI: {e.Get_error_string()}"))
    start = time.monotonic()
    if deadline is None:
        deadline = start + pg.timeout_s

    def test(reqs):
        try:
            return testall(reqs, statuses)
        except MPI.Exception as e:
            pg.fail(DistError(f"{what} failed in MPI: {e.Get_error_string()}"))

    announced = False
    next_check = start + CHECK_EVERY_S
    sleep = 1e-5
    while True:
        if test(requests):
            return
        now = time.monotonic()
        if now >= next_check:
            next_check = now + CHECK_EVERY_S
            # a rank that left says so (ember.distributed._departures); one that died
            # cannot, and is found by its process id
            pg.check_departures(peers, seq, what)
            dead = pg.dead_peers(peers)
            if dead:
                where = "" if seq is None else f" (collective #{seq} of {pg.label()})"
                pg.fail(DistError(f"{what}{where} cannot complete on rank "
                                  f"{pg._ranks[pg.rank()]}: rank"
                                  f"{'s' if len(dead) > 1 else ''} {_names(pg, dead)} died "
                                  "(process gone) while this rank waited for it; the "
                                  "process group can no longer be used"))
            if seq is not None:
                if not announced and now - start >= GRACE_S:
                    pg.announce(seq, what)
                    announced = True
                pg.drain_announcements()
        if now >= deadline:
            pg.fail(DistTimeoutError(pg.timeout_message(what, seq, peers)))
        if now - start < SPIN_S:
            # MPI's own blocking calls poll too; yielding lets ranks that share a core
            # with this one run
            os.sched_yield()
            continue
        time.sleep(sleep)
        sleep = min(sleep * 2, MAX_SLEEP_S)


def _names(pg, ranks):
    return ", ".join(pg.describe(r) for r in ranks)
