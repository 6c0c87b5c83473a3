"""ember's intra-op threads: ``torch.set_num_threads``/``get_num_threads`` and the pool
that splits large array kernels across cores.

NumPy runs each elementwise, reduction or pooling kernel on one core; only its BLAS
uses more. ember's own kernels that dominate training steps (convolution over a batch,
pooling, ReLU, the optimizer updates, row-wise softmax and normalization, the large
elementwise ops, see :func:`binary` and :func:`unary`, and the large matrix products
themselves, see :mod:`ember.backend.thread_products`) are split here into independent row
blocks run by a small pool of Python threads: NumPy releases the GIL inside its loops,
so the blocks run on different cores at once. Two independent products (a layer's
input and weight gradients) run at once instead, each whole (:func:`pair`). Whether a
kernel is split, left to BLAS's threads or run whole is chosen at each site from the
wall time each way took there (:mod:`ember.backend.thread_routes`).

Results do not change with the thread count. A block is only ever a range of rows over
which the kernel is independent (an elementwise op, a per-sample or per-row
computation), and each block runs exactly the NumPy calls the whole array would, so
every value is bit-identical to the single-threaded result; reductions across the
split axis are never split; products are split in row blocks only on BLAS kernels where
the blocks keep the whole product's bits, at the kernel's grain of rows
(:func:`row_grain`). Products left to NumPy's BLAS keep its threads only where those
give its one-thread bits (:func:`same_bits_k`). MKL's products (``ember[mkl]``)
are MKL's, which, as in PyTorch, may change in the last bits with the thread count.

The thread count starts from ``OMP_NUM_THREADS`` (as PyTorch's does), else
``OPENBLAS_NUM_THREADS`` (so that a BLAS limited by its environment variable and ember
agree), else the cores this process may run on. ``set_num_threads`` also sets the
threads of NumPy's BLAS: through threadpoolctl when it is installed (``pip install -e
'.[fast]'``), else, for the OpenBLAS NumPy's wheels ship, through OpenBLAS's own
functions (:mod:`ember.backend.openblas`); a BLAS neither reaches keeps its
environment's count. MKL's products (``ember[mkl]``, :mod:`ember.backend.gemm`) always follow it.
"""
import contextlib
import os
import threading
import time

import numpy as np

from ember.backend import thread_routes as _routes

# what each OpenBLAS kernel was measured to keep (bits at several threads, row blocks,
# other layouts): see that module
from ember.backend.blas_kernels import COLUMN_GRAIN as _COLUMN_GRAIN
from ember.backend.blas_kernels import COPY_KEEPS_BITS as _COPY_KEEPS_BITS
from ember.backend.blas_kernels import LAYOUTS_KEEP_BITS as _LAYOUTS_KEEP_BITS
from ember.backend.blas_kernels import ROW_GRAIN as _ROW_GRAIN
from ember.backend.blas_kernels import SAME_BITS_K as _SAME_BITS_K
from ember.backend.blas_kernels import SMALL_KERNEL_MNK as _SMALL_KERNEL_MNK
from ember.backend.pool import Pool, local

# (``matmul``, ``WHOLE`` and ``blas_rows`` are read from here too: see __getattr__)
__all__ = ["get_num_threads", "set_num_threads", "parallel_rows", "blas_threads",
           "contiguous", "single_blas", "cores_to_spare", "add_blas", "remove_blas",
           "flat_blocks", "binary", "unary", "same_bits_k", "pair", "row_grain",
           "column_grain", "small_kernel_mnk", "row_blocks_keep_kernel",
           "row_blocks_keep_bits", "layouts_keep_bits", "copy_keeps_bits", "kernels_in",
           "blas_to_one", "blas_back", "blas_held", "scale_bounds"]


def _default_threads():
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        v = os.environ.get(var, "").split(",")[0].strip()
        if v.isdigit() and int(v) > 0:
            return int(v)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


# "pairs": whether :func:`pair` runs its two computations at once (a switch for
# benchmarks/two_threads_pairs_ab.py, which alternates the two ways in one process);
# "routes": how a kernel that may be split chooses its route (``thread_routes``)
_state = {"threads": _default_threads(), "blas": None, "pool_used": float("-inf"),
          "pairs": True, "held": 0, "scale": 1.0, "scale_pinned": False,
          "routes": "static"}
# whether more than one thread is set (kept by ``set_num_threads``): at one thread the
# elementwise kernels' size checks (:func:`binary`, :func:`unary`, :func:`add_into` and
# their callers) are skipped after this one module read, no size read at all
MANY = _state["threads"] > 1
_hold_lock = threading.Lock()  # (see blas_hold.hold_blas)


def get_num_threads():
    """The number of threads ember's kernels (and, where ember reaches it, its BLAS) use."""
    return _state["threads"]


def set_num_threads(n):
    """Use ``n`` threads for intra-op parallelism: ember's split kernels and NumPy's
    BLAS (through threadpoolctl, ``ember[fast]``, or OpenBLAS's own functions), so that
    the two agree.

    >>> import ember
    >>> ember.set_num_threads(1)
    >>> ember.get_num_threads()
    1
    """
    if isinstance(n, bool) or not isinstance(n, int):
        if hasattr(n, "__index__") and not isinstance(n, bool):
            n = n.__index__()
        else:
            raise RuntimeError(f"set_num_threads expects an int, but got {type(n).__name__}")
    if n <= 0:
        raise RuntimeError("set_num_threads expects a positive integer")
    global MANY
    _state["threads"] = n
    MANY = n > 1
    _set_blas_threads(n)


def _blas_libs():
    """Controllers of the BLAS libraries loaded (NumPy's OpenBLAS), found once:
    threadpoolctl's when it is installed, else ember's own for OpenBLAS
    (:mod:`ember.backend.openblas`); () when neither reaches NumPy's BLAS."""
    libs = _state.get("libs")
    if libs is None:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:  # NumPy alone: OpenBLAS's own functions through ctypes
            from ember.backend import openblas
            libs = openblas.find()
        else:
            from ember.backend import openblas
            libs = openblas.process_wide(
                ThreadpoolController().select(user_api="blas").lib_controllers)
        _state["libs"] = libs
    return libs


def _set_blas_threads(n):
    libs = _blas_libs()
    with _hold_lock:
        held = _state["held"]
        if held:  # (NumPy's OpenBLAS kept at one: its count is given at the hold's end)
            _state["held_saved"] = [(lib, n) for lib in libs if _openblas(lib)]
        for lib in libs:
            if not (held and _openblas(lib)):
                lib.set_num_threads(n)
    _state["blas"] = n if libs else None
    for lib in _own_blas:
        lib.set_num_threads(n)


# BLAS libraries ember loads itself (MKL, by ember.backend.gemm on its first product):
# controllers with threadpoolctl's ``num_threads``/``set_num_threads``, given ember's
# count whatever threadpoolctl finds
_own_blas = []


def add_blas(lib):
    """Have ``lib`` (with ``num_threads`` and ``set_num_threads(n)``) follow
    :func:`set_num_threads` and the one-thread sections below."""
    if lib not in _own_blas:
        _own_blas.append(lib)


def remove_blas(lib):
    """Undo :func:`add_blas`."""
    if lib in _own_blas:
        _own_blas.remove(lib)


def _all_blas():
    return _blas_libs() + tuple(_own_blas)


def refresh_blas():
    """Look up the BLAS libraries again after an import that may have loaded another
    (numba imports SciPy, which brings its own OpenBLAS), and give them ember's count."""
    if _state.get("libs") is None:  # not looked up yet: the first lookup finds them all
        return
    _state["libs"] = None
    if _state["blas"] is not None:
        _set_blas_threads(_state["blas"])


def blas_threads():
    """The BLAS thread count ember last set (None when it has not set one: no
    BLAS ember reaches, or ``set_num_threads`` never called)."""
    return _state["blas"]


_pool = [None]


# The least work for a split (per thread, for a pair, for a product, for an elementwise
# op) was chosen where the pool's round trip (a block handed to the worker and its end
# seen by the caller) took 16-30 us, and there four times those bounds gave the same
# step times. Where the round trip is longer -- a virtual machine whose idle vCPU is
# woken by the host, a Python whose GIL changes hands slowly -- a split of that size
# costs more than the second core saves (a 2-vCPU AMD EPYC VM: 30-115 us; its MLP step
# took 3.1 ms at two threads against 2.3 at one). So a new pool times its own round trip
# (the median of a few empty blocks back to back, about 1 ms once) and the bounds are
# scaled by its ratio to _REFERENCE_ROUND_TRIP (there: 4-8; of 1, 2, 4 and 8 times the
# bounds, 8 gave the shortest steps), up to _MAX_SCALE. Only when splits happen
# changes: a split's results are the whole kernel's bits either way. Measured:
# docs/performance/threads.md, "Two threads on a slow dispatch (ninth pass)".
_REFERENCE_ROUND_TRIP = 8e-6
_MAX_SCALE = 32.0
_CALIBRATION_TRIPS = 15
_NOMINAL = {"_SPLIT_MNK": 1 << 21, "_MIN_PAIR_COST": 1 << 20,
            "_MIN_COST_PER_THREAD": 1 << 16, "SPLIT_ELEMENTS": 1 << 18}


def _new_pool():
    """A new pool in ``_pool[0]``, with the bounds above scaled to its round trip."""
    pool = Pool()
    trips = []
    with pool.lock:  # (published first: another thread finds it taken, runs unsplit)
        _pool[0] = pool
        for _ in range(_CALIBRATION_TRIPS):
            start = time.perf_counter()
            pool.run(_nothing, (0, 0, 0))
            trips.append(time.perf_counter() - start)
    trips.sort()
    _state["round_trip"] = trip = trips[len(trips) // 2]
    if not _state["scale_pinned"]:
        _set_scale(trip / _REFERENCE_ROUND_TRIP)
    return pool


def _nothing(lo, hi):
    pass


def scale_bounds(scale=None):
    """Pin the least work for a split to ``scale`` times the nominal bounds (clamped to
    1-32; 1: the bounds as tuned on a fast dispatch), whatever the pool measures; None
    unpins (the next new pool's round trip decides). Returns the scale now in force."""
    if scale is None:
        _state["scale_pinned"] = False
        return _state["scale"]
    _state["scale_pinned"] = True
    return _set_scale(scale)


def _set_scale(scale):
    scale = min(max(float(scale), 1.0), _MAX_SCALE)
    g = globals()
    for name, nominal in _NOMINAL.items():
        g[name] = int(nominal * scale)
    _state["scale"] = scale
    return scale


def _reset_after_fork():
    # the child has only the forking thread: the workers must be made anew, and a BLAS
    # hold taken by another thread (blas_hold) will never be released there: its lock is
    # new and the counts it saved are given back
    global _hold_lock
    _pool[0] = None
    _routes.clear()  # (the child's cores are not the parent's: its routes measured anew)
    _hold_lock = threading.Lock()
    if _state["held"]:
        _state["held"] = 0
        blas_back(_state.pop("held_saved", ()))


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def parallel_rows(fn, rows, cost, xp=np, blas=False, most=None, site=None):
    """Call ``fn(lo, hi)`` over blocks of ``range(rows)`` that cover it, in parallel when
    the work (``cost``, about the number of element operations) is large enough to
    repay a dispatch and more than one thread is set; else ``fn(0, rows)`` once (always
    so for arrays of another module ``xp`` than NumPy: CuPy has its own parallelism).

    ``fn`` must write disjoint outputs per row block and compute each row the same way
    whatever the block, so that the result is independent of the split. With ``blas``
    (the blocks call matrix products), BLAS runs one thread per block while they run,
    as PyTorch's kernels inside a parallel region do: the cores are already busy, and
    BLAS threads woken for each of many small products only wait on each other. ``most``
    bounds the number of blocks.

    Whether a kernel large enough is split or run whole (at one BLAS thread with
    ``blas``) is chosen per site from the wall time each way took there
    (:mod:`ember.backend.thread_routes`); the site is ``fn``'s code, ``rows`` and
    ``cost``, or ``site`` in their place when given (False: split, the caller chose)."""
    n = min(most or _state["threads"], _state["threads"], rows,
            int(cost // _MIN_COST_PER_THREAD))
    if n < 2 or xp is not np or getattr(local, "in_worker", False):
        fn(0, rows)
        return
    pool = _pool[0]
    if pool is None or pool.broken:
        pool = _new_pool()
        n = min(most or _state["threads"], _state["threads"], rows,
                int(cost // _MIN_COST_PER_THREAD))
        if n < 2:  # (the pool's measured dispatch raised the least work per thread)
            fn(0, rows)
            return
    mode = _state["routes"]
    if site is False or mode == "static" or mode == "split":
        _split(pool, fn, rows, n, blas)
        return
    if mode != "measured":  # ("one", "blas": no split)
        _whole(fn, rows, blas)
        return
    _routes.either((_routes.code(fn) if site is None else site, rows, cost, blas),
                   lambda: _split(pool, fn, rows, n, blas), lambda: _whole(fn, rows, blas))


def _whole(fn, rows, blas):
    """``fn(0, rows)`` on the calling thread, at one BLAS thread with ``blas``."""
    if not blas:
        fn(0, rows)
        return
    saved = blas_to_one()
    try:
        fn(0, rows)
    finally:
        blas_back(saved)


def _split(pool, fn, rows, n, blas):
    """``fn`` over ``n`` blocks of ``range(rows)`` on ``pool`` (the caller runs the first),
    at one BLAS thread in each with ``blas``; whole on the caller when another thread
    holds the pool."""
    if not pool.lock.acquire(blocking=False):  # another thread holds the pool: no split
        fn(0, rows)
        return
    _state["pool_used"] = time.monotonic()
    if blas:
        fn = _one_blas_thread_on_workers(fn)
    try:
        step, extra = divmod(rows, n)
        bounds = [0]
        for i in range(n):
            bounds.append(bounds[-1] + step + (i < extra))
        saved = blas_to_one() if blas else ()
        try:
            pool.run(fn, bounds)
        finally:
            blas_back(saved)
    finally:
        pool.lock.release()


def _one_blas_thread_on_workers(fn):
    """``fn`` with BLAS at one thread also on the pool's workers: a BLAS whose count is
    per OS thread (MKL on GNU OpenMP, the layer it takes beside PyTorch) keeps its
    default there whatever the caller set. NumPy's OpenBLAS on its own threads (as its
    wheels build it) has one count for the process, set to one by the caller already:
    with no other library, ``fn`` itself (no call into the library on the worker, which
    would hand the GIL back and take it again while the caller's block starts)."""
    if not _own_blas and _process_wide(_blas_libs()):
        return fn

    def block(lo, hi):
        if not getattr(local, "in_worker", False):
            return fn(lo, hi)
        saved = blas_to_one()
        try:
            return fn(lo, hi)
        finally:
            blas_back(saved)
    return block


def _process_wide(libs):
    """Whether each of ``libs`` has one thread count for the process (ember's controller
    of an OpenBLAS on pthreads, :mod:`ember.backend.openblas`)."""
    known = _state.get("process_wide")
    if known is None or known[0] is not libs:
        from ember.backend import openblas
        known = _state["process_wide"] = (
            libs, all(isinstance(lib, openblas.OpenBLAS) for lib in libs))
    return known[1]


def pair(first, second, cost):
    """``(first(), second())``, two independent computations (a layer's input and weight
    gradients): ``second`` on a pool thread while the caller runs ``first``, when ember
    has more than one thread, the smaller one's work (``cost``, as in
    :func:`parallel_rows`) repays a dispatch, the machine has a core to spare
    (:func:`cores_to_spare`: on a busy one the caller, done with its side, waits for the
    scheduler to run the worker's) and the pool is free; else one after the other.
    Coarser than splitting each product in row blocks, where every block packs the
    whole other operand again.

    Inside, both run as at one thread: BLAS at one thread, and ember's kernels unsplit
    (their calls are the one-thread calls, so their results the one-thread bits).
    Whether they run at once or one after the other (each then routed as it would be
    alone) is chosen per site from the wall time each way took there
    (:mod:`ember.backend.thread_routes`; the site: the two callables' code and
    ``cost``)."""
    if cost < _MIN_PAIR_COST or not _state["pairs"] or _state["threads"] < 2 or \
            getattr(local, "in_worker", False) or not cores_to_spare():
        return first(), second()
    pool = _pool[0]
    if pool is None or pool.broken:
        pool = _new_pool()
        if cost < _MIN_PAIR_COST:  # (the pool's measured dispatch raised the bound)
            return first(), second()
    mode = _state["routes"]
    if mode == "measured":
        return _routes.either((_routes.code(first), _routes.code(second), cost),
                              lambda: _pair_on(pool, first, second),
                              lambda: (first(), second()))
    if mode != "static" and mode != "split":  # ("one", "blas": no pool)
        return first(), second()
    return _pair_on(pool, first, second)


def _pair_on(pool, first, second):
    """:func:`pair`'s two computations at once, ``second`` on ``pool``'s worker (one after
    the other when another thread holds the pool)."""
    if not pool.lock.acquire(blocking=False):  # another thread holds the pool
        return first(), second()
    _state["pool_used"] = time.monotonic()
    results = [None, None]

    def run(lo, hi):
        on_worker = getattr(local, "in_worker", False)
        if on_worker:
            # a BLAS whose count is per OS thread (MKL on GNU OpenMP, the layer it takes
            # beside PyTorch) is set to one here too: the caller's setting is its own
            results[1] = _one_blas_thread_on_workers(lambda lo, hi: second())(lo, hi)
            return
        local.in_worker = True  # the caller's kernels unsplit too: the pool is taken
        try:  # (``second`` too, when the caller takes it back from a worker not started)
            results[lo] = second() if lo else first()
        finally:
            local.in_worker = False
    try:
        saved = blas_to_one()
        try:
            pool.run(run, (0, 1, 2))
        finally:
            blas_back(saved)
    finally:
        pool.lock.release()
    return results[0], results[1]


# the least work of each of two computations for :func:`pair` to run them at once: a
# float32 product of m*n*k = 2^20 (about 15 microseconds at one thread here), several
# times what a dispatch costs the caller
_MIN_PAIR_COST = 1 << 20


# the least work worth a thread: about 30 microseconds of simple elementwise work, several
# times what a dispatch costs
_MIN_COST_PER_THREAD = 1 << 16


def contiguous(a, xp=np):
    """A C-ordered copy of ``a`` (a transposed or strided view) made in blocks of its
    first axis on the intra-op threads when large; ``a`` itself when already C-ordered."""
    if xp is not np or a.flags.c_contiguous or a.ndim == 0:
        return xp.ascontiguousarray(a)
    out = np.empty(a.shape, a.dtype)

    def block(lo, hi):
        out[lo:hi] = a[lo:hi]
    parallel_rows(block, a.shape[0], 2 * a.size)
    return out


# ----- is there a core to spare? -------------------------------------------------------
# OpenBLAS's threaded products synchronise by spinning: when other processes keep every
# core busy, each product waits for the scheduler to run BLAS's other thread (a 32-row
# product: 15 us on an idle machine, milliseconds on one loaded five deep; PyTorch's
# OpenMP products alike). So ember hands BLAS its threads for the products it does not
# split itself only while the load average leaves room for them, read at most once a
# second (a system call of a few microseconds).
_IDLE_CHECK_SECONDS = 1.0
_idle = {"next": 0.0, "idle": False}


def cores_to_spare():
    """True when the machine's 1-minute load average is below ember's thread count plus
    a half: ember's own busy threads (its caller and BLAS's) count up to that, so more
    means other processes compete for the cores. False where no load average exists."""
    now = time.monotonic()
    if now < _idle["next"]:
        return _idle["idle"]
    _idle["next"] = now + _IDLE_CHECK_SECONDS
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # no load average (Windows): keep to one thread
        load = float("inf")
    _idle["idle"] = load < _state["threads"] + 0.5
    return _idle["idle"]


@contextlib.contextmanager
def single_blas(steps=2):
    """BLAS at one thread inside the block (its count restored after), for loops of
    many small matrix products in sequence (a recurrent layer's ``steps``): OpenBLAS
    would wake its threads for each, and they spend longer waiting on each other than the
    product takes. Nothing to do when ember cannot reach the BLAS, it has one thread, or
    there is one step (a cell: switching BLAS's threads costs more than the product)."""
    if steps < 2 or _state["threads"] < 2 and _state["blas"] is not None:
        yield
        return
    saved = blas_to_one()
    try:
        yield
    finally:
        blas_back(saved)


def blas_to_one():
    """:func:`single_blas`'s entry as a call, for one product (no generator and context
    manager around a 10-us call): every BLAS library with more than one thread set to
    one; returns what :func:`blas_back` restores. Under ``blas_hold.hold_blas`` NumPy's
    OpenBLAS is at one thread already and is not looked at."""
    saved = []
    for lib in (_not_held() if _state["held"] else _all_blas()):
        k = lib.num_threads
        if k > 1:
            lib.set_num_threads(1)
            saved.append((lib, k))
    return saved


def _not_held():
    """The libraries :func:`blas_to_one` still sets under a hold (``blas_hold`` holds
    NumPy's OpenBLAS only)."""
    libs = _state.get("not_held")
    if libs is None or libs[0] is not _state.get("libs"):
        libs = _state["not_held"] = (_state.get("libs"), [
            lib for lib in _blas_libs() if not _openblas(lib)])
    return libs[1] + _own_blas


def _openblas(lib):
    """Whether ``lib`` (a controller) is an OpenBLAS: the library a hold sets."""
    return getattr(lib, "internal_api", "openblas") == "openblas"


def blas_back(saved):
    """Give the libraries :func:`blas_to_one` set to one thread their counts back."""
    for lib, k in saved:
        lib.set_num_threads(k)


def blas_held():
    """Whether ember's products run as at one thread without touching BLAS: one ember
    thread, or BLAS held at one (``blas_hold.hold_blas``)."""
    return _state["threads"] < 2 or _state["held"] > 0


# ----- matrix products ---------------------------------------------------------------
# How products are routed at more than one thread (ember's row or column blocks, BLAS's
# own threads, one BLAS thread) is :mod:`ember.backend.thread_products`; the bounds it
# reads are here, beside the others :func:`scale_bounds` sets.
_SPLIT_MNK = 1 << 21  # m*n*k from which a product is split over the pool
_MIN_BLOCK_ROWS = 32  # rows per block, and columns, below which BLAS takes other paths
_BLAS_THREADED_MNK = 1 << 18  # OpenBLAS runs one thread below this m*n*k by itself
# how long after ember's pool last split a kernel its work counts as under way: BLAS's
# threads, spinning after each threaded product, would take the core from its worker
_POOL_QUIET_SECONDS = 0.1


def same_bits_k(char):
    """The longest inner dimension for which NumPy's BLAS at several threads gives its
    one-thread results, for the dtype ``char`` ("f" or "d"); 0 where unknown (no OpenBLAS
    reached, or one whose kernel was not measured). NumPy's products run on OpenBLAS;
    other BLAS libraries in the process (MKL's products are ember's own calls) do not
    count."""
    return _per_kernel("same_bits_k", _SAME_BITS_K, char)


def _common(figures):
    """One figure every kernel shares, else 0 (two grains of rows: neither is safe)."""
    return figures[0] if all(f == figures[0] for f in figures) else 0


def _per_kernel(key, table, char, combine=min):
    """``table``'s figure for the dtype ``char`` common to every OpenBLAS kernel NumPy's
    products reach (by default the least of theirs; its answer kept under ``key`` until
    the libraries change); 0 where none is known."""
    known = _state.get(key)
    if known is not None and known[0] is _state.get("libs") is not None:
        return known[1].get(char, 0)  # (read per product: the common case first)
    libs = _blas_libs()
    if known is None or known[0] is not libs:
        cores = [_core_name(lib) for lib in libs
                 if getattr(lib, "internal_api", "openblas") == "openblas"]
        figures = [table.get(core, {}) for core in cores]
        known = _state[key] = (libs, {
            c: combine([f.get(c, 0) for f in figures]) if figures else 0 for c in "fd"})
    return known[1].get(char, 0)


def row_grain(char):
    """The multiple of rows at which row blocks of a product on NumPy's BLAS keep the
    whole product's bits, for the dtype ``char`` ("f" or "d"); 0 where they do not or
    where unknown (see above)."""
    return _per_kernel("row_grain", _ROW_GRAIN, char, _common)


def column_grain(char):
    """The multiple of columns at which column blocks of a product on NumPy's BLAS keep
    the whole product's bits (each block on the whole product's kernel), for the dtype
    ``char``; 0 where they do not or where unknown (see above)."""
    return _per_kernel("column_grain", _COLUMN_GRAIN, char, _common)


def small_kernel_mnk(char):
    """The most multiply-adds (``m*n*k``) of a product that NumPy's OpenBLAS runs on its
    small-matrix kernel, for the dtype ``char``, where that kernel's sums differ from its
    blocked kernel's (the largest over the kernels reached); 0 where none is listed."""
    return _per_kernel("small_kernel_mnk", _SMALL_KERNEL_MNK, char, max)


def row_blocks_keep_kernel(char, whole, block, plain=False):
    """Whether a row block of ``block`` multiply-adds of a product of ``whole`` runs on the
    same one of OpenBLAS's kernels as the whole product: both past the small-matrix
    kernel's size (:func:`small_kernel_mnk`), or, for a ``plain`` product (row-major,
    neither operand transposed, which that kernel takes at any shape within its size),
    both within it. Row blocks at :func:`row_grain` keep the whole's bits only then."""
    least = small_kernel_mnk(char)
    return not least or block > least or plain and whole <= least


def row_blocks_keep_bits():
    """Whether row blocks of a float32 product on NumPy's BLAS (at the rows
    :func:`row_grain` gives) keep the whole product's bits; False where unknown."""
    return row_grain("f") > 0


def kernels_in(key, kernels):
    """Whether every OpenBLAS kernel NumPy's products reach is one of ``kernels`` (its
    answer kept under ``key`` until the libraries change); False where none is known."""
    known = _state.get(key)
    if known is not None and known[0] is _state.get("libs") is not None:
        return known[1]  # (read per small product: the common case first)
    libs = _blas_libs()
    if known is None or known[0] is not libs:
        cores = [_core_name(lib) for lib in libs
                 if getattr(lib, "internal_api", "openblas") == "openblas"]
        known = _state[key] = (libs, bool(cores) and all(c in kernels for c in cores))
    return known[1]


def layouts_keep_bits():
    """Whether a float32 product on NumPy's BLAS keeps ``np.matmul``'s bits when computed
    as its transposed product or in row blocks (its OpenBLAS kernel measured so, see
    above); False where unknown."""
    return kernels_in("layouts", _LAYOUTS_KEEP_BITS)


def copy_keeps_bits():
    """Whether ``x @ w.T`` on a row-major copy of ``w.T`` keeps the bits of the product on
    the transposed weight in ``matmul_graph``'s range (see above); False where unknown."""
    return kernels_in("copies", _COPY_KEEPS_BITS)


def _core_name(lib):
    """OpenBLAS's name of the kernel set it runs (``openblas_get_corename``), lowercased;
    None when it does not say."""
    name = getattr(lib, "architecture", None)
    return name.lower() if isinstance(name, str) else None


# the product routing's public names, from the module they live in (imported on first
# use: that module reads this one's state and bounds)
_PRODUCT_NAMES = frozenset({"matmul", "WHOLE", "blas_rows", "_gram", "_batched",
                            "_blas_may_thread", "_split_direction"})


def __getattr__(name):
    if name in _PRODUCT_NAMES:
        from ember.backend import thread_products
        return getattr(thread_products, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ----- elementwise kernels ----------------------------------------------------------
# A large elementwise op is split into blocks of its flat elements (or, against a
# broadcast operand, of its first axis). Each block runs the same NumPy ufunc on its
# slice, so each element is computed by the same code as in the whole array: blocks
# start at multiples of _GRAIN elements, which keeps the alignment and the SIMD lanes
# of NumPy's vector loops (the transcendental functions' included) where the whole
# array has them, and the last block ends where the whole array does.
_GRAIN = 4096
# elements from which an elementwise op is split: below, a dispatch (a few microseconds
# on an idle machine, tens where the second core is shared with other jobs) costs more
# than the second core saves (measured: docs/performance/threads.md, "Two threads:
# elementwise kernels split")
SPLIT_ELEMENTS = 1 << 18


def unsplit_float(a):
    """Whether ``a`` is a real floating NumPy array that the elementwise kernels run as
    one NumPy call (below ``SPLIT_ELEMENTS``, or ember at one thread): where a gradient
    formula may run on arrays and make the same call as its Tensor op."""
    return type(a) is np.ndarray and a.dtype.kind == "f" and \
        not (MANY and a.size >= SPLIT_ELEMENTS)


_SPLIT_KINDS = "efd"  # floating dtypes: each element computed alone, whatever the block


def flat_blocks(fn, size, cost=None, site=None):
    """``fn(lo, hi)`` over ranges of ``range(size)`` (flat element offsets), in
    parallel when large; the ranges start at multiples of a fixed grain, so that a
    vector loop over each block sees the same lanes as one over the whole array. The
    route is measured per ``site`` (default: ``fn``'s code; see ``parallel_rows``)."""
    grains = -(-size // _GRAIN)

    def run(lo, hi):
        fn(lo * _GRAIN, min(hi * _GRAIN, size))
    parallel_rows(run, grains, size if cost is None else cost,
                  site=_routes.code(fn) if site is None else site)


def _splits(size):
    return size >= SPLIT_ELEMENTS and _state["threads"] > 1 and \
        not getattr(local, "in_worker", False)


def binary(ufunc, a, b):
    """``ufunc(a, b)`` for two NumPy arrays of one floating dtype, split over the pool
    when large: both of one shape and C-ordered (in flat blocks), or one C-ordered of
    the result's shape against a broadcast C-ordered other (in blocks of the first
    axis). None when not split (small, one thread, other layouts): the caller computes
    it. The result is C-ordered, as NumPy's own is for such operands."""
    size = max(a.size, b.size)
    c = a.dtype.char
    if type(a) is not np.ndarray or type(b) is not np.ndarray or not _splits(size) or \
            c not in _SPLIT_KINDS or a.dtype != b.dtype or f"{c}{c}->{c}" not in ufunc.types:
        return None
    if a.shape == b.shape:
        if not (a.flags.c_contiguous and b.flags.c_contiguous):
            return None
        out = np.empty(a.shape, a.dtype)
        af, bf, of = a.reshape(-1), b.reshape(-1), out.reshape(-1)

        def block(lo, hi):
            ufunc(af[lo:hi], bf[lo:hi], out=of[lo:hi])
        flat_blocks(block, size, site=ufunc)  # (each ufunc its own site: not one cost)
        return out
    big, small = (a, b) if a.size >= b.size else (b, a)
    if big.ndim < 2 or not (big.flags.c_contiguous and small.flags.c_contiguous) or \
            small.ndim > big.ndim or \
            any(s not in (1, n) for s, n in zip(small.shape[::-1], big.shape[::-1])):
        return None  # (shapes that do not broadcast: NumPy's call raises its error)
    out = np.empty(big.shape, big.dtype)
    rows = big.shape[0]
    # the broadcast operand is cut with the rows only when it has them itself
    cut = small.ndim == big.ndim and small.shape[0] == rows

    def block(lo, hi):
        s = small[lo:hi] if cut else small
        if big is a:
            ufunc(a[lo:hi], s, out=out[lo:hi])
        else:
            ufunc(s, b[lo:hi], out=out[lo:hi])
    parallel_rows(block, rows, size, site=ufunc)
    return out


def unary(ufunc, x):
    """``ufunc(x)`` for a large C-ordered floating NumPy array (a loop of ``ufunc``
    keeping its dtype), in flat blocks over the pool; None when not split (the caller
    computes it: small, one thread, another layout, dtype or array module)."""
    c = x.dtype.char
    if type(x) is not np.ndarray or not _splits(x.size) or c not in _SPLIT_KINDS or \
            not x.flags.c_contiguous or \
            f"{c}->{c}" not in ufunc.types:  # (a loop keeping the dtype)
        return None
    out = np.empty(x.shape, x.dtype)
    xf, of = x.reshape(-1), out.reshape(-1)

    def block(lo, hi):
        ufunc(xf[lo:hi], out=of[lo:hi])
    flat_blocks(block, x.size, site=ufunc)
    return out


def add_into(a, b):
    """``np.add(a, b, out=a)`` for two NumPy arrays of one shape and floating dtype
    (a gradient summed into a buffer), in flat blocks over the pool when large and
    both are C-ordered; else in one call."""
    if type(a) is np.ndarray and type(b) is np.ndarray and _splits(a.size) and \
            a.dtype == b.dtype and a.dtype.char in _SPLIT_KINDS and a.shape == b.shape and \
            a.flags.c_contiguous and b.flags.c_contiguous:
        af, bf = a.reshape(-1), b.reshape(-1)

        def block(lo, hi):
            np.add(af[lo:hi], bf[lo:hi], out=af[lo:hi])
        flat_blocks(block, a.size)
        return
    np.add(a, b, out=a)
