"""Which way a kernel ember may split runs at more than one thread, chosen at each site
from the wall time each way was measured to take there.

A kernel that :mod:`ember.backend.threads` may split has two or three routes that give
the same bits: in blocks on ember's pool, on BLAS's own threads (a product whose inner
dimension keeps its one-thread sums there, ``threads.same_bits_k``), or whole on the
calling thread at one BLAS thread. Which is fastest is not a property of the kernel
alone: a block handed to the pool gains only when the second core is free at that
moment (a core busy with another process, or with OpenBLAS's threads spinning after a
product of their own, runs the worker's block after the caller's: the split then costs
its dispatch and saves nothing), and waking an idle core of a virtual machine may cost
more than the block. Measured on a quiet 2-core machine, the MLP step's 128 x 784 x 256
product split over the pool took as long as whole at one thread while two bare threads
took 0.6 of it; on a loaded one every split lost. So each site (a product's shapes,
layout and dtype; a split kernel's code and size; a pair's two computations) tries its
routes in turn, a few calls each, interleaved, and then keeps the one whose median wall
time was least; it tries them again after a number of calls that doubles while the
choice stays the same (up to :data:`_MOST_STAY`), so a machine whose load changes is
followed. The routes give the same bits, so the choice changes only the time.

``threads._state["routes"]`` chooses how: ``"static"`` (the default: the fixed rules,
the pool's split wherever it may, else BLAS's threads where they may, else one thread),
``"measured"`` (as above: an option, not the default, because on a quiet 2-core machine
it read slower than the fixed rules, its trials of OpenBLAS's threads leaving them
spinning on the core the pool needs: docs/performance/threads.md, fifteenth pass), or
one route for every site where it is possible
(``"split"``, ``"blas"``, ``"one"``: for benchmarks alternating them in one process).
"""
import time

__all__ = ["SPLIT", "BLAS", "ONE", "site", "pick", "record", "either", "code", "clear",
           "choices", "now"]

# the routes (indices into a site's tuple of candidates are what a site keeps)
SPLIT = "split"  # blocks on ember's pool, BLAS at one thread in each
BLAS = "blas"  # whole, on BLAS's own threads
ONE = "one"  # whole on the calling thread, BLAS at one thread

# calls of each route a trial measures (the median is compared: one call that met a
# page fault, a new pool's calibration or a busy core does not decide)
_SAMPLES = 3
# a route whose one call took this many times another's fastest is measured enough
_HOPELESS = 4.0
# calls on the chosen route before the next trial: the first after a change of choice,
# doubled while the trials keep choosing the same route, up to the most
_FIRST_STAY = 32
_MOST_STAY = 2048
# sites kept at most (a model of ever-changing shapes starts over when past it)
_MOST_SITES = 4096

now = time.perf_counter  # the clock a trial's calls are timed with
_sites = {}


class Site:
    """One site's routes, the trial's wall times of each, and the route chosen (None
    while trying)."""

    __slots__ = ("routes", "times", "route", "last", "stay", "next_stay")

    def __init__(self, routes):
        self.routes = routes
        self.times = [[] for _ in routes]
        self.route = None
        self.last = None  # the route the previous trial chose
        self.stay = 0
        self.next_stay = _FIRST_STAY

    def __repr__(self):
        chosen = None if self.route is None else self.routes[self.route]
        times = {r: [round(t * 1e6) for t in ts] for r, ts in zip(self.routes, self.times)}
        return f"Site(chosen={chosen!r}, trial us={times})"


def site(key, routes):
    """The :class:`Site` kept for ``key`` (made with ``routes``, a tuple of route names,
    when new or when the routes possible there changed)."""
    s = _sites.get(key)
    if s is None or s.routes != routes:
        if len(_sites) >= _MOST_SITES:
            _sites.clear()
        s = _sites[key] = Site(routes)
    return s


def pick(s):
    """The index of the route ``s`` takes for this call: its choice, else (in a trial:
    ``s.route`` is None, and the caller times the call for :func:`record`) the route
    with the fewest calls measured so far of those still to measure."""
    if s.route is not None:
        s.stay -= 1
        if s.stay > 0:
            return s.route
        for t in s.times:
            t.clear()
        s.last, s.route = s.route, None
    times = s.times
    best, fewest = 0, None
    for i in range(len(times)):
        if (fewest is None or len(times[i]) < fewest) and not _measured(times, i):
            best, fewest = i, len(times[i])
    return best


def _measured(times, i):
    """Whether route ``i`` of a trial has its calls: :data:`_SAMPLES` of them, or one
    already :data:`_HOPELESS` times the fastest call of another route (OpenBLAS's threads
    on a core the scheduler gives elsewhere: tens of milliseconds for a product of a
    hundred microseconds; not tried twice more)."""
    t = times[i]
    if len(t) >= _SAMPLES:
        return True
    if not t:
        return False
    least = min((min(u) for j, u in enumerate(times) if j != i and u), default=None)
    return least is not None and min(t) > _HOPELESS * least


def record(s, i, seconds):
    """Count ``seconds`` of wall time for route ``i`` at ``s`` (in a trial); when every
    route has its calls, choose the one of least median."""
    times = s.times
    times[i].append(seconds)
    for j in range(len(times)):
        if not _measured(times, j):
            return
    medians = [sorted(t)[len(t) // 2] for t in times]
    best = medians.index(min(medians))
    if best == s.last:
        s.next_stay = min(2 * s.next_stay, _MOST_STAY)
    else:
        s.next_stay = _FIRST_STAY
    s.route = best
    s.stay = s.next_stay


_SPLIT_OR_ONE = (SPLIT, ONE)


def either(key, split, whole):
    """``split()`` or ``whole()``, as chosen at the site ``key`` between the pool's split
    and the whole kernel on the calling thread (timed in a trial); returns its result."""
    s = site(key, _SPLIT_OR_ONE)
    i = pick(s)
    if s.route is not None:
        return whole() if i else split()
    start = now()
    r = whole() if i else split()
    record(s, i, now() - start)
    return r


def code(fn):
    """What names a site's callable ``fn``: its code (the same for every closure made
    at one place), else its type."""
    return getattr(fn, "__code__", None) or type(fn)


def clear():
    """Forget every site's measurements (the next call at each tries its routes again)."""
    _sites.clear()


def choices():
    """``{key: route chosen or None}`` for the sites measured so far (for benchmarks
    and tests)."""
    return {k: (None if s.route is None else s.routes[s.route]) for k, s in _sites.items()}

