"""MKL's OpenMP runtime and ``fork`` with ``ember[mkl]``: how long Intel OpenMP's idle
workers spin after a product (:func:`quiet_workers`), and a fork that cannot copy MKL's
memory allocator in the middle of another thread's update (:func:`guard_fork`).

The binding itself (loading ``libmkl_rt``, the products) is :mod:`ember.backend.gemm`;
this module holds no MKL handle of its own: gemm tells it which one is loaded
(:func:`adopt`), so that nothing here imports gemm.
"""
import os
import sys

from ember.backend import threads as _threads

__all__ = ["intel_openmp", "quiet_workers", "follow_load", "guard_fork", "adopt",
           "WAIT_VARS", "BLOCKTIME_IDLE", "BLOCKTIME_LOADED"]

# Intel OpenMP's names, by platform (the runtime MKL's Intel layer links against)
_IOMP_NAMES = {"linux": ("libiomp5.so",), "darwin": ("libiomp5.dylib",),
               "win32": ("libiomp5md.dll",)}
# The environment variables by which a user chooses how Intel OpenMP's idle threads wait:
# where one is set, ember leaves the runtime's waiting as the user has it
WAIT_VARS = ("KMP_BLOCKTIME", "OMP_WAIT_POLICY", "KMP_LIBRARY")
# Intel OpenMP keeps its workers spinning for KMP_BLOCKTIME (200 ms by default) after
# each parallel region. ember calls MKL between its own Python work and the splits of its
# own pool: at 200 ms MKL's worker spun on the second core for the whole step (ember's
# CPU per step twice its wall time, its pool's worker waiting for that core). At 0 the
# worker sleeps as soon as a product ends, and each product wakes it through the kernel:
# on a quiet machine a training step of medium products (an MLP's 8-51 MFLOP layers)
# then paid a wake-up per product (two threads: 2.14 -> 3.48 ms per step), where 1 ms
# keeps the worker awake between the products of a step (2.07 ms) and lets it sleep
# between steps and through ember's own splits. On a machine other processes load, the
# spin takes the core from them and from ember's own threads: there 0 is faster (MLP
# 1.32x the time at 1 ms, load 4). So the block time follows the load, as ember's
# OpenBLAS routes do (``threads.cores_to_spare``): 1 ms with a core to spare, else 0.
# The block time decides how an idle worker waits, never how a product sums: the bits
# do not depend on it (tests/test_mkl_block_time.py). docs/performance/blas-mkl.md,
# "(fifteenth pass)" and "(sixteenth pass)". In KMP_BLOCKTIME's syntax
BLOCKTIME_IDLE = "1ms"
BLOCKTIME_LOADED = "0"

# the loaded ``gemm._Mkl`` (None: none, or forgotten by ``gemm._reset``)
_current = [None]
# which process-wide handlers are registered (each once per process)
_registered = {"refork": False, "guard": False}
# the block time ember last set: whether the machine had a core to spare then (None:
# not set by ember), and the runtime's ``kmp_set_defaults``
_follow = {"idle": None, "set": None}
# whether the machine has a core to spare now (a name of this module's, so that a test
# can choose the answer)
_spare = _threads.cores_to_spare


def adopt(mkl):
    """Tell this module which MKL handle is loaded (None: none any more)."""
    _current[0] = mkl or None


def intel_openmp(ctypes):
    """A handle of the Intel OpenMP runtime (``libiomp5``) already loaded in this
    process, or None (not loaded, or this platform cannot look it up without loading)."""
    noload = getattr(os, "RTLD_NOLOAD", None)
    if noload is None:
        return None
    for name in _IOMP_NAMES.get(sys.platform, ()):
        try:
            return ctypes.CDLL(name, mode=noload)
        except OSError:
            continue
    return None


def quiet_workers(ctypes):
    """Give the Intel OpenMP runtime that loading MKL brought into the process the block
    time that fits the machine's load now (see above) as its default for every thread
    (``kmp_set_defaults``, as if ``KMP_BLOCKTIME`` had been set: products called from any
    thread, not just this one, which is all ``kmp_set_blocktime`` reaches); each product
    then calls :func:`follow_load`. Nothing is changed where the user chose the waiting
    (:data:`WAIT_VARS`) or the runtime cannot be found. Returns the block time now in
    force (the runtime's whole milliseconds), or None where untouched."""
    if any(v in os.environ for v in WAIT_VARS):
        return None
    rt = intel_openmp(ctypes)
    try:
        set_defaults, get = rt.kmp_set_defaults, rt.kmp_get_blocktime
    except AttributeError:  # rt is None, or an OpenMP runtime without these entries
        return None
    set_defaults.argtypes = [ctypes.c_char_p]
    set_defaults.restype = None
    get.restype = ctypes.c_int
    _follow["set"], _follow["idle"] = set_defaults, None
    follow_load()
    if hasattr(os, "register_at_fork") and not _registered["refork"]:
        # a forked child's runtime starts over from the environment (its own fork
        # handler): a DataLoader worker's products would spin 200 ms again
        _registered["refork"] = True
        os.register_at_fork(after_in_child=_reapply)
    return get()


def follow_load():
    """Set the block time ember chose for the machine's load (1 ms with a core to spare,
    else 0) where the load has changed since the last product; called before each MKL
    product while ember sets the block time (a check of a cached reading, ~0.2 us)."""
    idle = _spare()
    if idle is not _follow["idle"]:
        _follow["idle"] = idle
        _follow["set"](_setting(idle))


def _setting(idle):
    return f"KMP_BLOCKTIME={BLOCKTIME_IDLE if idle else BLOCKTIME_LOADED}".encode()


def set_by_ember():
    """Whether ember set the block time of the runtime now in the process (a ``_reset``
    that forgot the handle keeps it: the runtime is still the one ember set)."""
    return _registered["refork"]


def _reapply():
    mkl = _current[0]
    if mkl is not None and mkl.blocktime is not None:  # (not after a user's setting)
        _follow["set"](_setting(_follow["idle"]))


# A fork while another thread is inside MKL's memory allocator copies the allocator's
# lock as held, and the child's first product spins on it forever
# (``mm_account_ptr_by_tid`` in ``mkl_serv_allocate``, every thread of the child). A
# Python thread that has run an MKL product and been joined is still ending (its
# per-thread cleanup gives its buffers back to MKL's pools) when ``join`` returns:
# forking right then hung the child in 4 of 300 forks at block time 0 and 24 of 300 at
# KMP_BLOCKTIME=7 (MKL 2026.2, two threads). ``mkl_free_buffers`` takes that lock to
# empty the pools: called just before each fork it waits for the other thread's update
# and leaves the pools empty, and 0 of 1,000 forks hung at block times 0 and 1 ms
# (tests/test_mkl_fork.py). The cost is the child's and the parent's next products
# allocating their buffers again (tens of microseconds, once per fork).


def guard_fork(lib):
    """Register, once per process, a handler that empties MKL's buffer pools just before
    ``os.fork`` (``mkl_free_buffers``, see above) while an MKL handle is loaded. ``lib``:
    the ctypes ``libmkl_rt`` (the pools are MKL's, whatever its threading layer)."""
    if _registered["guard"] or not hasattr(os, "register_at_fork"):
        return
    try:
        free = lib.mkl_free_buffers
    except AttributeError:
        return
    free.argtypes = []
    free.restype = None
    _registered["guard"] = True
    os.register_at_fork(before=lambda: _free_before_fork(free))


def _free_before_fork(free):
    if _current[0] is not None:
        free()
