"""Each split site's route chosen from measured wall times (``thread_routes``): the trial,
the choice, its renewal, and the split sites (``parallel_rows``, ``pair``, products)
taking the chosen route with the same bits whichever it is. Times come from a fake
clock that each route advances by a set amount, so the choices are deterministic."""
import ast

import numpy as np
import pytest
from pool_blocks import record_blocks

import ember
from ember.backend import thread_products
from ember.backend import thread_routes as R
from ember.backend import threads as T


@pytest.fixture
def measured(monkeypatch):
    """Routes measured (conftest pins the fixed rules), the sites forgotten before and
    after, two threads, a core to spare; yields the fake clock's list of costs."""
    costs = []
    monkeypatch.setitem(T._state, "routes", "measured")
    monkeypatch.setattr(R, "now", lambda: sum(costs))
    monkeypatch.setattr(T, "cores_to_spare", lambda: True)
    ember.set_num_threads(2)
    T.parallel_rows(lambda lo, hi: None, 2, 1 << 20, site=False)  # (the pool made)
    R.clear()
    yield costs
    R.clear()


def test_a_site_tries_each_route_in_turn_then_keeps_the_least_median():
    s = R.Site(("split", "one"))
    order = []
    for t in (3.0, 1.0, 3.5, 2.0, 2.5, 1.5):  # split: 3, 3.5, 2.5 (median 3); one: 1, 2, 1.5
        assert s.route is None
        i = R.pick(s)
        order.append(i)
        R.record(s, i, t)
    assert order == [0, 1, 0, 1, 0, 1]
    assert s.routes[s.route] == "one" and s.stay == R._FIRST_STAY
    for _ in range(R._FIRST_STAY - 1):
        assert R.pick(s) == 1 and s.route == 1
    assert R.pick(s) == 0 and s.route is None  # the next trial
    for t in (3.0, 1.0) * R._SAMPLES:
        R.record(s, R.pick(s), t)
    assert s.routes[s.route] == "one" and s.stay == 2 * R._FIRST_STAY  # the same: longer
    for _ in range(s.stay - 1):
        R.pick(s)
    for t in (1.0, 3.0) * R._SAMPLES:
        R.record(s, R.pick(s), t)
    assert s.routes[s.route] == "split" and s.stay == R._FIRST_STAY  # changed: short again


def test_a_route_many_times_slower_is_not_tried_again_in_the_trial():
    s = R.Site(("split", "blas", "one"))
    for t in (1.2, 40.0, 1.0, 1.3, 0.9, 1.1, 1.0):  # blas: once, hopeless
        i = R.pick(s)
        assert s.route is None and (i != 1 or t == 40.0)
        R.record(s, i, t)
    assert s.routes[s.route] == "one" and [len(t) for t in s.times] == [3, 1, 3]


def test_a_site_whose_routes_change_starts_over_and_the_table_is_bounded(monkeypatch):
    R.clear()
    a = R.site("k", ("split", "one"))
    assert R.site("k", ("split", "one")) is a
    assert R.site("k", ("split", "blas", "one")) is not a
    monkeypatch.setattr(R, "_MOST_SITES", 3)
    for key in range(5):
        R.site(key, ("split", "one"))
    assert len(R._sites) <= 3
    R.clear()


@pytest.mark.parametrize("faster", ["split", "one"])
def test_parallel_rows_takes_the_route_measured_faster(measured, monkeypatch, faster):
    blocks = record_blocks(monkeypatch)
    rows = 64
    out = np.zeros(rows)

    def fn(lo, hi):
        out[lo:hi] += 1
        # the fake time of this block: the whole kernel 1.0; each of two blocks 0.3
        # (a split worth it: 0.6) or 0.8 (1.6)
        measured.append(1.0 if hi - lo == rows else 0.3 if faster == "split" else 0.8)
    for _ in range(2 * R._SAMPLES):
        T.parallel_rows(fn, rows, 1 << 20)
    assert len(blocks) == R._SAMPLES  # the trial: each route in turn
    (key, chosen), = R.choices().items()
    assert chosen == faster and key[1:] == (rows, 1 << 20, False)
    blocks.clear()
    for _ in range(5):
        T.parallel_rows(fn, rows, 1 << 20)
    assert len(blocks) == (5 if faster == "split" else 0)
    assert (out == 2 * R._SAMPLES + 5).all()  # every row once per call, either way


def test_parallel_rows_forced_routes_and_the_fixed_rules(monkeypatch):
    blocks = record_blocks(monkeypatch)
    ember.set_num_threads(2)
    for mode, split in (("static", True), ("split", True), ("one", False), ("blas", False)):
        monkeypatch.setitem(T._state, "routes", mode)
        blocks.clear()
        T.parallel_rows(lambda lo, hi: None, 64, 1 << 20)
        assert bool(blocks) == split, mode


@pytest.mark.parametrize("faster", ["split", "one"])
def test_pair_takes_the_way_measured_faster(measured, monkeypatch, faster):
    blocks = record_blocks(monkeypatch)

    def first():  # (``in_worker`` on the caller: the pair's split)
        at_once = getattr(T.local, "in_worker", False)
        measured.append(1.0 if not at_once else 0.6 if faster == "split" else 1.5)
        return 1

    def second():
        return 2
    for _ in range(2 * R._SAMPLES):
        assert T.pair(first, second, T._MIN_PAIR_COST) == (1, 2)
    assert list(R.choices().values()) == [faster]
    blocks.clear()
    assert T.pair(first, second, T._MIN_PAIR_COST) == (1, 2)
    assert bool(blocks) == (faster == "split")


def _one_thread(a, b):
    saved = T.blas_to_one()
    try:
        return np.matmul(a, b)
    finally:
        T.blas_back(saved)


@pytest.mark.parametrize("faster", ["split", "blas", "one"])
def test_a_product_takes_the_route_measured_fastest_with_the_same_bits(measured, monkeypatch,
                                                                       faster):
    """256 x 128 x 784 (an MLP's first weight gradient; inner dimension 128: BLAS's own
    threads keep its bits where measured so): each of its open routes tried, the fastest
    kept, every result bit-equal to the product at one BLAS thread."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 128), dtype=np.float32)
    b = rng.standard_normal((128, 784), dtype=np.float32)
    want = _one_thread(a, b)
    cost = {"split": 1.0, "blas": 1.0, "one": 1.0, faster: 0.5}
    counts = T._blas_libs()

    def whole():
        # the caller's product: on BLAS's threads (blas) or at one BLAS thread (one)
        one = all(lib.num_threads == 1 for lib in counts)
        measured.append(cost["one" if one else "blas"])
        return np.matmul(a, b)

    def split(self, fn, bounds, _run=T.Pool.run):
        measured.append(cost["split"])
        return _run(self, fn, bounds)
    monkeypatch.setattr(T.Pool, "run", split)
    routes = thread_products._ROUTES[T.row_grain("f") > 0, 128 <= T.same_bits_k("f")]
    results = [T.matmul(a, b, whole=whole) for _ in range(len(routes) * R._SAMPLES)]
    for r in results:
        assert np.array_equal(r.view(np.uint32), want.view(np.uint32))
    if len(routes) == 1:  # (a kernel where neither the split nor BLAS's threads may run)
        assert R.choices() == {}
        return
    (chosen,) = R.choices().values()
    assert chosen == (faster if faster in routes else min(
        routes, key=lambda r: (cost[r], routes.index(r))))


def test_routes_are_the_fixed_rules_by_default_and_blocks_taken_back():
    """What a process that has not pinned them gets: the fixed rules (the measured choice
    read slower than them on a quiet machine: docs/performance/threads.md, fifteenth
    pass) and the caller taking back unstarted blocks (the test suite pins workers keeping
    theirs). Read from the two modules' source, not from a new Python importing ember
    (seconds of a CI worker's time)."""
    import inspect

    from ember.backend import pool

    def assigned(module, name, within=None):
        tree = ast.parse(inspect.getsource(module))
        nodes = tree.body if within is None else next(
            n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == within).body
        for node in nodes:
            if isinstance(node, ast.Assign) and [getattr(t, "id", None)
                                                 for t in node.targets] == [name]:
                return node.value
        raise AssertionError(f"no {name} = ... in {module.__name__}")
    state = ast.literal_eval(_dict_without_calls(assigned(T, "_state")))
    assert state["routes"] == "static"
    assert ast.literal_eval(assigned(pool, "steal", within="Pool")) is True


def _dict_without_calls(node):
    """``_state``'s dict literal with its computed entries (calls, names) left out."""
    keep = [(k, v) for k, v in zip(node.keys, node.values) if isinstance(v, ast.Constant)]
    return ast.Dict(keys=[k for k, _ in keep], values=[v for _, v in keep])


def test_each_ufunc_of_an_elementwise_split_is_its_own_site(measured):
    """exp and negative of one size are not one kernel's cost: each is measured apart."""
    x = np.linspace(-1, 1, T.SPLIT_ELEMENTS, dtype=np.float32)
    for ufunc in (np.exp, np.negative, np.exp):
        got = T.unary(ufunc, x)
        assert np.array_equal(got, ufunc(x))
    assert np.array_equal(T.binary(np.add, x, x), x + x)
    sites = [key[0] for key in R.choices()]
    assert sorted(map(repr, sites)) == sorted(map(repr, [np.exp, np.negative, np.add]))


def test_a_forked_child_measures_its_routes_anew(measured):
    import os
    R.site("parent's", ("split", "one"))
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report what it kept, and leave at once
        os.write(write, str(len(R._sites)).encode())
        os._exit(0)
    os.close(write)
    kept = os.read(read, 16)
    os.close(read)
    os.waitpid(pid, 0)
    assert kept == b"0" and "parent's" in R._sites


def test_linear_layers_steps_keep_one_threads_bits_on_every_route(monkeypatch):
    """A 784-256-128-10 stack's SGD steps (its products, pair, update and axpy sites) at
    two threads under the measured choice (with this machine's clock: every route in its
    trials) and with the split forced, blocks taken back: one thread's parameters."""
    from ember.backend import gemm, pool
    from ember.optim import _one_pass

    def train():
        rng = np.random.default_rng(0)
        params = [ember.tensor(rng.standard_normal(shape, dtype=np.float32) * 0.05,
                               requires_grad=True)
                  for shape in ((256, 784), (256,), (128, 256), (128,), (10, 128), (10,))]
        opt = ember.optim.SGD(params, lr=0.01, momentum=0.9)
        x = ember.tensor(rng.standard_normal((128, 784), dtype=np.float32))
        linear = ember.nn.functional.linear
        for _ in range(4):  # (each of a site's three routes tried at least once)
            opt.zero_grad()
            h = linear(x, params[0], params[1]).relu()
            h = linear(h, params[2], params[3]).relu()
            linear(h, params[4], params[5]).square().mean().backward()
            opt.step()
        return [p.detach().numpy().copy() for p in params]
    monkeypatch.setattr(T, "cores_to_spare", lambda: True)  # (BLAS's threads open)
    monkeypatch.setattr(pool.Pool, "steal", True)
    # the default install's update (NumPy: the split update and axpy sites), no numba
    monkeypatch.setattr(_one_pass, "_kernels", {"sgd": None, "adam": None})
    with gemm.numpy_only():
        ember.set_num_threads(1)
        one = train()
        ember.set_num_threads(2)
        for mode in ("measured", "split"):
            monkeypatch.setitem(T._state, "routes", mode)
            R.clear()
            for p, q in zip(one, train()):
                assert np.array_equal(p.view(np.uint32), q.view(np.uint32)), mode
    R.clear()


def test_a_products_first_split_makes_the_pool_before_its_trial_is_timed(measured,
                                                                         monkeypatch):
    """A new pool times its own round trips (a one-time cost): not counted in the first
    split's sample, where it would rule the split out for the whole trial."""
    events = []
    real_new_pool, real_now = T._new_pool, R.now
    monkeypatch.setattr(T, "_new_pool", lambda: events.append("pool") or real_new_pool())
    monkeypatch.setattr(R, "now", lambda: events.append("clock") or real_now())
    T._pool[0] = None  # (the next split makes a new one, kept after the test)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 128), dtype=np.float32)
    b = rng.standard_normal((128, 784), dtype=np.float32)
    T.matmul(a, b, whole=lambda: np.matmul(a, b))
    if T.row_grain("f"):  # (the split open: the first route tried)
        assert events[:2] == ["pool", "clock"]
