"""``torch.distributed.tensor.placement_types``: how a DTensor's data lies along each
dimension of its device mesh — split (:class:`Shard`), whole on every rank
(:class:`Replicate`) or a partial value still to be reduced (:class:`Partial`)."""

__all__ = ["Placement", "Shard", "Replicate", "Partial"]


class Placement:
    """The base of the placements."""

    def is_shard(self, dim=None):
        return False

    def is_replicate(self):
        return False

    def is_partial(self, reduce_op=None):
        return False


class Shard(Placement):
    """The tensor is split along ``dim`` into as many chunks as the mesh dimension has
    ranks, as ``torch.chunk`` splits it (the last chunks may be smaller or empty)."""

    def __init__(self, dim):
        self.dim = dim

    def is_shard(self, dim=None):
        return dim is None or dim == self.dim

    @staticmethod
    def local_shard_size_and_offset(curr_local_size, num_chunks, rank):
        """(size, offset) of chunk ``rank`` when ``curr_local_size`` elements are split in
        ``num_chunks`` as ``torch.chunk`` does; an empty chunk's offset is the size."""
        if curr_local_size % num_chunks == 0:
            full = curr_local_size // num_chunks
            return full, full * rank
        full = -(-curr_local_size // num_chunks)
        start = full * rank
        if start >= curr_local_size:
            return 0, curr_local_size
        return min(full, curr_local_size - start), start

    _local_shard_size_and_offset = local_shard_size_and_offset

    def __eq__(self, other):
        return type(other) is type(self) and other.dim == self.dim

    def __hash__(self):
        return hash((type(self).__name__, self.dim))

    def __repr__(self):
        return f"Shard(dim={self.dim})"

    def __str__(self):
        return f"S({self.dim})"


class _StridedShard(Shard):
    """A shard of a dimension that was split ``split_factor`` times first (fused
    projections): the local data is one chunk of each of the ``split_factor`` pieces.
    ember can describe this placement; redistributing it is not implemented."""

    def __init__(self, dim, split_factor):
        super().__init__(dim)
        self.split_factor = split_factor

    def __eq__(self, other):
        return type(other) is type(self) and (other.dim, other.split_factor) == \
            (self.dim, self.split_factor)

    def __hash__(self):
        return hash((type(self).__name__, self.dim, self.split_factor))

    def __repr__(self):
        return f"_StridedShard(dim={self.dim}, sf={self.split_factor})"


class Replicate(Placement):
    """Every rank of the mesh dimension holds the whole tensor."""

    def is_replicate(self):
        return True

    def __eq__(self, other):
        return type(other) is Replicate

    def __hash__(self):
        return hash("Replicate")

    def __repr__(self):
        return "Replicate()"

    def __str__(self):
        return "R"


class Partial(Placement):
    """Each rank holds a partial value; the tensor is their reduction (``reduce_op``:
    ``"sum"``, ``"avg"``, ``"max"`` or ``"min"``)."""

    def __init__(self, reduce_op="sum"):
        self.reduce_op = reduce_op

    def is_partial(self, reduce_op=None):
        return reduce_op is None or reduce_op == self.reduce_op

    def __eq__(self, other):
        return type(other) is Partial and other.reduce_op == self.reduce_op

    def __hash__(self):
        return hash(("Partial", self.reduce_op))

    def __repr__(self):
        return f"Partial({self.reduce_op})"

    def __str__(self):
        return f"P({self.reduce_op})"
