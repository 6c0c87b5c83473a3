"""ember's graph IR: what ``jit.trace`` records, and what codegen, ONNX export,
TensorBoard's ``add_graph``, export and compile read.

A :class:`Graph` is an ordered list of :class:`Node` s over :class:`Value` s.

- A **Value** is one tensor or int flowing through the graph. ``kind`` says where it
  comes from: ``"input"`` (an argument of the traced function), ``"param"`` /
  ``"buffer"`` (a module's parameter or buffer, named by its qualified name such as
  ``layer1.0.weight``, the traced tensor in ``data``), ``"constant"`` (a tensor that
  is neither, kept in ``data``),
  or ``"node"`` (an output of a node). Tensor values carry ``shape``, ``dtype`` and
  ``strides`` as seen on the example; int values (sizes read with ``x.size(0)``)
  carry the example's number in ``data``.
- A **Node** is one call: ``op`` is a stable string key (the primitive's class name,
  e.g. ``View``, ``_LinearMm``, ``Conv2d``..., or for the few calls recorded above the
  primitives, the function's name: ``view``, ``reshape``, ``flatten``, ``zeros``,
  ``size``, ``int.mul``...). ``inputs`` are the Values it reads (tensors and ints, in
  the order they appear in its arguments), ``attrs`` the other arguments by name,
  ``outputs`` the Values it makes, ``scope`` the module path that ran it
  (``layer1.0.conv1``) and ``source`` the user's ``(file, line)``.
- ``args``/``kwargs`` keep the call exactly as it was made (Values in place of
  tensors and traced ints; :class:`ArrayRef` in place of a traced tensor's array that a
  primitive reads as an index, a mask or lengths), so :meth:`Graph.run` can replay it
  through the same primitives without the Python module code.
"""
import inspect

__all__ = ["Graph", "Node", "Value", "Ref", "ArrayRef"]

_DTYPE_SHORT = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16",
                "int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char",
                "uint8": "Byte", "bool": "Bool"}


class Value:
    """One tensor or int in the graph (see the module docstring for ``kind``)."""

    __slots__ = ("name", "kind", "type", "shape", "dtype", "strides", "requires_grad",
                 "node", "index", "data", "__weakref__")

    def __init__(self, name, kind, type="Tensor", shape=None, dtype=None, strides=None,
                 requires_grad=False, node=None, index=0, data=None):
        self.name, self.kind, self.type = name, kind, type
        self.shape, self.dtype, self.strides = shape, dtype, strides
        self.requires_grad = requires_grad
        self.node, self.index, self.data = node, index, data

    def type_str(self):
        """torch's spelling of the value's type, e.g. ``Float(2, 3, strides=[3, 1], ...)``."""
        if self.type != "Tensor":
            return self.type
        if self.shape is None:
            return "Tensor"
        dims = ", ".join(str(s) for s in self.shape)
        strides = ", ".join(str(s) for s in (self.strides or ()))
        name = _DTYPE_SHORT.get(self.dtype.name if self.dtype is not None else "", "Tensor")
        layout = f"{dims}, strides=[{strides}], " if dims else ""   # 0-d: no strides
        return f"{name}({layout}requires_grad={int(self.requires_grad)}, device=cpu)"

    def __repr__(self):
        return f"%{self.name} : {self.type_str()}"


class Ref:
    """A Value standing in an argument tree (where the call had a tensor or traced int)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return f"%{self.value.name}"


class ArrayRef(Ref):
    """A Value passed to a primitive as its array (an index, a mask, lengths: an
    argument the op reads as a plain array, not as a differentiable input): a tensor
    input of the node like any :class:`Ref`, which a replay hands over as the value's
    array, reshaped to ``shape`` when the call had it reshaped (``-1`` for a flattened
    index)."""

    __slots__ = ("shape",)

    def __init__(self, value, shape=None):
        self.value = value
        self.shape = shape

    def array(self, t):
        """The array the primitive reads, from the value's tensor ``t`` (or array)."""
        a = getattr(t, "_data", t)
        return a if self.shape is None else a.reshape(self.shape)


class Node:
    """One recorded call (see the module docstring)."""

    __slots__ = ("op", "target", "args", "kwargs", "inputs", "outputs", "attrs", "scope",
                 "source", "multi", "inplace", "__weakref__")

    def __init__(self, op, target, args, kwargs, inputs, attrs, scope="", source=None):
        self.op, self.target = op, target
        self.args, self.kwargs = args, kwargs
        self.inputs, self.attrs = inputs, attrs
        self.outputs = []
        self.scope, self.source = scope, source
        self.multi = False  # the call returned a tuple (outputs are its items)
        # the user called the in-place form (``relu_``): the value was computed out of
        # place and written into the first input's tensor
        self.inplace = False

    def __repr__(self):
        outs = ", ".join(repr(v) for v in self.outputs)
        ins = ", ".join("%" + v.name for v in self.inputs)
        attrs = "".join(f"{k}={_short(v)}, " for k, v in self.attrs.items()
                        if not isinstance(v, Ref))
        attrs = f"[{attrs[:-2]}]" if attrs else ""
        line = f"{outs} = {self.op}{attrs}({ins})"
        if self.scope:
            line += f", scope: {self.scope}"
        if self.source:
            line += f" # {self.source[0]}:{self.source[1]}:0"
        return line


def _short(v):
    s = repr(v)
    return s if len(s) <= 60 else s[:57] + "..."


class Graph:
    """An ordered list of nodes with its inputs, parameters, buffers and constants."""

    # a consumer's text form (``jit``: PyTorch's printed graph); None or a printer that
    # raises NotImplementedError prints the IR itself
    printer = None

    def __init__(self):
        self.nodes = []
        self.inputs = []          # Values of kind "input", in call order
        self.params = {}          # qualified name -> Value (kind "param" or "buffer")
        self.constants = []       # Values of kind "constant"
        self.input_spec = None    # the structure of the arguments (Refs in place of tensors)
        self.arg_names = None     # the traced function's parameter names
        self.output_spec = None   # the structure of the result (Refs in place of values)
        self.calls = []           # the submodule calls seen (capture.ModuleCall), in order
        self._names = {}

    # ----- building -------------------------------------------------------------------
    def _fresh(self, hint):
        hint = hint or "v"
        n = self._names.get(hint, 0)
        self._names[hint] = n + 1
        return hint if n == 0 and not hint.isdigit() else f"{hint}.{n}"

    def _number(self):
        n = self._names.get("", 0)
        self._names[""] = n + 1
        return str(n)

    def add_input(self, name, meta):
        v = Value(self._fresh(name), "input", **meta)
        self.inputs.append(v)
        return v

    def add_param(self, qualname, kind, meta, tensor=None):
        v = Value(qualname, kind, data=tensor, **meta)
        self.params[qualname] = v
        return v

    def add_constant(self, data, meta):
        v = Value(f"c{len(self.constants)}", "constant", data=data, **meta)
        self.constants.append(v)
        return v

    def add_node(self, node, out_metas):
        """Append ``node`` with one output Value per entry of ``out_metas``."""
        for i, meta in enumerate(out_metas):
            node.outputs.append(Value(self._number(), "node", node=node, index=i, **meta))
        self.nodes.append(node)
        return node.outputs

    # ----- reading --------------------------------------------------------------------
    def outputs(self):
        """The Values the graph returns, in order."""
        out = []
        _walk(self.output_spec, lambda r: out.append(r.value))
        return out

    def users(self):
        """``{id(value): [nodes reading it]}``."""
        uses = {}
        for n in self.nodes:
            for v in n.inputs:
                uses.setdefault(id(v), []).append(n)
        return uses

    def eliminate_dead_code(self):
        """Drop nodes none of whose outputs reach the graph's result (sizes read only
        inside a call recorded as one node, checks that produced nothing used...)."""
        live = {id(v) for v in self.outputs()}
        kept = []
        for n in reversed(self.nodes):
            if getattr(n.target, "_side_effect", False) or \
                    any(id(o) in live for o in n.outputs):
                kept.append(n)
                live.update(id(v) for v in n.inputs)
        self.nodes = kept[::-1]
        alive = {id(n) for n in kept}
        for c in self.calls:
            if isinstance(c.nodes, list):
                c.nodes = [n for n in c.nodes if id(n) in alive]
        self.constants = [c for c in self.constants if id(c) in live]
        n = 0
        for node in self.nodes:  # number the surviving values 0, 1, 2... again
            for v in node.outputs:
                if v.name.isdigit():  # a value named after a local keeps its name
                    v.name = str(n)
                    n += 1

    def __str__(self):
        if self.printer is not None:
            try:
                return self.printer()
            except NotImplementedError:
                pass
        head = ",\n      ".join(repr(v) for v in self.inputs +
                                [p for p in self.params.values()])
        lines = [f"graph({head}):"]
        for c in self.constants:
            lines.append(f"  {c!r} = prim::Constant[value=<Tensor>]()")
        lines += ["  " + repr(n) for n in self.nodes]
        lines.append("  return (" + ", ".join("%" + v.name for v in self.outputs()) + ")")
        return "\n".join(lines) + "\n"

    __repr__ = __str__

    # ----- replay ---------------------------------------------------------------------
    def run(self, *inputs, params, observer=None):
        """Run the graph on new ``inputs`` (the traced function's arguments, in the
        same structure) and ``params`` (``{qualified name: tensor}``) through the same
        ember calls the trace recorded; returns the result in the traced structure."""
        env = {}
        if len(inputs) != len(self.input_spec):
            raise TypeError(f"forward() expected {len(self.input_spec)} arguments, got "
                            f"{len(inputs)}")
        _bind(self.input_spec, inputs, env)
        for name, v in self.params.items():
            env[id(v)] = params[name]
        for c in self.constants:
            env[id(c)] = c.data
        for n in self.nodes:
            args = _fill(n.args, env)
            kwargs = _fill(n.kwargs, env)
            t = n.target
            out = t.apply(*args, **kwargs) if isinstance(t, type) else t(*args, **kwargs)
            if n.multi:
                if len(out) != len(n.outputs):
                    # a traced result has the structure it had on the example (as
                    # PyTorch's ``prim::ListUnpack``): another count is an error
                    raise RuntimeError(
                        f"{n.op} returned {len(out)} tensors in this run but "
                        f"{len(n.outputs)} when it was traced; a traced graph's results "
                        "keep the number they had on the example inputs")
                for v, o in zip(n.outputs, out):
                    env[id(v)] = o
            else:
                env[id(n.outputs[0])] = out
            if observer is not None:
                observer(n, out if n.multi else (out,))
        return _fill(self.output_spec, env)


def _walk(tree, fn):
    if isinstance(tree, Ref):
        fn(tree)
    elif isinstance(tree, slice):
        _walk((tree.start, tree.stop, tree.step), fn)
    elif isinstance(tree, (tuple, list)):
        for t in tree:
            _walk(t, fn)
    elif isinstance(tree, dict):
        for t in tree.values():
            _walk(t, fn)


def _fill(tree, env):
    """``tree`` with each Ref replaced by its value in ``env``."""
    t = type(tree)
    if t is Ref:
        return env[id(tree.value)]
    if t is ArrayRef:
        return tree.array(env[id(tree.value)])
    if t is tuple or t is list:
        return t(_fill(x, env) for x in tree)
    if t is dict:
        return {k: _fill(x, env) for k, x in tree.items()}
    if t is slice:
        return slice(_fill(tree.start, env), _fill(tree.stop, env), _fill(tree.step, env))
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):  # namedtuple (PackedSequence)
        return t(*(_fill(x, env) for x in tree))
    return tree


def _bind(spec, actual, env):
    """Match the arguments ``actual`` against ``spec`` (the traced structure)."""
    if isinstance(spec, Ref):
        env[id(spec.value)] = actual
    elif isinstance(spec, (tuple, list)):
        if not isinstance(actual, (tuple, list)) or len(actual) != len(spec):
            raise TypeError(f"expected a sequence of {len(spec)} elements matching the traced "
                            f"inputs, got {type(actual).__name__}")
        for s, a in zip(spec, actual):
            _bind(s, a, env)
    elif isinstance(spec, dict):
        if not isinstance(actual, dict) or set(actual) != set(spec):
            raise TypeError(f"expected a dict with keys {sorted(spec)} matching the traced "
                            "inputs")
        for k, s in spec.items():
            _bind(s, actual[k], env)


_SIG_CACHE = {}


def arg_names(target, n):
    """Names of the first ``n`` positional parameters of ``target`` (a primitive's
    ``forward`` after ``self``, or a function's): ``shape[0]``... for ``*shape``,
    ``arg<i>`` where unknown."""
    key = (target, n)
    names = _SIG_CACHE.get(key)
    if names is None:
        fn = target.forward if isinstance(target, type) else target
        try:
            params = list(inspect.signature(fn).parameters.values())
        except (TypeError, ValueError):
            params = []
        ps = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if isinstance(target, type):
            ps = ps[1:]
        var = next((p.name for p in params if p.kind == p.VAR_POSITIONAL), None)
        names = [ps[i].name if i < len(ps) else
                 (f"{var}[{i - len(ps)}]" if var else f"arg{i}") for i in range(n)]
        _SIG_CACHE[key] = names
    return names
