"""The worker threads behind ember's intra-op splits (:mod:`ember.backend.threads`):
each worker fed by its own queue, the caller running the first block itself."""
import queue
import threading

import numpy as np

__all__ = ["Pool", "local"]

# per thread: ``in_worker`` is set on the pool's workers (and on a caller running a pair
# of computations), where kernels run unsplit
local = threading.local()


class Pool:
    """Worker threads, each fed by its own queue; the caller runs the first block
    itself and waits for the others. A C-level queue per worker keeps a dispatch to
    a few microseconds."""

    def __init__(self):
        self.workers = []  # (inbox, thread)
        self.done = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.broken = False  # a wait was interrupted: results may still arrive

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
            fn, lo, hi = inbox.get()
            try:
                fn(lo, hi)
                self.done.put(None)
            except BaseException as err:  # handed to the caller, raised there
                self.done.put(err)

    def run(self, fn, bounds):
        """``fn(lo, hi)`` for each consecutive pair of ``bounds``, in parallel."""
        self._grow(len(bounds) - 2)
        for (inbox, _), lo, hi in zip(self.workers, bounds[1:-1], bounds[2:]):
            inbox.put((fn, lo, hi))
        error = None
        try:
            fn(bounds[0], bounds[1])
        except BaseException as err:
            error = err
        try:
            for _ in range(len(bounds) - 2):  # wait for every block, even after an error
                e = self.done.get()
                if error is None and e is not None:
                    error = e
        except BaseException:  # e.g. KeyboardInterrupt: the next split gets a new pool
            self.broken = True
            raise
        if error is not None:
            raise error
