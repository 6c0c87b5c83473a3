"""``torch.distributed`` on MPI (mpi4py and MPICH: ``pip install -e '.[distributed]'``).

Processes are started by MPI's launcher, ``mpiexec -n 4 python train.py``, or by
``python -m ember.distributed.run --nproc-per-node 4 train.py`` (torchrun's interface).
``init_process_group`` accepts the backend names ``"mpi"``, ``"gloo"`` and ``"nccl"``;
all of them run on MPI. mpi4py is imported (and MPI started) only when a process group
is created, never by ``import ember``.

Files by family: ``_pg`` (process groups, ranks, barrier, Work), ``_collectives``
(tensor collectives), ``_p2p`` (send/recv), ``_objects`` (object collectives), ``_mpi``
(loading MPI, waiting with a deadline), ``_departures`` (how a rank that exits or dies
reaches the others; the per-rank supervisor), ``run`` and ``_agent`` (the launcher),
``nn`` (differentiable collectives); ``nn.parallel.DistributedDataParallel`` lives in
``ember.nn.parallel``.
"""
from ember.distributed._collectives import (
    ReduceOp,
    all_gather,
    all_gather_into_tensor,
    all_reduce,
    all_to_all,
    all_to_all_single,
    broadcast,
    gather,
    reduce,
    reduce_scatter,
    reduce_scatter_tensor,
    scatter,
)
from ember.distributed._mpi import DistError, DistTimeoutError
from ember.distributed._mpi import available as _available
from ember.distributed._objects import (
    all_gather_object,
    broadcast_object_list,
    gather_object,
    scatter_object_list,
)
from ember.distributed._p2p import P2POp, batch_isend_irecv, irecv, isend, recv, send
from ember.distributed._pg import (
    Backend,
    GroupMember,
    ProcessGroup,
    Work,
    barrier,
    default_pg_timeout,
    destroy_process_group,
    get_backend,
    get_global_rank,
    get_group_rank,
    get_node_local_rank,
    get_process_group_ranks,
    get_rank,
    get_world_size,
    group,
    init_process_group,
    is_initialized,
    is_torchelastic_launched,
    monitored_barrier,
    new_group,
)

DistBackendError = DistError
# PyTorch's older name for a rank that did not answer in time
DistStoreError = DistTimeoutError

__all__ = [
    "is_available", "is_mpi_available", "is_gloo_available", "is_nccl_available",
    "is_ucc_available", "is_initialized", "is_torchelastic_launched", "init_process_group",
    "destroy_process_group", "get_rank", "get_world_size", "get_backend", "new_group",
    "barrier", "monitored_barrier", "ReduceOp", "all_reduce", "broadcast", "reduce",
    "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
    "gather", "scatter", "all_to_all", "all_to_all_single", "send", "recv", "isend", "irecv",
    "P2POp", "batch_isend_irecv", "broadcast_object_list", "all_gather_object",
    "gather_object", "scatter_object_list", "Work", "ProcessGroup", "GroupMember", "group",
    "Backend", "default_pg_timeout", "get_process_group_ranks", "get_global_rank",
    "get_group_rank", "get_node_local_rank", "DistError", "DistBackendError",
    "DistTimeoutError", "DistStoreError",
]


def is_available():
    """True when MPI (mpi4py) is installed: ``ember.distributed`` can run."""
    return _available()


def is_mpi_available():
    """True when mpi4py is installed (every backend name runs on it)."""
    return _available()


def is_gloo_available():
    """As PyTorch's CPU build: True, and ``"gloo"`` runs on MPI here."""
    return _available()


def is_nccl_available():
    """False, as in PyTorch's CPU build (``"nccl"`` is still accepted and runs on MPI)."""
    return False


def is_ucc_available():
    return False


def __getattr__(name):
    # torch.distributed has device_mesh and algorithms (and the mesh's names) after
    # `import torch`; ember loads them on first use
    if name in ("nn", "run", "device_mesh", "algorithms"):
        import importlib
        return importlib.import_module(f"{__name__}.{name}")
    if name in ("DeviceMesh", "init_device_mesh"):
        from ember.distributed import device_mesh
        return getattr(device_mesh, name)
    from ember.compat import missing_attribute
    raise missing_attribute(__name__, name)
