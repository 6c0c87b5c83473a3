"""A minimal pytree for ember.func: nested tuples, lists and dicts whose leaves are tensors
(or anything else, passed through).  torch.func accepts such containers wherever it takes a
tensor (``grad`` w.r.t. a dict of parameters is the common case)."""


def flatten(tree):
    """Return ``(leaves, spec)``; ``unflatten(leaves, spec)`` rebuilds ``tree``."""
    leaves = []

    def walk(node):
        if isinstance(node, (tuple, list)):
            return (type(node), [walk(c) for c in node])
        if isinstance(node, dict):
            return (dict, [(k, walk(v)) for k, v in node.items()])
        leaves.append(node)
        return None

    return leaves, walk(tree)


def unflatten(leaves, spec):
    """Inverse of :func:`flatten`."""
    it = iter(leaves)

    def build(s):
        if s is None:
            return next(it)
        kind, children = s
        if kind is dict:
            return {k: build(c) for k, c in children}
        items = [build(c) for c in children]
        # namedtuples take their fields positionally
        return kind(*items) if hasattr(kind, "_fields") else kind(items)

    return build(spec)


def tree_map(fn, tree):
    """Apply ``fn`` to every leaf of ``tree``."""
    leaves, spec = flatten(tree)
    return unflatten([fn(x) for x in leaves], spec)
