"""``DistributedDataParallel``: data-parallel training over the processes of
``ember.distributed`` (MPI).

At construction rank 0's parameters and buffers are broadcast to every rank. During
backward, each parameter's gradient is copied into a flat bucket as soon as it is
final; buckets are filled in reverse registration order (the order backward produces
gradients in) and each is all-reduced with a nonblocking MPI collective as soon as it
is full, while backward goes on. At the end of backward (an engine callback) the
buckets are waited for, averaged and written back to ``.grad``.

A gradient is final when every use of the parameter in the forward pass has delivered
its part: the forward pass's graph is walked once per step to count those uses (ember
accumulates a leaf's gradient once per use, where PyTorch sums first). Buckets start
in bucket order on every rank, because MPI needs every rank to start collectives in
the same order.
"""
import contextlib
import zlib

import numpy as np

from ember._tensor import Tensor, _make
from ember.autograd import engine
from ember.autograd.grad_mode import state as _grad_state
from ember.nn.modules.module import Module

__all__ = ["DistributedDataParallel"]

_FIRST_BUCKET_BYTES = 1024 * 1024

_UNUSED_ERROR = (
    "Expected to have finished reduction in the prior iteration before starting a new one. "
    "This error indicates that your module has parameters that were not used in producing "
    "loss. You can enable unused parameter detection by passing the keyword argument "
    "`find_unused_parameters=True` to `torch.nn.parallel.DistributedDataParallel`, and by \n"
    "making sure all `forward` function outputs participate in calculating loss. \n"
    "If you already have done the above, then the distributed data parallel module wasn't "
    "able to locate the output tensors in the return value of your module's `forward` "
    "function. Please include the loss function and the structure of the return value of "
    "`forward` of your module when reporting this issue (e.g. list, dict, iterable).\n"
    "Parameters which did not receive grad for rank {rank}: {names}")


def _tensors(obj, out):
    if isinstance(obj, Tensor):
        out.append(obj)
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            _tensors(o, out)
    elif isinstance(obj, dict):
        for o in obj.values():
            _tensors(o, out)
    return out


def _count_uses(outputs, ids):
    """Which parameters (by id) get a gradient from ``outputs``: 1 for those, else 0.
    A parameter's post-accumulate hook runs once per backward pass, after all its
    gradients are summed (PyTorch's AccumulateGrad), however many times it was used."""
    counts = dict.fromkeys(ids, 0)
    stack = []
    seen = set()
    for t in _tensors(outputs, []):
        if t.grad_fn is None:
            if id(t) in counts:
                counts[id(t)] = 1
        elif t.grad_fn not in seen:
            seen.add(t.grad_fn)
            stack.append(t.grad_fn)
    while stack:
        for e in stack.pop()._edges:
            if e is None:
                continue
            if type(e) is tuple:
                if e[0] not in seen:
                    seen.add(e[0])
                    stack.append(e[0])
            elif id(e) in counts:
                counts[id(e)] = 1
    return counts


class _Bucket:
    __slots__ = ("params", "offsets", "flat", "pending", "requests", "after", "seq")

    def __init__(self, params, dtype):
        self.params = params
        self.offsets = []
        off = 0
        for p in params:
            self.offsets.append(off)
            off += p.numel()
        self.flat = np.zeros(off, dtype)
        self.pending = 0
        self.requests = None
        self.after = None
        self.seq = None


class DistributedDataParallel(Module):
    """Wrap ``module`` so that ``backward`` averages gradients over the processes of
    ``process_group`` (the default group): every rank ends each step with the same
    gradients, the ones one process would get from the whole (combined) batch.

    ``device_ids``, ``output_device`` and ``static_graph`` are accepted; ember runs on
    CPU tensors. ``gradient_as_bucket_view=True`` makes each ``.grad`` a view of its
    bucket after the all-reduce. ``no_sync()`` skips the all-reduce (gradient
    accumulation); ``find_unused_parameters=True`` allows parameters that get no
    gradient in a step.

    >>> model = DistributedDataParallel(nn.Linear(4, 2))   # doctest: +SKIP
    """

    def __init__(self, module, device_ids=None, output_device=None, dim=0,
                 broadcast_buffers=True, process_group=None, bucket_cap_mb=None,
                 find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False,
                 delay_all_reduce_named_params=None, param_to_hook_all_reduce=None,
                 mixed_precision=None, device_mesh=None):
        super().__init__()
        from ember.distributed import _pg
        if device_mesh is not None or mixed_precision is not None:
            raise NotImplementedError("DistributedDataParallel: device_mesh and "
                                      "mixed_precision are not implemented in ember")
        pg = _pg.resolve(process_group)
        if pg is None:
            raise ValueError("DistributedDataParallel: this rank is not in process_group")
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        if not named:
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't "
                               "have any parameter that requires a gradient.")
        self.module = module
        self.process_group = pg
        self.device_ids = device_ids
        self.output_device = output_device
        self.dim = dim
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.static_graph = static_graph
        self.bucket_bytes_cap = int((25 if bucket_cap_mb is None else bucket_cap_mb)
                                    * 1024 * 1024)
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        self._params = [p for _, p in named]
        self._names = {id(p): n for n, p in named}
        self._check_same_model(named)
        self._sync_module_states()
        self._buckets, self._bucket_of = self._make_buckets()
        self._hooks = [p.register_post_accumulate_grad_hook(self._grad_ready)
                       for p in self._params]
        self._reset_step()
        self._error = None

    # ---- construction
    def _check_same_model(self, named):
        from ember.distributed._collectives import agree
        pg = self.process_group
        desc = [(n, tuple(p.shape), str(p.dtype)) for n, p in named]
        code = zlib.crc32(repr(desc).encode())
        total = sum(p.numel() for _, p in named)
        agree(pg, pg.next_seq(), "broadcast", np.uint8, (code,), root=0,
              detail=f"DistributedDataParallel({len(named)} parameters, {total} elements)")

    def _sync_module_states(self):
        tensors = [p for p in self.module.parameters()] + \
            [b for b in self.module.buffers() if b is not None]
        self._broadcast_coalesced(tensors)

    def _broadcast_coalesced(self, tensors):
        """Broadcast ``tensors`` from rank 0: one flat message per dtype."""
        from ember.distributed._collectives import _bytes
        pg = self.process_group
        by_dtype = {}
        for t in tensors:
            by_dtype.setdefault(t._data.dtype.str, []).append(t)
        for key in sorted(by_dtype):
            group = by_dtype[key]
            flat = np.concatenate([t._data.reshape(-1) for t in group])
            seq = pg.next_seq()
            pg.wait([pg.comm.Ibcast(_bytes(flat), root=0)], "broadcast", seq)
            off = 0
            for t in group:
                n = t._data.size
                t._data[...] = flat[off:off + n].reshape(t._data.shape)
                t._vc[0] += 1
                off += n

    def _make_buckets(self):
        # as PyTorch: the first bucket is small (1 MB), so that its all-reduce starts
        # early in backward; the others hold up to bucket_cap_mb
        buckets = []
        current = {}
        for p in reversed(self._params):
            key = p._data.dtype.str
            group = current.setdefault(key, [])
            group.append(p)
            cap = min(_FIRST_BUCKET_BYTES, self.bucket_bytes_cap) if not buckets else \
                self.bucket_bytes_cap
            if sum(q._data.nbytes for q in group) >= cap:
                buckets.append(_Bucket(group, p._data.dtype))
                current[key] = []
        for group in current.values():
            if group:
                buckets.append(_Bucket(group, group[0]._data.dtype))
        bucket_of = {}
        for b, bucket in enumerate(buckets):
            for i, p in enumerate(bucket.params):
                bucket_of[id(p)] = (b, i)
        return buckets, bucket_of

    # ---- one step
    def _reset_step(self):
        self._uses = None
        self._ready = set()
        self._fired = set()
        self._next = 0
        self._queued = False
        for b in self._buckets:
            b.pending = len(b.params)
            b.requests = None

    def forward(self, *inputs, **kwargs):
        if self._error is not None:
            err, self._error = self._error, None
            raise RuntimeError(err)
        syncing = _grad_state.grad_enabled and self.require_backward_grad_sync
        if syncing and self.require_forward_param_sync and self.broadcast_buffers:
            bufs = [b for b in self.module.buffers() if b is not None]
            if bufs:
                self._broadcast_coalesced(bufs)
        out = self.module(*inputs, **kwargs)
        if syncing:
            self._reset_step()
            self._uses = _count_uses(out, self._names)
            if self.find_unused_parameters:
                for p in self._params:
                    if self._uses[id(p)] == 0:
                        self._mark_ready(p, used=False)
        return out

    def _grad_ready(self, p):
        if self._uses is None or not self.require_backward_grad_sync:
            return  # no_sync, or a backward that no forward of this wrapper prepared
        if not self._queued:
            self._queued = True
            engine.queue_callback(self._finish_backward)
        self._fired.add(id(p))
        left = self._uses[id(p)] - 1
        self._uses[id(p)] = left
        if left == 0:
            self._mark_ready(p, used=True)
        elif left < 0:
            raise RuntimeError(
                f"Expected to mark a variable ready only once. Parameter "
                f"{self._names[id(p)]} received more gradients in this backward than its "
                "uses in the last forward of DistributedDataParallel: it was used outside "
                "the wrapped module's forward, or several forwards shared one backward. "
                "Call the DDP module once per backward and compute the loss from its "
                "output.")
        self._progress()

    def _progress(self):
        """Let MPI move the buckets in flight: without a progress thread, a nonblocking
        collective advances only while its process calls into MPI."""
        from ember.distributed._mpi import mpi
        testall = mpi().Request.Testall
        for bucket in self._buckets[:self._next]:
            if bucket.requests:
                testall(bucket.requests)

    def _mark_ready(self, p, used):
        if id(p) in self._ready:
            return
        self._ready.add(id(p))
        b, i = self._bucket_of[id(p)]
        bucket = self._buckets[b]
        off = bucket.offsets[i]
        n = p._data.size
        if used and p._grad is not None:
            bucket.flat[off:off + n] = p._grad._data.reshape(-1)
        else:
            bucket.flat[off:off + n] = 0
        bucket.pending -= 1
        self._launch_ready()

    def _launch_ready(self):
        from ember.distributed._collectives import RedOpType, start_all_reduce
        pg = self.process_group
        while self._next < len(self._buckets) and self._buckets[self._next].pending == 0:
            bucket = self._buckets[self._next]
            bucket.seq = pg.next_seq()
            bucket.requests, bucket.after = start_all_reduce(pg, bucket.flat, RedOpType.SUM)
            self._next += 1

    def _finish_backward(self):
        pg = self.process_group
        # how many buckets were already on their way when backward ended (for tests)
        self._launched_before_end = self._next
        for p in self._params:
            if id(p) in self._fired and id(p) not in self._ready:
                # a use that delivered no gradient (a None from a backward formula): what
                # arrived is the whole gradient
                self._mark_ready(p, used=True)
        missing = [p for p in self._params if id(p) not in self._ready]
        if missing:
            # parameters that got no gradient in this step
            names = ", ".join(self._names[id(p)] for p in missing)
            if not self.find_unused_parameters:
                self._error = _UNUSED_ERROR.format(rank=pg.rank(), names=names)
                self._uses = None
                return
            for p in missing:
                self._mark_ready(p, used=p._grad is not None)
        used = self._globally_used()
        world = pg.size()
        for bucket in self._buckets:
            pg.wait(bucket.requests, "all_reduce (DistributedDataParallel gradients)",
                    bucket.seq)
            bucket.after()
            np.divide(bucket.flat, world, out=bucket.flat, casting="unsafe")
            for p, off in zip(bucket.params, bucket.offsets):
                if used is not None and not used[id(p)]:
                    continue  # unused on every rank: its .grad stays as it was, as PyTorch
                n = p._data.size
                view = bucket.flat[off:off + n].reshape(p._data.shape)
                if self.gradient_as_bucket_view:
                    p._grad = _make(view)
                elif p._grad is None:
                    p._grad = _make(view.copy())
                else:
                    p._grad._data[...] = view
                    p._grad._vc[0] += 1
        self._uses = None

    def _globally_used(self):
        """With find_unused_parameters: which parameters some rank used (by id)."""
        if not self.find_unused_parameters:
            return None
        from ember.distributed._collectives import RedOpType, start_all_reduce
        pg = self.process_group
        flags = np.array([p._grad is not None for p in self._params], np.uint8)
        seq = pg.next_seq()
        reqs, after = start_all_reduce(pg, flags, RedOpType.MAX)
        pg.wait(reqs, "all_reduce (DistributedDataParallel unused parameters)", seq)
        after()
        return {id(p): bool(f) for p, f in zip(self._params, flags)}

    @contextlib.contextmanager
    def no_sync(self):
        """Within this context backward accumulates gradients locally, without the
        all-reduce; the first backward after it averages the accumulated gradients."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    def join(self, divide_by_initial_world_size=True, enable=True,
             throw_on_early_termination=False):
        """Uneven inputs across ranks (PyTorch's ``join``) are not implemented."""
        raise NotImplementedError("DistributedDataParallel.join (uneven inputs) is not "
                                  "implemented in ember: give every rank the same number of "
                                  "batches (DistributedSampler with drop_last=True does)")

    def register_comm_hook(self, state, hook):
        raise NotImplementedError("DistributedDataParallel.register_comm_hook is not "
                                  "implemented in ember")

    def _set_static_graph(self):
        self.static_graph = True
