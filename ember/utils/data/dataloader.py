"""DataLoader: sampler → batch sampler → fetch → collate → iterator (one process or many)."""
import itertools
import multiprocessing
import os
import queue
import threading
from typing import Generic, TypeVar

from ember.utils.data import _worker
from ember.utils.data._collate import CollateError, default_collate, default_convert
from ember.utils.data.dataset import IterableDataset
from ember.utils.data.sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["DataLoader"]

_RESET = "reset"


class _InfiniteConstantSampler(Sampler):
    def __iter__(self):
        while True:
            yield None


_T_co = TypeVar("_T_co", covariant=True)


class DataLoader(Generic[_T_co]):
    """Iterate over a dataset in batches, as ``torch.utils.data.DataLoader``.

    ``num_workers > 0`` loads batches in worker processes: each is seeded from the
    loader's ``generator`` (ember, ``random`` and NumPy alike — so random augmentations
    differ between workers), an exception in a worker is raised here with the
    worker's traceback, and a worker that dies is reported instead of hanging.
    ``pin_memory`` is accepted and has no effect on cpu tensors.
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 in_order=True):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 "
                             "to disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in "
                             "multiprocessing.let num_workers > 0 to enable multiprocessing, "
                             "otherwise set prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        if prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.generator = generator
        self.persistent_workers = persistent_workers
        self.in_order = in_order

        if isinstance(dataset, IterableDataset):
            if shuffle not in (None, False):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                 f"shuffle option, but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                 f"sampler option, but got sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                 f"batch_sampler option, but got batch_sampler={batch_sampler}")
        else:
            shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if sampler is None:
            if isinstance(dataset, IterableDataset):
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self._iterator = None

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __iter__(self):
        if self.num_workers == 0:
            return _SingleProcessIter(self)
        if self.persistent_workers:
            if self._iterator is None:
                self._iterator = _MultiProcessIter(self)
            else:
                self._iterator._reset(self)
            return self._iterator
        return _MultiProcessIter(self)

    def __len__(self):
        if isinstance(self.dataset, IterableDataset):
            n = len(self.dataset)
            if self.batch_size is not None:
                n = n // self.batch_size if self.drop_last else -(-n // self.batch_size)
            return n
        return len(self._index_sampler)

    def __del__(self):
        it = getattr(self, "_iterator", None)
        if it is not None:
            it._shutdown()


def _base_seed(loader):
    import ember
    return int(ember.empty((), dtype=ember.int64).random_(generator=loader.generator).item())


class _BaseIter:
    def __init__(self, loader):
        self._dataset = loader.dataset
        self._auto_collation = loader._auto_collation
        self._collate_fn = loader.collate_fn
        self._batch_size = loader.batch_size
        self._drop_last = loader.drop_last
        self._index_sampler = loader._index_sampler
        self._sampler_iter = iter(self._index_sampler)
        self._num_yielded = 0
        self._length = None
        try:
            self._length = len(loader)
        except TypeError:
            pass

    def __iter__(self):
        return self

    def __len__(self):
        return self._length

    def _batch_error(self, err):
        return CollateError(f"{err} (in batch {self._num_yielded})")


class _SingleProcessIter(_BaseIter):
    def __init__(self, loader):
        super().__init__(loader)
        self._base_seed = _base_seed(loader)
        self._state = {"batch_size": self._batch_size, "drop_last": self._drop_last,
                       "ended": False}
        if isinstance(self._dataset, IterableDataset):
            self._state["iter"] = iter(self._dataset)

    def __next__(self):
        if self._state["ended"]:
            raise StopIteration
        indices = next(self._sampler_iter)
        try:
            batch = _worker.fetch(self._dataset, indices, self._auto_collation,
                                  self._collate_fn, self._state)
        except CollateError as e:
            raise self._batch_error(e) from None
        self._num_yielded += 1
        return batch


class _MultiProcessIter(_BaseIter):
    """Batches from worker processes, handed out in sampler order."""

    def __init__(self, loader):
        super().__init__(loader)
        self._num_workers = loader.num_workers
        self._prefetch = loader.prefetch_factor
        self._timeout = loader.timeout
        self._persistent = loader.persistent_workers
        ctx = loader.multiprocessing_context
        if ctx is None:
            ctx = multiprocessing
        elif isinstance(ctx, str):
            ctx = multiprocessing.get_context(ctx)
        self._base_seed = _base_seed(loader)
        self._done_event = ctx.Event()
        self._result_queue = ctx.Queue()
        self._index_queues = []
        self._workers = []
        for wid in range(self._num_workers):
            iq = ctx.Queue()
            iq.cancel_join_thread()
            w = ctx.Process(target=_worker.worker_loop, daemon=True, args=(
                self._dataset, iq, self._result_queue, self._done_event,
                self._auto_collation, self._collate_fn, self._batch_size, self._drop_last,
                self._base_seed, loader.worker_init_fn, wid, self._num_workers))
            w.start()
            self._index_queues.append(iq)
            self._workers.append(w)
        self._shut = False
        self._start_epoch()

    def _start_epoch(self):
        self._send_idx = 0
        self._rcvd_idx = 0
        self._tasks = {}
        self._results = {}
        self._active = [True] * self._num_workers
        self._cycle = itertools.cycle(range(self._num_workers))
        self._num_yielded = 0
        for _ in range(self._prefetch * self._num_workers):
            self._try_put_index()

    def _reset(self, loader):
        self._sampler_iter = iter(self._index_sampler)
        # let workers restart iterable datasets; drain what an unfinished epoch left
        while self._rcvd_idx < self._send_idx:
            try:
                self._next_result()
            except StopIteration:
                break
        for iq in self._index_queues:
            iq.put((-1, _RESET))
        self._start_epoch()

    def _try_put_index(self):
        if len(self._tasks) >= self._prefetch * self._num_workers:
            return
        for _ in range(self._num_workers):
            wid = next(self._cycle)
            if self._active[wid]:
                break
        else:
            return
        try:
            indices = next(self._sampler_iter)
        except StopIteration:
            return
        self._index_queues[wid].put((self._send_idx, indices))
        self._tasks[self._send_idx] = wid
        self._send_idx += 1

    def _get(self):
        """One (idx, data) from the workers, watching for dead workers and timeouts."""
        waited = 0.0
        step = min(self._timeout, 5.0) if self._timeout > 0 else 5.0
        while True:
            try:
                return self._result_queue.get(timeout=step)
            except queue.Empty:
                waited += step
                dead = [w for w in self._workers if not w.is_alive()]
                if dead:
                    pids = ", ".join(str(w.pid) for w in dead)
                    codes = ", ".join(str(w.exitcode) for w in dead)
                    self._shutdown()
                    raise RuntimeError(f"DataLoader worker (pid(s) {pids}) exited unexpectedly "
                                       f"(exit code(s) {codes})") from None
                if self._timeout > 0 and waited >= self._timeout:
                    self._shutdown()
                    raise RuntimeError(
                        f"DataLoader timed out after {self._timeout} seconds") from None

    def _next_result(self):
        while True:
            if self._rcvd_idx >= self._send_idx:
                raise StopIteration
            idx = self._rcvd_idx
            if idx in self._results:
                data = self._results.pop(idx)
                self._tasks.pop(idx, None)
                self._rcvd_idx += 1
                if isinstance(data, _worker.IterableExhausted):
                    self._active[data.worker_id] = False
                    self._try_put_index()
                    continue
                self._try_put_index()
                return data
            ridx, data = self._get()
            if isinstance(data, _worker.IterableExhausted):
                self._active[data.worker_id] = False
            self._results[ridx] = data

    def __next__(self):
        try:
            data = self._next_result()
        except StopIteration:
            if not self._persistent:
                self._shutdown()
            raise
        except BaseException:
            self._shutdown()
            raise
        if isinstance(data, _worker.ExceptionWrapper):
            if not self._persistent:
                self._shutdown()
            if issubclass(data.exc_type, CollateError):
                data.where += f" (in batch {self._num_yielded})"
            data.reraise()
        self._num_yielded += 1
        return data

    def _shutdown(self):
        if getattr(self, "_shut", True):
            return
        self._shut = True
        self._done_event.set()
        for iq in self._index_queues:
            try:
                iq.put(None)
            except (OSError, ValueError):
                pass
        for w in self._workers:
            w.join(timeout=2.0)
            if w.is_alive():
                w.terminate()
                w.join(timeout=1.0)
        for q in self._index_queues + [self._result_queue]:
            try:
                q.cancel_join_thread()
                q.close()
            except (OSError, ValueError):
                pass

    def __del__(self):
        if os.getpid() and threading is not None:
            self._shutdown()


# torch's names for the iterator classes (libraries subclass or isinstance-check them)
_BaseDataLoaderIter = _BaseIter
_SingleProcessDataLoaderIter = _SingleProcessIter
_MultiProcessingDataLoaderIter = _MultiProcessIter
