"""``torch.utils.flop_counter``: ``FlopCounterMode`` counts the floating-point operations
of the matrix products, convolutions and attention a block runs, forward and backward,
as torch counts them (two per multiply-add), by module.

The counter is a mode on ember's mode stack (``ember.autograd._modes``): it sees each
primitive call, counts the products among them from their operands' shapes, and
remembers the node a counted call left in the graph; when the backward pass runs that
node's step, the step's products are counted from the same shapes and the gradients the
step computes (a product's input that needs no gradient costs nothing). Counts are kept
under ``"Global"`` and under every module running at the time (torch's names: the
outermost module's class name, then ``parent.child`` attribute paths), backward steps
under the modules that ran their forward.

Counted as torch counts on CPU: ``mm``/``addmm`` (matrix products and ``linear``),
``bmm`` (batched ``matmul`` and the attention computed op by op),
``convolution`` and ``convolution_backward`` (also transposed), and no count for the
fused CPU attention kernel (torch 2.13 has no formula for it). Matrix-vector products
(``mv``, ``dot``) are not counted, as in torch. Formulas registered with
``register_flop_formula`` are kept but not used: they are keyed by torch's aten
operators, which ember does not have.
"""
__all__ = ["FlopCounterMode", "register_flop_formula", "flop_registry"]

from ember.autograd import _modes

flop_registry = {}


def register_flop_formula(targets, get_raw=False):
    """Record ``formula`` as the FLOP count of ``targets`` (decorator)."""
    def register(formula):
        for t in (targets if isinstance(targets, (list, tuple)) else [targets]):
            flop_registry[t] = formula
        return formula
    return register


class _Op(str):
    """An operator key of :meth:`FlopCounterMode.get_flop_counts` (``str`` gives torch's
    spelling, ``aten.mm``)."""

    def __repr__(self):
        return f"<OpOverloadPacket(op='{self}')>"

    @property
    def __name__(self):
        return str(self).split(".", 1)[1]


_OPS = {}


def _op(name):
    op = _OPS.get(name)
    if op is None:
        op = _OPS[name] = _Op("aten." + name)
    return op


def _prod(xs):
    out = 1
    for x in xs:
        out *= int(x)
    return out


def _shape(a):
    return tuple(a.shape)


def _batch_of(*shapes):
    import numpy as np
    return tuple(np.broadcast_shapes(*shapes)) if shapes else ()


def _matmul_cost(a, b):
    """(op name, forward flops, per-operand gradient flops) of ``a @ b``, or None where
    torch runs a matrix-vector product it does not count."""
    sa, sb = _shape(a), _shape(b)
    if len(sb) < 2:
        return None
    if len(sa) == 1:
        sa = (1,) + sa
    m, k, n = sa[-2], sa[-1], sb[-1]
    if len(sb) == 2:
        rows = _prod(sa[:-1])
        flops = 2 * rows * k * n
        return "mm", flops, (flops, flops)
    flops = 2 * _prod(_batch_of(sa[:-2], sb[:-2])) * m * k * n
    return "bmm", flops, (flops, flops)


def _cost(cls, args):
    """(forward op, forward flops, backward op, a function of the step's input edges
    giving the backward flops) for a counted primitive call, else None."""
    from ember.nn import functional_attention as _fa  # noqa: F401 - the classes below
    from ember.ops import attention, conv, linalg, matmul_graph, nn_fused
    if issubclass(cls, linalg.MatMul):
        found = _matmul_cost(args[0], args[1])
        if found is None:
            return None
        name, flops, grads = found
        return name, flops, name, _per_input(grads, (0, 1))
    if issubclass(cls, matmul_graph.Addmm):
        flops = 2 * _prod(_shape(args[1])) * _shape(args[2])[-1]
        return "addmm", flops, "mm", _per_input((flops, flops), (1, 2))
    if issubclass(cls, nn_fused._Linear):
        x, w, b = args[0], args[1], args[2]
        flops = 2 * _prod(_shape(x)) * _shape(w)[0]
        return ("addmm" if b is not None else "mm"), flops, "mm", _per_input(
            (flops, flops), (0, 1))
    if issubclass(cls, (conv.Conv, conv.ConvInput)):
        x, w, geometry = args[0], args[1], args[3]
        if issubclass(cls, conv.Conv):
            spatial = geometry.at(_shape(x)[2:]).O
        else:  # the transposed convolution: counted over its input's positions
            spatial = _shape(x)[2:]
        # two per multiply-add: each position of each sample sums C/G * prod(K)
        # products for each of the F filters
        flops = 2 * _shape(x)[0] * _prod(spatial) * _prod(_shape(w))
        # torch's formula for the weight's gradient counts every input channel against
        # every filter, groups or not: G times the forward
        groups = getattr(geometry, "G", 1)
        return "convolution", flops, "convolution_backward", _per_input(
            (flops, flops * groups), (0, 1))
    if issubclass(cls, attention.ScaledDotProductAttention):
        if issubclass(cls, attention.FlashAttentionForCpu) or args[4] is None:
            # where torch runs its fused CPU kernel (no dropout), which it does not count;
            # with dropout it runs the attention op by op, two bmm's
            return None
        q, k, v = (_shape(a) for a in args[:3])
        batch = _prod(_batch_of(q[:-2], k[:-2], v[:-2]))
        L, S, E, Ev = q[-2], k[-2], q[-1], v[-1]
        scores, mix = 2 * batch * L * S * E, 2 * batch * L * S * Ev

        def backward(edges):
            need = [i < len(edges) and edges[i] is not None for i in range(3)]
            return ((mix if need[0] or need[1] else 0) + (mix if need[2] else 0)
                    + (scores if need[0] else 0) + (scores if need[1] else 0))
        return "bmm", scores + mix, "bmm", backward
    return None


def _per_input(grads, positions):
    def backward(edges):
        return sum(g for g, i in zip(grads, positions)
                   if i < len(edges) and edges[i] is not None)
    return backward


class FlopCounterMode(_modes.Mode):
    """``with FlopCounterMode() as counter:`` counts the FLOPs run in the block (see the
    module docstring); ``display=True`` prints the table on exit, ``depth`` limits the
    module nesting it shows."""

    def __init__(self, mods=None, depth=2, display=True, custom_mapping=None):
        if custom_mapping:
            raise NotImplementedError(
                "FlopCounterMode(custom_mapping=...): formulas are keyed by torch's aten "
                "operators, which ember does not have")
        if mods is not None:
            import warnings
            warnings.warn("mods argument is not needed anymore, you can stop passing it",
                          stacklevel=2)
        self.depth = depth
        self.display = display
        self.flop_counts = {}
        self._parents = ["Global"]
        self._names = {}
        self._nodes = {}
        self._hooks = []

    # counting

    def _add(self, op, flops, parents):
        if not flops:
            return
        for name in dict.fromkeys(parents):
            counts = self.flop_counts.setdefault(name, {})
            counts[op] = counts.get(op, 0) + flops

    def op(self, cls, args, params):
        cost = _cost(cls, args)
        out = cls.apply(*args, **params)
        if cost is None:
            return out
        fwd, flops, bwd, backward = cost
        parents = tuple(self._parents)
        self._add(_op(fwd), flops, parents)
        first = out[0] if isinstance(out, tuple) else out
        node = getattr(first, "grad_fn", None)
        if node is not None and isinstance(node, cls):
            self._nodes[id(node)] = (node, _op(bwd), backward, parents)
        return out

    def node(self, node, grads, below):
        found = self._nodes.get(id(node))
        if found is not None and found[0] is node:
            _, op, backward, parents = found
            self._add(op, backward(getattr(node, "_edges", ())), parents)
        # the step's own products are counted above, not again as they run
        with _modes.hidden(self):
            return below()

    # module names

    def _name(self, module):
        name = self._names.get(id(module))
        if name is None:
            name = self._names[id(module)] = type(module).__name__
        for child_name, child in module.named_children():
            self._names.setdefault(id(child), f"{name}.{child_name}")
        return name

    def _enter_module(self, module, args):
        self._parents.append(self._name(module))

    def _leave_module(self, module, args, output):
        name = self._names.get(id(module))
        for i in range(len(self._parents) - 1, 0, -1):
            if self._parents[i] == name:
                del self._parents[i]
                break

    # results

    def get_total_flops(self):
        """All FLOPs counted (those under ``"Global"``)."""
        return sum(self.flop_counts.get("Global", {}).values())

    def get_flop_counts(self):
        """``{module name: {operator: flops}}``, ``"Global"`` holding every count."""
        return {name: dict(ops) for name, ops in self.flop_counts.items()}

    def get_table(self, depth=None):
        """The counts as a text table: each module to ``depth`` levels, its operators
        below it, FLOPs and share of the total."""
        depth = self.depth if depth is None else depth
        depth = 999999 if depth is None else depth
        total = self.get_total_flops()
        rows = []
        for name, ops in self.flop_counts.items():
            level = 0 if name == "Global" else name.count(".") + 1
            if level > depth:
                continue
            flops = sum(ops.values())
            share = flops / total * 100 if total else 0.0
            rows.append((" " * level + name, _human(flops), f"{share:.2f}%"))
            for op, count in ops.items():
                share = count / total * 100 if total else 0.0
                rows.append((" " * level + f" - {op}", _human(count), f"{share:.2f}%"))
        header = ("Module", "FLOP", "% Total")
        widths = [max(len(r[i]) for r in rows + [header]) for i in range(3)]
        lines = ["  ".join(h.ljust(w) if i == 0 else h.rjust(w)
                           for i, (h, w) in enumerate(zip(header, widths)))]
        lines.append("  ".join("-" * w for w in widths))
        for r in rows:
            lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                   for i, (c, w) in enumerate(zip(r, widths))))
        return "\n".join(lines)

    def __enter__(self):
        from ember.nn.modules import module as _module
        self.flop_counts.clear()
        self._nodes.clear()
        self._parents[:] = ["Global"]
        self._hooks = [_module.register_module_forward_pre_hook(self._enter_module),
                       _module.register_module_forward_hook(self._leave_module,
                                                            always_call=True)]
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            super().__exit__(*exc)
        finally:
            for h in self._hooks:
                h.remove()
            self._hooks = []
            self._nodes.clear()  # the graph's nodes are not kept alive past the block
        if self.display:
            print(self.get_table(self.depth))
        return False


def _human(n):
    """``1.2K``-style FLOP counts, as torch's table prints them."""
    for unit, size in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.3f}{unit}"
    return str(n)
