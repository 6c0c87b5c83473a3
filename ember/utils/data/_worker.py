"""The worker-process side of a DataLoader: seeding, the fetch loop, error transport."""
import os
import queue
import random
import signal
import sys
import traceback
from dataclasses import dataclass

import numpy as np

__all__ = ["get_worker_info", "WorkerInfo"]

_worker_info = None


@dataclass(frozen=True)
class WorkerInfo:
    """What a worker process knows about itself (``get_worker_info()`` returns it)."""

    id: int
    num_workers: int
    seed: int
    dataset: object


def get_worker_info():
    """In a DataLoader worker: its ``WorkerInfo``; in the main process: None."""
    return _worker_info


class ExceptionWrapper:
    """An exception raised in a worker, carried to the main process with its traceback."""

    def __init__(self, exc_info, where):
        self.exc_type = exc_info[0]
        self.msg = "".join(traceback.format_exception(*exc_info))
        self.where = where

    def reraise(self):
        msg = (f"Caught {self.exc_type.__name__} {self.where}.\nOriginal Traceback (most "
               f"recent call last):\n{self.msg}")
        if self.exc_type is KeyError:
            msg = KeyErrorMessage(msg)
        try:
            exc = self.exc_type(msg)
        except Exception:
            raise RuntimeError(msg) from None
        raise exc


class KeyErrorMessage(str):
    def __repr__(self):
        return self


class IterableExhausted:
    """Sent by a worker whose copy of an iterable dataset has run out."""

    def __init__(self, worker_id):
        self.worker_id = worker_id


def seed_worker(base_seed, worker_id):
    """Seed ember, Python's ``random`` and NumPy's global state differently per worker,
    exactly as PyTorch does (NumPy from ``SeedSequence([worker_id, base_seed])``), so
    random augmentations differ between workers and match a PyTorch run."""
    import ember
    seed = (base_seed + worker_id) % (2 ** 63)
    ember.manual_seed(seed)
    random.seed(seed)
    np.random.seed(np.random.SeedSequence([worker_id, base_seed % (2 ** 64)]).generate_state(4))
    return seed


def fetch(dataset, indices, auto_collation, collate_fn, state):
    """One batch (or one sample without auto-collation) from a dataset."""
    from ember.utils.data.dataset import IterableDataset
    if isinstance(dataset, IterableDataset):
        it = state["iter"]
        if auto_collation:
            data = []
            for _ in range(state["batch_size"]):
                try:
                    data.append(next(it))
                except StopIteration:
                    state["ended"] = True
                    break
            if not data or (state["drop_last"] and len(data) < state["batch_size"]):
                raise StopIteration
        else:
            data = next(it)
        return collate_fn(data)
    if auto_collation:
        if hasattr(dataset, "__getitems__") and dataset.__getitems__:
            data = dataset.__getitems__(indices)
        else:
            data = [dataset[i] for i in indices]
    else:
        data = dataset[indices]
    return collate_fn(data)


def worker_loop(dataset, index_queue, result_queue, done_event, auto_collation, collate_fn,
                batch_size, drop_last, base_seed, init_fn, worker_id, num_workers):
    """Run in a worker process: take (batch_idx, indices), send (batch_idx, batch)."""
    global _worker_info
    # Ctrl-C goes to the whole process group; the main process decides what to do
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        seed = seed_worker(base_seed, worker_id)
        _worker_info = WorkerInfo(worker_id, num_workers, seed, dataset)
        from ember.utils.data.dataset import IterableDataset
        state = {"batch_size": batch_size, "drop_last": drop_last, "ended": False}
        init_error = None
        try:
            if init_fn is not None:
                init_fn(worker_id)
            if isinstance(dataset, IterableDataset):
                state["iter"] = iter(dataset)
        except Exception:
            init_error = ExceptionWrapper(sys.exc_info(),
                                          f"in DataLoader worker process {worker_id}")
        exhausted = False
        while True:
            try:
                task = index_queue.get(timeout=5.0)
            except queue.Empty:
                if done_event.is_set() or os.getppid() == 1:
                    break
                continue
            if task is None:
                break
            if done_event.is_set():
                continue
            idx, indices = task
            if indices == "reset":
                from ember.utils.data.dataset import IterableDataset as _It
                exhausted = False
                state["ended"] = False
                if isinstance(dataset, _It):
                    state["iter"] = iter(dataset)
                continue
            if init_error is not None:
                result_queue.put((idx, init_error))
                init_error = None
                continue
            if exhausted or state["ended"]:
                result_queue.put((idx, IterableExhausted(worker_id)))
                exhausted = True
                continue
            try:
                data = fetch(dataset, indices, auto_collation, collate_fn, state)
            except StopIteration:
                exhausted = True
                data = IterableExhausted(worker_id)
            except Exception:
                data = ExceptionWrapper(sys.exc_info(),
                                        f"in DataLoader worker process {worker_id}")
            result_queue.put((idx, data))
            del data
    except KeyboardInterrupt:
        pass
    if done_event.is_set():
        result_queue.cancel_join_thread()
        result_queue.close()
