"""The pool's caller takes back a block whose worker has not started it (``Pool.steal``):
each block runs once, on whichever thread claimed it, with the same results."""
import threading

import numpy as np
import pytest

import ember
from ember.backend import pool as P
from ember.backend import threads as T


@pytest.fixture
def pool(monkeypatch):
    monkeypatch.setattr(P.Pool, "steal", True)  # (conftest turns it off for the others)
    p = P.Pool()
    p._grow(1)
    yield p


def _busy(pool):
    """Keep ``pool``'s worker busy until the returned event is set (2 s at most: a pool
    that never takes a block back fails the test instead of hanging)."""
    release, started = threading.Event(), threading.Event()

    def hold():
        started.set()
        release.wait(2.0)
    pool.workers[0][0].put(P._Block(lambda lo, hi: hold(), 0, 0)
                           if hasattr(P, "_Block") else (lambda lo, hi: hold(), 0, 0))
    assert started.wait(5.0)
    return release


def test_a_block_whose_worker_is_busy_runs_on_the_caller(pool):
    release = _busy(pool)
    ran = []
    try:
        pool.run(lambda lo, hi: ran.append((lo, hi, threading.current_thread())), (0, 3, 5))
    finally:
        release.set()
    me = threading.current_thread()
    assert ran == [(0, 3, me), (3, 5, me)]
    assert pool.taken_back == 1
    # the worker, free again, skips the block taken from it and runs the next split's
    pool.steal = False
    again = []
    pool.run(lambda lo, hi: again.append((lo, threading.current_thread())), (0, 1, 2))
    assert sorted(lo for lo, _ in again) == [0, 1]
    assert [t for lo, t in again if lo == 1][0].name.startswith("ember-intraop")
    assert len(ran) == 2


def test_an_error_in_a_block_taken_back_reaches_the_caller(pool):
    release = _busy(pool)

    def fn(lo, hi):
        if lo:
            raise ValueError("block 1")
    try:
        with pytest.raises(ValueError, match="block 1"):
            pool.run(fn, (0, 1, 2))
    finally:
        release.set()
    pool.run(lambda lo, hi: None, (0, 1, 2))  # (the pool still works)


def test_taken_back_blocks_give_the_split_product_bits(monkeypatch):
    """A split product whose worker never starts its block (taken back every time) has
    the whole product's bits, as when the worker runs it."""
    monkeypatch.setattr(P.Pool, "steal", True)
    ember.set_num_threads(2)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((128, 784), dtype=np.float32)
    b = rng.standard_normal((784, 256), dtype=np.float32)
    T.parallel_rows(lambda lo, hi: None, 2, 1 << 20)  # (the pool made and calibrated)
    pool = T._pool[0]
    monkeypatch.setitem(T._state, "routes", "split")
    release = _busy(pool)
    try:
        before = pool.taken_back
        got = T.matmul(a, b, whole=lambda: np.matmul(a, b))
    finally:
        release.set()
    # (a kernel whose blocks were not measured to keep the bits runs it whole)
    assert pool.taken_back == before + (T.row_grain("f") > 0)
    saved = T.blas_to_one()
    try:
        want = np.matmul(a, b)
    finally:
        T.blas_back(saved)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_a_pair_whose_second_is_taken_back_runs_it_unsplit_on_the_caller(monkeypatch):
    monkeypatch.setattr(P.Pool, "steal", True)
    monkeypatch.setattr(T, "cores_to_spare", lambda: True)
    monkeypatch.setitem(T._state, "routes", "static")
    ember.set_num_threads(2)
    T.parallel_rows(lambda lo, hi: None, 2, 1 << 20)
    release = _busy(T._pool[0])
    seen = []

    def side(key):
        def run():
            seen.append((key, threading.current_thread(), getattr(T.local, "in_worker", False)))
            return key
        return run
    try:
        assert T.pair(side("a"), side("b"), T._MIN_PAIR_COST) == ("a", "b")
    finally:
        release.set()
    me = threading.current_thread()
    assert seen == [("a", me, True), ("b", me, True)]
    assert not getattr(T.local, "in_worker", False)
