"""``torch.utils._pytree``: nested containers flattened into leaves and a spec.

Lists, tuples, namedtuples, dicts, ``OrderedDict``, ``defaultdict``, ``deque`` and
``torch.Size`` are containers; every other object (``None`` too) is a leaf, unless
its type is registered with :func:`register_pytree_node`. Dicts flatten in insertion
order, as torch's do.
"""
import collections
import dataclasses

from ember._tensor import Size as _Size

__all__ = ["TreeSpec", "LeafSpec", "register_pytree_node", "tree_flatten",
           "tree_unflatten", "tree_leaves", "tree_structure", "tree_map", "tree_map_",
           "tree_map_only", "tree_all", "tree_any", "tree_all_only", "tree_any_only",
           "tree_iter", "tree_flatten_with_path", "tree_leaves_with_path", "keystr",
           "SequenceKey", "MappingKey", "GetAttrKey", "treespec_pprint", "tree_is_leaf",
           "is_namedtuple", "PyTree"]

PyTree = object  # the annotation libraries import


@dataclasses.dataclass(frozen=True)
class _Node:
    flatten: object    # obj -> (children, context)
    unflatten: object  # (children, context) -> obj
    with_keys: object = None

    # torch's NodeDef field names, which libraries read (Lightning's own flatten)
    flatten_fn = property(lambda self: self.flatten)
    unflatten_fn = property(lambda self: self.unflatten)
    flatten_with_keys_fn = property(lambda self: self.with_keys)


SUPPORTED_NODES = {}


def register_pytree_node(cls, flatten_fn, unflatten_fn, *, serialized_type_name=None,
                         to_dumpable_context=None, from_dumpable_context=None,
                         flatten_with_keys_fn=None):
    """Make instances of ``cls`` containers: ``flatten_fn(obj) -> (children, context)``
    and ``unflatten_fn(children, context) -> obj``."""
    if cls in SUPPORTED_NODES:
        raise ValueError(f"{cls} is already registered as pytree node.")
    SUPPORTED_NODES[cls] = _Node(flatten_fn, unflatten_fn, flatten_with_keys_fn)


_register_pytree_node = register_pytree_node


def is_namedtuple(obj):
    """True for a namedtuple class or instance."""
    cls = obj if isinstance(obj, type) else type(obj)
    return issubclass(cls, tuple) and hasattr(cls, "_fields")


def _node_type(obj):
    cls = type(obj)
    if cls in SUPPORTED_NODES:
        return cls
    if is_namedtuple(cls):
        return collections.namedtuple
    return None


def _get_node_type(tree):
    """The key of ``tree``'s kind in ``SUPPORTED_NODES``: ``collections.namedtuple`` for
    a namedtuple, else its type (which may not be a registered node)."""
    return collections.namedtuple if is_namedtuple(type(tree)) else type(tree)


def _namedtuple_flatten(t):
    return list(t), type(t)


register_pytree_node(tuple, lambda t: (list(t), None), lambda c, _: tuple(c))
register_pytree_node(list, lambda t: (list(t), None), lambda c, _: list(c))
register_pytree_node(dict, lambda d: (list(d.values()), list(d.keys())),
                     lambda c, keys: dict(zip(keys, c)))
register_pytree_node(collections.namedtuple, _namedtuple_flatten,
                     lambda c, cls: cls(*c))
register_pytree_node(collections.OrderedDict,
                     lambda d: (list(d.values()), list(d.keys())),
                     lambda c, keys: collections.OrderedDict(zip(keys, c)))
register_pytree_node(collections.defaultdict,
                     lambda d: (list(d.values()), [d.default_factory, list(d.keys())]),
                     lambda c, ctx: collections.defaultdict(ctx[0], zip(ctx[1], c)))
register_pytree_node(_Size, lambda t: (list(t), None), lambda c, _: _Size(c))
register_pytree_node(collections.deque,
                     lambda d: (list(d), d.maxlen),
                     lambda c, maxlen: collections.deque(c, maxlen=maxlen))


def tree_is_leaf(tree, is_leaf=None):
    """True if ``tree`` is a leaf (not a registered container, or ``is_leaf`` says so)."""
    if is_leaf is not None and is_leaf(tree):
        return True
    return _node_type(tree) is None


class TreeSpec:
    """The structure of a flattened tree: its node type, the node's context (dict keys,
    namedtuple class...) and one spec per child; a leaf's type is None."""

    def __init__(self, type, context, children_specs):
        self.type = type
        self.context = context
        self.children_specs = list(children_specs)
        self.num_leaves = (1 if type is None and not self.children_specs
                           else sum(c.num_leaves for c in self.children_specs))
        self.num_nodes = 1 + sum(c.num_nodes for c in self.children_specs)
        self.num_children = len(self.children_specs)

    def is_leaf(self):
        """True for the spec of a single leaf."""
        return self.type is None

    def children(self):
        """The children's specs."""
        return list(self.children_specs)

    def child(self, index):
        """One child's spec."""
        return self.children_specs[index]

    def unflatten(self, leaves):
        """Rebuild the tree from its leaves (``tree_unflatten(leaves, self)``)."""
        return tree_unflatten(leaves, self)

    def flatten_up_to(self, tree):
        """The subtrees of ``tree`` that stand where this spec has leaves."""
        out = []

        def walk(spec, node):
            if spec.is_leaf():
                out.append(node)
                return
            kind = _node_type(node)
            if kind is None or (kind is not spec.type and not (
                    spec.type is collections.namedtuple and is_namedtuple(node))):
                raise ValueError(f"Node type mismatch; expected {spec.type}, but got "
                                 f"{type(node)}.")
            children, context = SUPPORTED_NODES[kind].flatten(node)
            if len(children) != spec.num_children or context != spec.context:
                raise ValueError("Node arity or context mismatch; expected "
                                 f"{spec.num_children} children with context "
                                 f"{spec.context!r}, got {len(children)} and {context!r}.")
            for c, s in zip(children, spec.children_specs):
                walk(s, c)
        walk(self, tree)
        return out

    def __eq__(self, other):
        if not isinstance(other, TreeSpec):
            return NotImplemented
        return (self.type == other.type and self.context == other.context
                and self.children_specs == other.children_specs)

    def __hash__(self):
        return hash((self.type, repr(self.context), tuple(self.children_specs)))

    def __repr__(self):
        if self.is_leaf():
            return "*"
        name = getattr(self.type, "__name__", str(self.type))
        kids = ", ".join(repr(c) for c in self.children_specs)
        return f"TreeSpec({name}, {self.context!r}, [{kids}])"


def LeafSpec():
    """The spec of a single leaf."""
    return TreeSpec(None, None, [])


def _flatten(tree, is_leaf, leaves):
    if tree_is_leaf(tree, is_leaf):
        leaves.append(tree)
        return LeafSpec()
    kind = _node_type(tree)
    children, context = SUPPORTED_NODES[kind].flatten(tree)
    return TreeSpec(kind, context, [_flatten(c, is_leaf, leaves) for c in children])


def tree_flatten(tree, is_leaf=None):
    """``(leaves, spec)``: the leaves in order and the structure to rebuild ``tree``."""
    leaves = []
    spec = _flatten(tree, is_leaf, leaves)
    return leaves, spec


def tree_unflatten(leaves, treespec):
    """Rebuild a tree from ``leaves`` and the spec :func:`tree_flatten` returned."""
    if not isinstance(treespec, TreeSpec):
        raise TypeError(f"tree_unflatten(leaves, treespec): Expected `treespec` to be "
                        f"instance of TreeSpec but got item of type {type(treespec)}.")
    leaves = list(leaves)
    if len(leaves) != treespec.num_leaves:
        raise ValueError(f"treespec.unflatten(leaves): `leaves` has length {len(leaves)} "
                         f"but the spec refers to a pytree that holds "
                         f"{treespec.num_leaves} items ({treespec}).")
    it = iter(leaves)

    def build(spec):
        if spec.is_leaf():
            return next(it)
        children = [build(c) for c in spec.children_specs]
        return SUPPORTED_NODES[spec.type].unflatten(children, spec.context)
    return build(treespec)


def tree_leaves(tree, is_leaf=None):
    """The leaves of ``tree``, in flattening order."""
    return tree_flatten(tree, is_leaf)[0]


def tree_iter(tree, is_leaf=None):
    """Iterate over the leaves of ``tree``."""
    return iter(tree_leaves(tree, is_leaf))


def tree_structure(tree, is_leaf=None):
    """The spec of ``tree``."""
    return tree_flatten(tree, is_leaf)[1]


def tree_map(func, tree, *rests, is_leaf=None):
    """A tree of ``func`` applied to the leaves (of ``tree`` and of the trees in
    ``rests``, which must have ``tree``'s structure at least down to its leaves)."""
    leaves, spec = tree_flatten(tree, is_leaf)
    others = [spec.flatten_up_to(r) for r in rests]
    return tree_unflatten([func(*xs) for xs in zip(leaves, *others)], spec)


def tree_map_(func, tree, *rests, is_leaf=None):
    """Call ``func`` on every leaf for its side effects; return ``tree``."""
    leaves, spec = tree_flatten(tree, is_leaf)
    others = [spec.flatten_up_to(r) for r in rests]
    for xs in zip(leaves, *others):
        func(*xs)
    return tree


def _type_filter(type_or_types, func):
    def apply(x):
        return func(x) if isinstance(x, type_or_types) else x
    return apply


def tree_map_only(type_or_types, func, tree, is_leaf=None):
    """:func:`tree_map` over the leaves that are instances of ``type_or_types``."""
    return tree_map(_type_filter(type_or_types, func), tree, is_leaf=is_leaf)


def tree_all(pred, tree, is_leaf=None):
    """True if ``pred`` holds for every leaf."""
    return all(map(pred, tree_leaves(tree, is_leaf)))


def tree_any(pred, tree, is_leaf=None):
    """True if ``pred`` holds for some leaf."""
    return any(map(pred, tree_leaves(tree, is_leaf)))


def tree_all_only(type_or_types, pred, tree, is_leaf=None):
    """:func:`tree_all` over the leaves of the given types."""
    return all(pred(x) for x in tree_leaves(tree, is_leaf) if isinstance(x, type_or_types))


def tree_any_only(type_or_types, pred, tree, is_leaf=None):
    """:func:`tree_any` over the leaves of the given types."""
    return any(pred(x) for x in tree_leaves(tree, is_leaf) if isinstance(x, type_or_types))


# ----- paths -----------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class SequenceKey:
    """A position in a list or tuple."""
    idx: int

    def __str__(self):
        return f"[{self.idx!r}]"

    def get(self, sequence):
        return sequence[self.idx]


@dataclasses.dataclass(frozen=True)
class MappingKey:
    """A key of a dict."""
    key: object

    def __str__(self):
        return f"[{self.key!r}]"

    def get(self, mapping):
        return mapping[self.key]


@dataclasses.dataclass(frozen=True)
class GetAttrKey:
    """A field of a namedtuple or object."""
    name: str

    def __str__(self):
        return f".{self.name}"

    def get(self, obj):
        return getattr(obj, self.name)


def _child_keys(tree, kind, context, n):
    node = SUPPORTED_NODES[kind]
    if node.with_keys is not None:
        return [k for k, _ in node.with_keys(tree)[0]]
    if kind is collections.namedtuple:
        return [GetAttrKey(f) for f in type(tree)._fields]
    if kind in (dict, collections.OrderedDict):
        return [MappingKey(k) for k in context]
    if kind is collections.defaultdict:
        return [MappingKey(k) for k in context[1]]
    return [SequenceKey(i) for i in range(n)]


def tree_flatten_with_path(tree, is_leaf=None):
    """``([(path, leaf), ...], spec)``; a path is a tuple of keys."""
    out = []

    def walk(node, path):
        if tree_is_leaf(node, is_leaf):
            out.append((path, node))
            return
        kind = _node_type(node)
        children, context = SUPPORTED_NODES[kind].flatten(node)
        for key, child in zip(_child_keys(node, kind, context, len(children)), children):
            walk(child, path + (key,))
    walk(tree, ())
    return out, tree_structure(tree, is_leaf)


def tree_leaves_with_path(tree, is_leaf=None):
    """``[(path, leaf), ...]``."""
    return tree_flatten_with_path(tree, is_leaf)[0]


def keystr(kp):
    """A path as text: ``[0]['a'].b``."""
    return "".join(str(k) for k in kp)


def treespec_pprint(treespec):
    """The spec as text."""
    return repr(treespec)


# torch's per-type flatten helpers, which libraries pass to register_pytree_node for their
# own dict-like classes (transformers' ModelOutput)
def _dict_flatten(d):
    return list(d.values()), list(d.keys())


def _dict_unflatten(values, context):
    return dict(zip(context, values))


def _dict_flatten_with_keys(d):
    values, context = _dict_flatten(d)
    return [(MappingKey(k), v) for k, v in zip(context, values)], context


def _list_flatten(d):
    return d, None


def _list_unflatten(values, context):
    return list(values)


def _list_flatten_with_keys(d):
    return [(SequenceKey(i), v) for i, v in enumerate(d)], None


def _tuple_flatten(d):
    return list(d), None


def _tuple_unflatten(values, context):
    return tuple(values)


def _tuple_flatten_with_keys(d):
    return [(SequenceKey(i), v) for i, v in enumerate(d)], None
