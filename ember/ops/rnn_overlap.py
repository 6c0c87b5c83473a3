"""Large products of a recurrent layer run beside its step loop on ember's second thread.

A padded LSTM's step loop (``ember.ops.rnn_lstm_padded``) is a chain of small NumPy calls
that one thread must run in order, each holding the GIL between calls for about as long
as its arithmetic takes: two threads splitting the loop itself would mostly wait for the
GIL (or for each other, every step). The layer's large products are another matter:
the input projection (whose chunks of rows the forward loop reads a few steps at a
time), the input's gradient ``dG @ w_ih`` (whose chunks of rows the backward loop
produces a few steps at a time) and the weight gradients. Each is one BLAS call that
runs without the GIL, so the second thread computes them while the loop runs: the
projection of the steps ahead of the loop, the input's gradient of the steps behind it.

:class:`Tasks` holds such work as a list of items, each done exactly once by whichever
thread claims it first: the loop claims an item when it needs its result (and waits
for the helper's when the helper claimed it), the helper (:func:`run_beside`, on
``threads.pair``'s worker) claims the items in order as their inputs become ready. When
``pair`` runs its two sides one after the other -- one thread, a busy machine, the pool
taken -- the loop's side runs first and claims every item itself, and the helper finds
none left. Each item computes the same rows with the same calls whichever thread runs
it, so the results are the same bits either way.
"""
import threading

from ember.backend import threads as _threads

__all__ = ["Tasks", "run_beside"]


class Tasks:
    """Items of work ``fn(k)`` for ``k`` in ``range(n)``, each run once by the first of
    two threads to claim it; item ``k`` may wait for an input (``ready[k]``, a
    ``threading.Event`` the loop sets, or None)."""
    __slots__ = ("fn", "claims", "done", "ready", "error", "stop")

    def __init__(self, fn, n, ready=None):
        self.fn = fn
        self.claims = [threading.Lock() for _ in range(n)]
        self.done = [threading.Event() for _ in range(n)]
        self.ready = ready or [None] * n
        self.error = None  # an exception raised by the helper's item, raised again by take
        self.stop = False  # set by the loop's side when it leaves (normally or raising)

    def take(self, k):
        """Item ``k``'s result in place: run it here when unclaimed, else wait for the
        helper's run (raising its exception, if it raised)."""
        if self.claims[k].acquire(False):
            self.fn(k)
            return
        self.done[k].wait()
        if self.error is not None:
            raise self.error

    def help(self):
        """The helper's side: every item in order that the loop has not claimed, each
        once its input is ready; returns when all are claimed or the loop has left."""
        for k, claim in enumerate(self.claims):
            ready = self.ready[k]
            if ready is not None:
                ready.wait()
            if self.stop:
                return
            if not claim.acquire(False):
                continue
            try:
                self.fn(k)
            except BaseException as err:
                self.error = err
                for d in self.done:  # (no item after this one is run by the helper)
                    d.set()
                return
            finally:
                self.done[k].set()

    def leave(self):
        """The loop's side is done (or raised): release a helper waiting for an input."""
        self.stop = True
        for r in self.ready:
            if r is not None:
                r.set()


def run_beside(loop, tasks, cost):
    """``loop()`` on this thread and ``tasks.help()`` on ember's second thread at once
    (``threads.pair``, given the helper's work ``cost``); one after the other where
    ``pair`` runs them so, the loop first. Returns ``loop()``'s result."""
    def first():
        try:
            return loop()
        finally:
            tasks.leave()
    return _threads.pair(first, tasks.help, cost)[0]
