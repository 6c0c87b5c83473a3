"""The blocks ember's pool runs, recorded: shared by the tests of the split products."""
import ember
from ember.backend import threads as T


def record_blocks(monkeypatch):
    """Patch the pool so that every split it runs appends its bounds to the list returned
    (the new pool's timed round trips, which run ``T._nothing``, are not recorded)."""
    seen = []
    run = T.Pool.run

    def recording(self, fn, bounds):
        if fn is not T._nothing:
            seen.append(list(bounds))
        return run(self, fn, bounds)
    monkeypatch.setattr(T.Pool, "run", recording)
    return seen


def at_one_and_two_threads(seen):
    """``both(fn) -> (fn() at one thread, fn() at two, the blocks the two-thread call
    split into)``, with ``seen`` from :func:`record_blocks`."""
    def both(fn):
        ember.set_num_threads(1)
        one = fn()
        ember.set_num_threads(2)
        seen.clear()
        two = fn()
        return one, two, list(seen)
    return both
