"""``torch.distributed.device_mesh``: ranks laid out as an n-dimensional grid.

A :class:`DeviceMesh` holds the global ranks as an integer array of the mesh's shape and,
for each mesh dimension, the process group of the ranks that differ only along it (made
with ``ember.distributed.new_group`` when the mesh is built, as every rank must take part).
It runs over ember's process groups (MPI); ``init_device_mesh`` starts the default group
when none exists, as PyTorch does.
"""
import numpy as np

__all__ = ["DeviceMesh", "init_device_mesh"]


class DeviceMesh:
    """A grid of global ranks (``mesh``, an int64 tensor) on ``device_type``, with
    optional names for its dimensions. Every rank of the default group must build the
    same mesh, in the same order. ``backend_override`` names backends, and every backend
    runs on MPI in ember, so the mesh's groups are the same whatever it says."""

    def __init__(self, device_type, mesh, *, mesh_dim_names=None, backend_override=None,
                 _init_backend=True, _groups=None):
        from ember import distributed as dist
        from ember import tensor
        self.device_type = device_type
        arr = np.asarray(mesh.tolist() if hasattr(mesh, "tolist") else mesh, dtype=np.int64)
        if arr.ndim == 0:
            raise ValueError("DeviceMesh needs at least one dimension")
        self._mesh = arr
        self.mesh = tensor(arr)
        if mesh_dim_names is not None:
            mesh_dim_names = tuple(mesh_dim_names)
            if len(mesh_dim_names) != arr.ndim:
                raise ValueError(f"mesh_dim_names {mesh_dim_names} must have one name per "
                                 f"mesh dimension ({arr.ndim})")
        self.mesh_dim_names = mesh_dim_names
        if not dist.is_initialized():
            dist.init_process_group()
        me = dist.get_rank()
        where = np.argwhere(arr == me)
        self._coordinate = tuple(int(i) for i in where[0]) if len(where) else None
        if _groups is not None:
            self._groups = _groups
        else:
            # one group per line of ranks along each dimension; every rank creates every
            # group (new_group is collective) and keeps the one that holds it
            self._groups = []
            for d in range(arr.ndim):
                lines = np.moveaxis(arr, d, -1).reshape(-1, arr.shape[d])
                mine = None
                for line in lines:
                    g = dist.new_group([int(r) for r in line])
                    if me in line:
                        mine = g
                self._groups.append(mine)

    # ---- shape -------------------------------------------------------------------------
    @property
    def ndim(self):
        return self._mesh.ndim

    @property
    def shape(self):
        return tuple(self._mesh.shape)

    def size(self, mesh_dim=None):
        """The number of ranks in the mesh, or along ``mesh_dim``."""
        return self._mesh.size if mesh_dim is None else self._mesh.shape[self._dim(mesh_dim)]

    def _dim(self, mesh_dim):
        if isinstance(mesh_dim, str):
            if not self.mesh_dim_names or mesh_dim not in self.mesh_dim_names:
                raise KeyError(f"Mesh dimension '{mesh_dim}' does not exist. Available mesh "
                               f"dimensions are: mesh_dim_names={self.mesh_dim_names}")
            return self.mesh_dim_names.index(mesh_dim)
        return 0 if mesh_dim is None else int(mesh_dim)

    # ---- this rank ---------------------------------------------------------------------
    def get_rank(self):
        """This process's global rank."""
        from ember import distributed as dist
        return dist.get_rank()

    def get_coordinate(self):
        """This rank's index along each mesh dimension (None when not in the mesh)."""
        return list(self._coordinate) if self._coordinate is not None else None

    def get_local_rank(self, mesh_dim=None):
        """This rank's index along ``mesh_dim`` (required for a mesh of several dims)."""
        if mesh_dim is None and self.ndim > 1:
            raise RuntimeError(f"Found the DeviceMesh have {self.ndim} dimensions",
                               "Optional kwarg `mesh_dim` needs to be specified when "
                               "device_mesh.ndim > 1.")
        return self._coordinate[self._dim(mesh_dim)]

    def get_group(self, mesh_dim=None):
        """The process group of the ranks along ``mesh_dim`` that share this rank's other
        coordinates."""
        if mesh_dim is None and self.ndim > 1:
            raise RuntimeError(f"Found the DeviceMesh have {self.ndim} dimensions",
                               "Optional kwarg `mesh_dim` needs to be specified when "
                               "device_mesh.ndim > 1.")
        return self._groups[self._dim(mesh_dim)]

    def get_all_groups(self):
        return list(self._groups)

    def __getitem__(self, names):
        """The sub-mesh of the named dimensions through this rank."""
        if isinstance(names, str):
            names = (names,)
        dims = [self._dim(n) for n in names]
        if self._coordinate is None:
            raise RuntimeError("this rank is not part of the mesh")
        index = tuple(slice(None) if d in dims else self._coordinate[d]
                      for d in range(self.ndim))
        sub = np.transpose(self._mesh[index], [sorted(dims).index(d) for d in dims])
        return DeviceMesh(self.device_type, sub, mesh_dim_names=tuple(names),
                          _groups=[self._groups[d] for d in dims])

    def __eq__(self, other):
        return isinstance(other, DeviceMesh) and self.device_type == other.device_type \
            and np.array_equal(self._mesh, other._mesh) \
            and self.mesh_dim_names == other.mesh_dim_names

    def __hash__(self):
        return hash((self.device_type, self._mesh.tobytes(), self._mesh.shape,
                     self.mesh_dim_names))

    def __repr__(self):
        names = f", mesh_dim_names={self.mesh_dim_names}" if self.mesh_dim_names else ""
        return f"DeviceMesh('{self.device_type}', {self._mesh.tolist()}{names})"


def init_device_mesh(device_type, mesh_shape, *, mesh_dim_names=None, backend_override=None):
    """A :class:`DeviceMesh` of ``mesh_shape`` over all ranks (0..world_size-1 in row-major
    order), starting the default process group if needed."""
    from ember import distributed as dist
    mesh_shape = tuple(mesh_shape)
    if mesh_dim_names is not None and len(set(mesh_dim_names)) != len(mesh_dim_names):
        raise RuntimeError("Each mesh_dim_name must be unique.",
                           f"Found repeated mesh_dim_name in mesh_dim_names {mesh_dim_names}")
    if device_type.startswith(("cuda:", "cpu:")):
        raise RuntimeError(f"Device type with index is not supported but got {device_type}. "
                           "If you maintained a 'torch.device' object, it's recommended to "
                           "pass in 'device.type'.")
    if not dist.is_initialized():
        dist.init_process_group()
    world = dist.get_world_size()
    if int(np.prod(mesh_shape)) != world:
        raise RuntimeError(f"Mesh should not be bigger than default world size {world}, but "
                           f"found {int(np.prod(mesh_shape))} ranks!" if np.prod(mesh_shape)
                           > world else f"the mesh {mesh_shape} does not cover the {world} "
                           "ranks")
    return DeviceMesh(device_type, np.arange(world).reshape(mesh_shape),
                      mesh_dim_names=mesh_dim_names)
