"""Pictures of computation: ``make_dot`` (torchviz's picture of the backward graph) and
``draw_module`` (a model's forward pass, layers as boxes with output shapes).

Both return a ``graphviz.Digraph`` (optional extra: ``pip install -e '.[viz]'``): its
``.source`` is DOT text, and ``.render(format="svg")`` or ``"png"`` draws it with
Graphviz's ``dot`` program (Debian: ``apt-get install graphviz``).
"""
from ember import _tensor
from ember.autograd.function import BackwardCFunction
from ember.utils._graph_capture import capture

__all__ = ["make_dot", "draw_module"]

# torchviz's look: gray op boxes, blue leaves, orange saved tensors, green outputs
_NODE_ATTR = dict(style="filled", shape="box", align="left", fontsize="10", ranksep="0.1",
                  height="0.2", fontname="monospace")


def _digraph(**kw):
    try:
        from graphviz import Digraph
    except ImportError:
        raise ImportError("ember.viz needs the graphviz Python package (and Graphviz's dot "
                          "to render): pip install -e '.[viz]'") from None
    return Digraph(**kw)


def _size(t):
    return "(" + ", ".join(str(int(v)) for v in t.shape) + ")"


def _saved(fn):
    """(name, value) pairs a node saved: PyTorch's ``_saved_*`` attributes where a node
    has them, else the tensors it keeps for backward (ember's own bookkeeping)."""
    # methods whose names begin ``_saved_`` (ember's own helpers) are not saved values
    out = [(a[len("_saved_"):], v) for a in dir(fn) if a.startswith("_saved_")
           and not callable(v := getattr(fn, a))]
    if out:
        return out
    from ember.autograd.node import Node
    try:
        saved = Node.saved_tensors.fget(fn)
    except (RuntimeError, AttributeError, TypeError):
        return []
    return [(f"saved[{i}]", t) for i, t in enumerate(saved) if isinstance(t, _tensor.Tensor)]


def _fn_label(fn, show_attrs, max_attr_chars):
    name = type(fn).__name__
    if not show_attrs:
        return name
    attrs = {k: ("[saved tensor]" if isinstance(v, _tensor.Tensor) else str(v))
             for k, v in _saved(fn)}
    if not attrs:
        return name
    width = max(max_attr_chars, 3)
    c1 = max(len(k) for k in attrs)
    c2 = min(max(len(v) for v in attrs.values()), width)

    def cut(s):
        return s[:c2 - 3] + "..." if len(s) > c2 else s
    rows = "\n".join(f"{k:<{c1}}: {cut(v):>{c2}}" for k, v in attrs.items())
    return name + "\n" + "-" * max(c1 + c2 + 2, len(name)) + "\n" + rows


def make_dot(var, params=None, show_attrs=False, show_saved=False, max_attr_chars=50):
    """Draw the backward graph that produced ``var`` (a Tensor or a tuple of them), as
    torchviz does: one gray box per backward node named as PyTorch names it
    (``MulBackward0``), blue boxes for leaves that require grad (named from ``params``,
    a dict name -> tensor, and with their shapes), green for the outputs, orange for
    saved tensors (``show_saved``) and node attributes when ``show_attrs``.

    >>> dot = make_dot(model(x).sum(), params=dict(model.named_parameters()))  # doctest: +SKIP
    >>> dot.render("graph", format="svg")                                       # doctest: +SKIP
    """
    param_map = {} if params is None else {id(v): k for k, v in params.items()}
    dot = _digraph(node_attr=dict(_NODE_ATTR), graph_attr=dict(size="12,12"))
    seen = set()

    def var_label(t, name=None):
        return f"{name or param_map.get(id(t), '')}\n {_size(t)}"

    def visit(fn):
        # a generator per node, so that a deep graph needs no Python recursion while
        # the DOT lines come out in torchviz's depth-first order
        if fn in seen:
            return
        seen.add(fn)
        if show_saved:
            for attr, val in _saved(fn):
                vals = [(attr, val)] if isinstance(val, _tensor.Tensor) else \
                    [(f"{attr}[{i}]", t) for i, t in enumerate(val)
                     if isinstance(t, _tensor.Tensor)] if isinstance(val, tuple) else []
                for name, t in vals:
                    seen.add(t)
                    dot.edge(str(id(fn)), str(id(t)), dir="none")
                    dot.node(str(id(t)), var_label(t, name), fillcolor="orange")
        if hasattr(fn, "variable"):
            v = fn.variable
            seen.add(v)
            dot.node(str(id(v)), var_label(v), fillcolor="lightblue")
            dot.edge(str(id(v)), str(id(fn)))
        dot.node(str(id(fn)), _fn_label(fn, show_attrs, max_attr_chars))
        for u, _ in fn.next_functions:
            if u is not None:
                dot.edge(str(id(u)), str(id(fn)))
                yield u
        if isinstance(fn, BackwardCFunction):  # a custom Function's saved tensors
            for t in fn.saved_tensors:
                seen.add(t)
                dot.edge(str(id(t)), str(id(fn)), dir="none")
                dot.node(str(id(t)), var_label(t), fillcolor="orange")

    def add_nodes(fn):
        stack = [visit(fn)]
        while stack:
            u = next(stack[-1], None)
            if u is None:
                stack.pop()
            else:
                stack.append(visit(u))

    def add_base_tensor(t, color="darkolivegreen1"):
        if t in seen:
            return
        seen.add(t)
        dot.node(str(id(t)), var_label(t), fillcolor=color)
        if t.grad_fn is not None:
            add_nodes(t.grad_fn)
            dot.edge(str(id(t.grad_fn)), str(id(t)))
        if t._is_view():
            add_base_tensor(t._base, color="darkolivegreen3")
            dot.edge(str(id(t._base)), str(id(t)), style="dotted")

    for t in (var if isinstance(var, tuple) else (var,)):
        add_base_tensor(t)
    # torchviz's resizing: about 0.15 inch per DOT line, at least 12
    size = max(12, len(dot.body) * 0.15)
    dot.graph_attr.update(size=f"{size},{size}")
    return dot


def draw_module(model, example):
    """Draw ``model``'s forward pass on ``example`` (a Tensor or a tuple of inputs):
    every op as a box labelled with its name and output shape, grouped in one frame
    per module call (``Linear[fc1]``), with inputs, parameters and outputs.

    >>> draw_module(net, torch.randn(1, 1, 28, 28)).render("net", format="png")  # doctest: +SKIP
    """
    cap = capture(model, example)
    dot = _digraph(node_attr=dict(_NODE_ATTR), graph_attr=dict(rankdir="TB"))
    clusters = {}  # (scope, call) -> boxes
    scopes = {op.scope for op in cap.ops}
    leaves = {s for s in scopes if not any(t.startswith(s + "/") for t in scopes)}
    calls, ran, last = {}, set(), None  # scope -> call number; scopes that ran an op

    def shape(op):
        return "" if op.shape is None else "(" + ", ".join(str(d) for d in op.shape) + ")"

    for op in cap.ops:
        key = f"n{op.key}"
        if op.kind == "input":
            dot.node(key, f"{op.name}\n{shape(op)}", fillcolor="darkolivegreen1")
            continue
        if op.kind == "output":
            dot.node(key, f"output\n{shape(op)}", fillcolor="darkolivegreen1")
        else:
            color = "lightblue" if op.kind == "param" else "lightgray"
            if op.kind == "op":
                if op.scope != last and op.scope in ran and op.scope in leaves:
                    # a module without submodules run again (ResNet's one ReLU, called
                    # twice): a frame per call
                    calls[op.scope] += 1
                last = op.scope
                ran.add(op.scope)
            calls.setdefault(op.scope, 0)
            clusters.setdefault((op.scope, calls[op.scope]), []).append(
                (key, f"{op.name}\n{shape(op)}", color))
        for src in op.inputs:
            dot.edge(f"n{src}", key)
    for i, ((scope, _), nodes) in enumerate(clusters.items()):
        with dot.subgraph(name=f"cluster_{i}") as c:
            c.attr(label=scope.split("/", 1)[-1] if "/" in scope else scope, style="rounded",
                   color="gray50", fontname="monospace", fontsize="10")
            for key, label, color in nodes:
                c.node(key, label, fillcolor=color)
    return dot
