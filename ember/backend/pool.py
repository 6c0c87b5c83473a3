"""The worker threads behind ember's intra-op splits (:mod:`ember.backend.threads`):
each worker fed by its own queue, the caller running the first block itself and then
any block no worker has started."""
import queue
import threading

import numpy as np

__all__ = ["Pool", "local"]

# per thread: ``in_worker`` is set on the pool's workers (and on a caller running a pair
# of computations), where kernels run unsplit
local = threading.local()


class _Block:
    """One block of a split: ``fn(lo, hi)``, taken by whichever thread first acquires
    ``claim`` (its worker, or the caller once done with its own); ``finished`` is held
    until a worker that took it has run it."""

    __slots__ = ("fn", "lo", "hi", "claim", "finished", "error")

    def __init__(self, fn, lo, hi):
        self.fn, self.lo, self.hi = fn, lo, hi
        self.claim = threading.Lock()
        self.finished = threading.Lock()
        self.finished.acquire()
        self.error = None


class Pool:
    """Worker threads, each fed by its own queue; the caller runs the first block
    itself, then takes back each block whose worker has not started it (last first),
    and waits for the others. A C-level queue per worker keeps a dispatch to a few
    microseconds.

    Taking a block back: a worker starts its block only once the scheduler runs it, which
    on a busy machine (every core taken by other processes) or on an idle core of a
    virtual machine (woken through the host) may be long after the caller has finished
    its own block; the caller then ran its block and waited, the split costing its whole
    kernel's time and more. Now the caller runs such a block itself at once: a split is
    never much slower than the kernel whole on one thread. A block is the same calls on
    whichever thread runs it, so the results do not change. ``steal``: False makes every
    worker run its own block (the tests that check where blocks run)."""

    steal = True

    def __init__(self):
        self.workers = []  # (inbox, thread)
        self.lock = threading.Lock()
        self.broken = False  # a wait was interrupted: results may still arrive
        self.taken_back = 0  # blocks the caller ran in place of a worker (benchmarks)

    def _grow(self, n):
        while len(self.workers) < n:
            inbox = queue.SimpleQueue()
            t = threading.Thread(target=self._work, args=(inbox,), daemon=True,
                                 name=f"ember-intraop-{len(self.workers)}")
            t.start()
            self.workers.append((inbox, t))

    def _work(self, inbox):
        local.in_worker = True
        # a new thread starts from NumPy's default error handling, not the one ember
        # sets on import: a block overflowing to inf must not warn where the whole
        # array computed on the calling thread would not
        np.seterr(divide="ignore", invalid="ignore", over="ignore", under="ignore")
        while True:
            block = inbox.get()
            if not block.claim.acquire(blocking=False):
                continue  # (the caller ran it)
            try:
                block.fn(block.lo, block.hi)
            except BaseException as err:  # handed to the caller, raised there
                block.error = err
            block.finished.release()

    def run_on(self, index, fn):
        """``fn()`` on worker ``index`` (which must exist), waited for: to look at a
        worker's own state (its BLAS's count where that is per thread)."""
        block = _Block(lambda lo, hi: fn(), 0, 0)
        self.workers[index][0].put(block)
        block.finished.acquire()
        if block.error is not None:
            raise block.error

    def run(self, fn, bounds):
        """``fn(lo, hi)`` for each consecutive pair of ``bounds``, in parallel."""
        self._grow(len(bounds) - 2)
        blocks = [_Block(fn, lo, hi) for lo, hi in zip(bounds[1:-1], bounds[2:])]
        for (inbox, _), block in zip(self.workers, blocks):
            inbox.put(block)
        error = None
        try:
            fn(bounds[0], bounds[1])
        except BaseException as err:
            error = err
        waits = []
        for block in reversed(blocks):  # (the last given out is the last a worker starts)
            if self.steal and block.claim.acquire(blocking=False):
                self.taken_back += 1
                if error is None:
                    try:
                        fn(block.lo, block.hi)
                    except BaseException as err:
                        error = err
            else:
                waits.append(block)
        try:
            for block in waits:  # wait for every block, even after an error
                block.finished.acquire()
                if error is None and block.error is not None:
                    error = block.error
        except BaseException:  # e.g. KeyboardInterrupt: the next split gets a new pool
            self.broken = True
            raise
        if error is not None:
            raise error
