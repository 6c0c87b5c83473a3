"""ONNX -> ember: :func:`load` builds an ``nn.Module`` that computes an ONNX graph.

The module's forward runs the graph's nodes in order, each through its converter in
the op table (``_registry.IMPORTERS``), on ember Tensors. Floating-point initializers
become Parameters (so an imported model can be fine-tuned: gradients flow), the others
buffers; their ``state_dict`` keys are the initializer names, with dotted names
("layer1.0.weight") laid out as nested submodules as PyTorch would have them.
"""
import os

import numpy as np

from ember import _core as ember
from ember import nn
from ember.onnx import _proto
from ember.onnx._registry import IMPORTERS, ImportContext, node_label

__all__ = ["load", "OnnxModule", "UnsupportedOnnxOp", "InvalidOnnxModel"]


class UnsupportedOnnxOp(NotImplementedError):
    """An ONNX node whose op (or attribute, or dtype) ember cannot compute."""


InvalidOnnxModel = _proto.InvalidOnnxModel


def _ensure_converters():
    # the converter families register themselves on import
    from ember.onnx import (  # noqa: F401
        _import_attention,
        _import_misc,
        _import_nn,
        _import_ops,
        _import_resize,
        _import_shape,
        _import_signal,
    )


def load(path_or_model, *, strict_dtypes=True):
    """Build an ember ``nn.Module`` computing the ONNX model ``path_or_model``.

    ``path_or_model`` is a file path, a binary file object, bytes, or an
    ``onnx.ModelProto``. External data is read from beside the file.

    >>> m = ember.onnx.load("model.onnx")      # doctest: +SKIP
    >>> y = m(ember.randn(1, 3, 224, 224))     # doctest: +SKIP
    """
    onnx = _proto.require_onnx()
    base_dir = None
    if isinstance(path_or_model, onnx.ModelProto):
        model = path_or_model
    elif isinstance(path_or_model, (bytes, bytearray)):
        model = onnx.load_from_string(bytes(path_or_model))
    elif isinstance(path_or_model, (str, os.PathLike)):
        base_dir = os.path.dirname(os.path.abspath(os.fspath(path_or_model)))
        model = onnx.load(os.fspath(path_or_model), load_external_data=False)
    else:
        model = onnx.load(path_or_model, load_external_data=False)
    return OnnxModule(model, base_dir=base_dir)


def _opset_of(model):
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return imp.version
    return 1


def _check_wiring(graph):
    """Refuse, at load, a top-level graph that reads a value nothing defines before it, or
    that has no outputs (an empty or cut-short file parses as such a graph), as
    onnxruntime refuses them when it builds its session."""
    from ember.onnx._proto import InvalidOnnxModel
    if not graph.output:
        raise InvalidOnnxModel("ember.onnx.load: the model's graph has no outputs (an empty "
                               "or damaged file?)")
    known = {v.name for v in graph.input} | {i.name for i in graph.initializer}
    for node in graph.node:
        for name in node.input:
            if name and name not in known:
                raise InvalidOnnxModel(
                    f"ember.onnx.load: node {node.name or node.op_type!r} reads {name!r}, "
                    "which is not a graph input, an initializer or an earlier node's output")
        known.update(o for o in node.output if o)
    for out in graph.output:
        if out.name not in known:
            raise InvalidOnnxModel(f"ember.onnx.load: graph output {out.name!r} is not "
                                   "computed by any node")


class OnnxModule(nn.Module):
    """An ONNX graph computed with ember ops (see :func:`load`)."""

    def __init__(self, model, base_dir=None):
        super().__init__()
        _ensure_converters()
        self._onnx_graph = model.graph
        self._opset = _opset_of(model)
        self._base_dir = base_dir
        self._initializer_keys = {}
        init_names = {init.name for init in model.graph.initializer}
        # every plain attribute is set before the initializers are placed, so that none
        # of them can take an attribute's name (see _place)
        self.input_names = [i.name for i in model.graph.input if i.name not in init_names]
        self.output_names = [o.name for o in model.graph.output]
        for init in model.graph.initializer:
            arr = _proto.to_array(init, base_dir, what=f"initializer {init.name!r}")
            self._add_initializer(init.name, _tensor_of(arr, init.name))
        _check_wiring(model.graph)
        missing = sorted({(n.domain or "", n.op_type) for n in _all_nodes(model.graph)
                          if (n.domain or "", n.op_type) not in IMPORTERS
                          and n.domain not in ("ai.onnx",)})
        if missing:
            ops = ", ".join(f"{d + '.' if d else ''}{o}" for d, o in missing)
            raise UnsupportedOnnxOp(
                f"ember.onnx.load: this model uses ONNX ops that ember cannot compute: {ops} "
                f"(opset {self._opset}); ember.onnx.IMPORTABLE_OPS lists the ones it can")

    def _place(self, name):
        """(module, attribute) under which initializer ``name`` is stored.

        A dotted name ("layer1.0.weight") becomes nested submodules, as PyTorch lays
        out a state_dict. Names from the file never shadow anything: a name (or a part
        of one) that is empty, or that is already an attribute of the module ("forward",
        "training", "__class__", "_parameters", another initializer ...) is stored at
        the top level as ``init_<name with dots as _>`` (with ``_1``, ``_2`` ... if that is
        taken too). Lookups go through ``_initializer_keys``, never through attributes.
        """
        parts = name.split(".")
        if all(parts):
            owner, i = self, 0
            while i < len(parts) - 1 and parts[i] in owner._modules:
                owner, i = owner._modules[parts[i]], i + 1
            fresh = parts[i:-1]  # submodules still to create, then the leaf
            if (_free(owner, parts[i]) and
                    all(_free(_blank_module(), q) for q in parts[i + 1:])):
                for q in fresh:
                    owner.add_module(q, nn.Module())
                    owner = owner._modules[q]
                return owner, parts[-1]
        base = "init_" + (name.replace(".", "_") or "unnamed")
        leaf, k = base, 0
        while not _free(self, leaf):
            k += 1
            leaf = f"{base}_{k}"
        return self, leaf

    def _add_initializer(self, name, tensor):
        owner, leaf = self._place(name)
        if tensor.is_floating_point():
            owner.register_parameter(leaf, nn.Parameter(tensor))
        else:
            owner.register_buffer(leaf, tensor)
        self._initializer_keys[name] = (owner, leaf)

    def _initializer(self, name):
        owner, leaf = self._initializer_keys[name]
        t = owner._parameters.get(leaf)
        return t if t is not None else owner._buffers[leaf]

    def forward(self, *args, **kwargs):
        if len(args) > len(self.input_names):
            raise TypeError(f"forward() takes {len(self.input_names)} inputs "
                            f"({', '.join(self.input_names)}) but {len(args)} were given")
        env = {name: self._initializer(name) for name in self._initializer_keys}
        given = dict(zip(self.input_names, args))
        for k, v in kwargs.items():
            if k not in self.input_names:
                raise TypeError(f"forward() got an unexpected input {k!r}; the graph's inputs "
                                f"are {self.input_names}")
            given[k] = v
        for name in self.input_names:
            if name not in given:
                raise TypeError(f"forward() is missing the graph input {name!r}")
            env[name] = as_value(given[name])
        outs = run_graph(self._onnx_graph, env, self._opset, self.training)
        return outs[0] if len(outs) == 1 else tuple(outs)


_BLANK = []


def _blank_module():
    """A plain nn.Module: what a submodule created for a dotted name starts as."""
    if not _BLANK:
        _BLANK.append(nn.Module())
    return _BLANK[0]


def _free(module, attr):
    """Whether ``attr`` can name a new parameter/buffer/submodule of ``module`` without
    shadowing anything it already has (methods, flags, slots, other entries)."""
    return bool(attr) and "." not in attr and attr not in module._parameters and \
        attr not in module._buffers and attr not in module._modules and \
        attr not in module.__dict__ and not hasattr(type(module), attr)


def as_value(x):
    """A graph input as an ember value: Tensors as they are, arrays and numbers wrapped,
    lists (ONNX sequences) element-wise, None (an empty optional) kept."""
    if x is None or isinstance(x, ember.Tensor):
        return x
    if isinstance(x, (list, tuple)):
        return [as_value(v) for v in x]
    return _tensor_of(np.asarray(x), "input")


def _tensor_of(arr, what):
    arr = np.asarray(arr)
    try:
        ember.backend.dtypes.from_numpy_dtype(arr.dtype)
    except TypeError:
        raise UnsupportedOnnxOp(f"ember.onnx: {what} has dtype {arr.dtype}, which ember "
                                "tensors do not have") from None
    return ember.from_numpy(np.array(arr, copy=True, order="C"))


def _all_nodes(graph):
    onnx = _proto.require_onnx()
    for node in graph.node:
        yield node
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from _all_nodes(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for g in a.graphs:
                    yield from _all_nodes(g)


_ATTR_CACHE = {}


def _attributes(node):
    key = id(node)
    hit = _ATTR_CACHE.get(key)
    if hit is not None and hit[0] is node:
        return hit[1]
    onnx = _proto.require_onnx()
    attrs = {}
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            attrs[a.name] = a.g
        elif a.type == onnx.AttributeProto.TENSOR:
            attrs[a.name] = _proto.to_array(
                a.t, what=f"attribute {a.name!r} of {node_label(node)}")
        elif a.type == onnx.AttributeProto.STRING:
            attrs[a.name] = a.s.decode()
        elif a.type == onnx.AttributeProto.STRINGS:
            attrs[a.name] = [s.decode() for s in a.strings]
        else:
            attrs[a.name] = onnx.helper.get_attribute_value(a)
        attrs[a.name.replace("-", "_")] = attrs.pop(a.name)
    _ATTR_CACHE[key] = (node, attrs)
    return attrs


def run_graph(graph, env, opset, training=False):
    """Run ``graph``'s nodes over ``env`` (name -> value, updated in place); return its
    outputs in order. Subgraphs (If, Loop, Scan) call this with a copy of the outer env;
    their own initializers are constants here (the main graph's are parameters, already
    in ``env``)."""
    for init in graph.initializer:
        if init.name not in env:
            env[init.name] = _tensor_of(
                _proto.to_array(init, what=f"initializer {init.name!r}"), init.name)
    for node in graph.node:
        fn = IMPORTERS.get((node.domain if node.domain != "ai.onnx" else "", node.op_type))
        if fn is None:
            raise UnsupportedOnnxOp(f"ember.onnx: ONNX op {node.op_type!r} (opset {opset}) is "
                                    "not supported")
        inputs = []
        for name in node.input:
            if not name:
                inputs.append(None)
            else:
                try:
                    inputs.append(env[name])
                except KeyError:
                    raise RuntimeError(f"ember.onnx: node {node.name or node.op_type!r} reads "
                                       f"{name!r}, which no earlier node produced") from None
        while inputs and inputs[-1] is None:
            inputs.pop()
        cx = ImportContext(opset, node, len(node.output), env, training)
        try:
            result = fn(cx, *inputs, **_attributes(node))
        except UnsupportedOnnxOp:
            raise
        except TypeError as e:
            if "unexpected keyword argument" in str(e):
                raise UnsupportedOnnxOp(f"ember.onnx: {node.op_type}: {e}") from None
            raise
        except (MemoryError, ValueError, RuntimeError, IndexError) as e:
            # NumPy's own words (a reshape that cannot be, an allocation that failed)
            # say nothing of where: name the node; a nested node already named itself
            if str(e).startswith("ember.onnx"):
                raise
            if isinstance(e, MemoryError):  # NumPy's _ArrayMemoryError included
                raise MemoryError(f"ember.onnx: {node_label(node)}: {e}") from e
            if type(e) not in (ValueError, RuntimeError, IndexError):
                raise
            raise type(e)(f"ember.onnx: {node_label(node)}: {e}") from e
        if not isinstance(result, tuple):
            result = (result,)
        for name, value in zip(node.output, result):
            if name:
                env[name] = value
    return [env[o.name] for o in graph.output]
