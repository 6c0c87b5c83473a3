"""utils.data against torch.utils.data: samplers, collation, loaders, worker processes."""
import collections
import os

import numpy as np
import pytest
import torch
import torch.utils.data as tdata

import ember
import ember.utils.data as edata


class Squares(edata.Dataset):
    def __init__(self, n=10):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i >= self.n:
            raise IndexError(i)
        return ember.tensor([float(i), float(i * i)]), i


class TSquares(tdata.Dataset):
    def __init__(self, n=10):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.tensor([float(i), float(i * i)]), i


def _np(batch):
    if isinstance(batch, (list, tuple)):
        return [_np(b) for b in batch]
    if isinstance(batch, dict):
        return {k: _np(v) for k, v in batch.items()}
    if hasattr(batch, "numpy"):
        return batch.numpy().tolist()
    return batch


@pytest.mark.parametrize("batch_size,drop_last", [(1, False), (3, False), (3, True), (10, False),
                                                  (None, False)])
def test_sequential_loader_matches_torch(batch_size, drop_last):
    e = list(edata.DataLoader(Squares(), batch_size=batch_size, drop_last=drop_last))
    t = list(tdata.DataLoader(TSquares(), batch_size=batch_size, drop_last=drop_last))
    assert len(e) == len(t)
    assert _np(e) == _np(t)
    assert len(edata.DataLoader(Squares(), batch_size=batch_size, drop_last=drop_last)) == \
        len(tdata.DataLoader(TSquares(), batch_size=batch_size, drop_last=drop_last))


Point = collections.namedtuple("Point", "x y")


@pytest.mark.parametrize("samples", [
    [1.5, 2.5, 3.0],
    [1, 2, 3],
    [True, False],
    ["a", "b"],
    [np.arange(3.0), np.ones(3)],
    [np.float32(1.5), np.float32(2.0)],
    [{"a": 1, "b": np.zeros(2)}, {"a": 2, "b": np.ones(2)}],
    [(1, 2.0), (3, 4.0)],
    [[1, 2], [3, 4]],
    [Point(1, 2.0), Point(3, 4.0)],
])
def test_default_collate_matches_torch(samples):
    e = edata.default_collate(samples)
    t = tdata.default_collate(samples)
    assert type(e).__name__ == type(t).__name__ or isinstance(e, list)

    def cmp(a, b):
        if isinstance(b, torch.Tensor):
            assert isinstance(a, ember.Tensor)
            assert a.dtype.name == str(b.dtype).split(".")[1]
            np.testing.assert_array_equal(a.numpy(), b.numpy())
        elif isinstance(b, dict):
            assert set(a) == set(b)
            for k in b:
                cmp(a[k], b[k])
        elif isinstance(b, (list, tuple)):
            assert len(a) == len(b)
            for x, y in zip(a, b):
                cmp(x, y)
        else:
            assert a == b
    cmp(e, t)


def test_collate_error_names_batch_and_shapes():
    class Ragged(edata.Dataset):
        def __len__(self):
            return 6

        def __getitem__(self, i):
            return ember.zeros(3 if i != 4 else 2)
    with pytest.raises(RuntimeError) as err:
        list(edata.DataLoader(Ragged(), batch_size=2))
    msg = str(err.value)
    assert "batch 2" in msg and "(3,)" in msg and "(2,)" in msg


def test_datasets_compose_like_torch():
    a, b = Squares(4), Squares(3)
    cat = edata.ConcatDataset([a, b])
    assert len(cat) == 7 and cat[5][1] == 1 and cat[-1][1] == 2
    sub = edata.Subset(a, [3, 1])
    assert len(sub) == 2 and sub[0][1] == 3
    td = edata.TensorDataset(ember.arange(5), ember.arange(5) * 2)
    assert td[3][1].item() == 6 and len(td) == 5
    with pytest.raises(ValueError):
        edata.TensorDataset(ember.arange(5), ember.arange(4))

    class Stream(edata.IterableDataset):
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return iter(range(self.n))
    chain = edata.ChainDataset([Stream(2), Stream(3)])
    assert list(chain) == [0, 1, 0, 1, 2]
    assert [b.tolist() for b in edata.DataLoader(Stream(5), batch_size=2)] == [[0, 1], [2, 3],
                                                                              [4]]


def test_batch_sampler_and_errors_match_torch():
    e = list(edata.BatchSampler(edata.SequentialSampler(range(7)), 3, False))
    t = list(tdata.BatchSampler(tdata.SequentialSampler(range(7)), 3, False))
    assert e == t
    with pytest.raises(ValueError):
        edata.BatchSampler(range(3), 0, False)
    with pytest.raises(ValueError):
        edata.DataLoader(Squares(), sampler=edata.SequentialSampler(range(3)), shuffle=True)
    with pytest.raises(ValueError):
        edata.DataLoader(Squares(), batch_sampler=[[0]], batch_size=2)
    with pytest.raises(ValueError):
        edata.DataLoader(Squares(), num_workers=-1)


@pytest.mark.parametrize("shuffle,drop_last,n", [(False, False, 10), (False, True, 10),
                                                 (False, False, 11), (True, False, 11)])
def test_distributed_sampler_partitions(shuffle, drop_last, n):
    parts = []
    for rank in range(3):
        s = edata.DistributedSampler(range(n), num_replicas=3, rank=rank, shuffle=shuffle,
                                     drop_last=drop_last, seed=5)
        s.set_epoch(2)
        idx = list(s)
        assert len(idx) == len(s)
        parts.append(idx)
        if not shuffle:
            t = tdata.DistributedSampler(range(n), num_replicas=3, rank=rank, shuffle=False,
                                         drop_last=drop_last)
            assert idx == list(t)
    flat = sorted(i for p in parts for i in p)
    if not drop_last:
        assert set(flat) == set(range(n))


def test_random_sampler_is_a_permutation_and_seeded():
    ember.manual_seed(3)
    a = list(edata.RandomSampler(range(20)))
    ember.manual_seed(3)
    b = list(edata.RandomSampler(range(20)))
    assert a == b and sorted(a) == list(range(20))
    r = list(edata.RandomSampler(range(5), replacement=True, num_samples=40))
    assert len(r) == 40 and set(r) <= set(range(5))
    w = list(edata.WeightedRandomSampler([0.0, 1.0, 0.0], 10))
    assert w == [1] * 10


def test_shuffle_order_matches_torch():
    e = list(edata.RandomSampler(range(30), generator=ember.Generator().manual_seed(7)))
    t = list(tdata.RandomSampler(range(30), generator=torch.Generator().manual_seed(7)))
    assert e == t


def test_random_split():
    parts = edata.random_split(range(10), [0.5, 0.3, 0.2],
                               generator=ember.Generator().manual_seed(1))
    assert [len(p) for p in parts] == [5, 3, 2]
    assert sorted(i for p in parts for i in p) == list(range(10))
    tparts = tdata.random_split(range(10), [0.5, 0.3, 0.2],
                                generator=torch.Generator().manual_seed(1))
    assert [list(p) for p in parts] == [list(p) for p in tparts]
    with pytest.raises(ValueError):
        edata.random_split(range(10), [3, 3])


# ----- worker processes ------------------------------------------------------------------
def test_workers_give_the_same_batches_in_order():
    e0 = _np(list(edata.DataLoader(Squares(23), batch_size=4)))
    e2 = _np(list(edata.DataLoader(Squares(23), batch_size=4, num_workers=2)))
    assert e0 == e2


class NumpyRandom(edata.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        import random
        return np.array([np.random.rand(), random.random(), ember.rand(1).item()])


def test_worker_random_states_differ_and_are_reproducible():
    def draws(seed):
        g = ember.Generator().manual_seed(seed)
        loader = edata.DataLoader(NumpyRandom(), batch_size=4, num_workers=2, generator=g)
        return [b.numpy() for b in loader]
    a = draws(0)
    # batches 0 and 1 come from different workers: no source of randomness may repeat
    for col in range(3):
        assert not np.allclose(a[0][:, col], a[1][:, col])
    b = draws(0)
    np.testing.assert_array_equal(np.concatenate(a), np.concatenate(b))


class Boom(edata.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == 5:
            raise ValueError("bad sample 5")
        return i


def test_worker_exception_is_raised_with_its_traceback():
    with pytest.raises(ValueError) as err:
        list(edata.DataLoader(Boom(), batch_size=2, num_workers=2))
    msg = str(err.value)
    assert "bad sample 5" in msg and "worker process" in msg and "__getitem__" in msg


class Dies(edata.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == 3:
            os._exit(3)
        return i


def test_dead_worker_is_reported_not_a_hang():
    with pytest.raises(RuntimeError, match="exited unexpectedly"):
        list(edata.DataLoader(Dies(), batch_size=1, num_workers=2, timeout=30))


class Sharded(edata.IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = edata.get_worker_info()
        if info is None:
            return iter(range(self.n))
        return iter(range(info.id, self.n, info.num_workers))


def test_iterable_dataset_shards_itself_with_worker_info():
    assert edata.get_worker_info() is None
    got = sorted(x for b in edata.DataLoader(Sharded(11), batch_size=2, num_workers=3)
                 for x in b.tolist())
    assert got == list(range(11))


def test_persistent_workers_serve_several_epochs():
    loader = edata.DataLoader(Squares(9), batch_size=2, num_workers=2, persistent_workers=True,
                              shuffle=False)
    first = _np(list(loader))
    second = _np(list(loader))
    assert first == second == _np(list(edata.DataLoader(Squares(9), batch_size=2)))
    it = loader._iterator
    assert it is not None and all(w.is_alive() for w in it._workers)
    it._shutdown()


def test_worker_init_fn_and_prefetch():
    seen = []

    def init(worker_id):
        assert edata.get_worker_info().id == worker_id
    loader = edata.DataLoader(Squares(6), batch_size=1, num_workers=2, worker_init_fn=init,
                              prefetch_factor=3)
    seen = [b[1].item() for b in loader]
    assert seen == list(range(6))
