"""``torch.multiprocessing``: Python's ``multiprocessing``, plus ``spawn``.

``spawn(fn, args, nprocs)`` is how PyTorch's DDP tutorial starts its ranks. ember's
ranks are MPI processes, which MPI's launcher starts, so:

- under ``python -m ember.distributed.run --nproc-per-node N`` (or ``mpiexec -n N``),
  ``spawn(fn, nprocs=N)`` runs ``fn(rank, *args)`` in each of the N processes that are
  already there: the tutorial program runs unchanged under the launcher;
- otherwise it starts ``nprocs`` Python processes as PyTorch does; a process that calls
  ``init_process_group(world_size=N)`` there fails with an error naming the launcher
  command to use instead (those processes are not connected by MPI).
"""
import multiprocessing as _mp
import os
import signal
import sys
import time
import traceback
from multiprocessing import *  # noqa: F403

__all__ = [n for n in dir(_mp) if not n.startswith("_")] + [
    "spawn", "start_processes", "ProcessContext", "ProcessRaisedException",
    "ProcessExitedException", "get_sharing_strategy", "set_sharing_strategy",
    "get_all_sharing_strategies"]


class ProcessRaisedException(Exception):
    """A spawned process raised; the message holds its traceback."""

    def __init__(self, msg, error_index, error_pid):
        super().__init__(msg)
        self.error_index = error_index
        self.pid = error_pid


class ProcessExitedException(Exception):
    """A spawned process exited with a nonzero status (or was killed)."""

    def __init__(self, msg, error_index, error_pid, exit_code, signal_name=None):
        super().__init__(msg)
        self.error_index = error_index
        self.pid = error_pid
        self.exit_code = exit_code
        self.signal_name = signal_name


def get_all_sharing_strategies():
    return {"file_system"}


def get_sharing_strategy():
    return "file_system"


def set_sharing_strategy(strategy):
    """Accepted for compatibility: ember tensors are NumPy arrays, pickled between
    processes."""
    if strategy not in ("file_system", "file_descriptor"):
        raise ValueError(f"unknown sharing strategy {strategy!r}")


def _mpi_world():
    """(world size, rank) of the MPI job this process belongs to, from the launcher's
    environment (without starting MPI)."""
    env = os.environ
    for size_key, rank_key in (("PMI_SIZE", "PMI_RANK"),
                               ("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK")):
        if size_key in env and rank_key in env:
            return int(env[size_key]), int(env[rank_key])
    return 1, 0


def _child(fn, i, args, errors):
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass
    except BaseException:  # noqa: BLE001 - everything is reported to the parent
        errors.put((i, traceback.format_exc()))
        sys.exit(1)


class ProcessContext:
    """The processes started by ``start_processes(join=False)``."""

    def __init__(self, processes, errors):
        self.processes = processes
        self.error_queues = [errors]
        self._errors = errors
        self._joined = set()
        self._failed = None  # the index of the first process that failed
        self._tracebacks = {}

    def pids(self):
        return [p.pid for p in self.processes]

    def join(self, timeout=None, grace_period=None):
        """Wait until a process ends (at most ``timeout`` seconds): True once every
        process exited successfully, False while some still run. As soon as one fails,
        the others are stopped (SIGTERM; SIGKILL after ``grace_period``, by default 30
        s) and its failure is raised: ``ProcessRaisedException`` with its traceback, or
        ``ProcessExitedException`` with its exit code or signal."""
        from multiprocessing.connection import wait
        running = {p.sentinel: i for i, p in enumerate(self.processes)
                   if i not in self._joined}
        if self._failed is None and running:
            for sentinel in wait(list(running), timeout):
                i = running[sentinel]
                p = self.processes[i]
                p.join()
                self._joined.add(i)
                if p.exitcode != 0 and self._failed is None:
                    self._failed = i
        if self._failed is None:
            return len(self._joined) == len(self.processes)
        self._stop_the_others(30.0 if grace_period is None else grace_period)
        raise self._failure()

    def _stop_the_others(self, grace_period):
        alive = [p for p in self.processes if p.is_alive()]
        for p in alive:
            p.terminate()
        deadline = time.monotonic() + grace_period
        for p in alive:
            p.join(max(0.0, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join()
        while not self._errors.empty():
            i, tb = self._errors.get()
            self._tracebacks.setdefault(i, tb)

    def _failure(self):
        i = self._failed
        p = self.processes[i]
        if i in self._tracebacks:
            return ProcessRaisedException(f"\n\n-- Process {i} terminated with the "
                                          f"following error:\n{self._tracebacks[i]}", i,
                                          p.pid)
        if p.exitcode < 0:
            try:
                name = signal.Signals(-p.exitcode).name
            except ValueError:
                name = f"<Unknown signal {-p.exitcode}>"
            return ProcessExitedException(f"process {i} terminated with signal {name}", i,
                                          p.pid, p.exitcode, name)
        return ProcessExitedException(f"process {i} terminated with exit code "
                                      f"{p.exitcode}", i, p.pid, p.exitcode)


def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """``fn(i, *args)`` for ``i`` in ``range(nprocs)`` (see the module docstring)."""
    size, rank = _mpi_world()
    if size > 1:
        if size != nprocs:
            raise RuntimeError(
                f"torch.multiprocessing.spawn(nprocs={nprocs}) in an MPI job of {size} "
                f"processes: start the job with --nproc-per-node {nprocs} (ember runs "
                "fn(rank) in each MPI process instead of spawning)")
        fn(rank, *args)
        return None
    from ember.distributed.run import _under_ember_alias
    torch_alias = _under_ember_alias()
    # under `python -m ember run` a fresh interpreter would import the real torch: fork
    # keeps ember serving `import torch`
    ctx = _mp.get_context("fork" if torch_alias and os.name == "posix" else start_method)
    errors = ctx.SimpleQueue()
    procs = []
    for i in range(nprocs):
        p = ctx.Process(target=_child, args=(fn, i, args, errors), daemon=daemon)
        p.start()
        procs.append(p)
    context = ProcessContext(procs, errors)
    if not join:
        return context
    while not context.join():
        pass
    return None


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """``torch.multiprocessing.spawn``: see the module docstring for how it meets MPI."""
    return start_processes(fn, args, nprocs, join, daemon, start_method)
