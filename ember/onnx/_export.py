"""ember -> ONNX: :func:`export` traces a model with the capture layer of ``ember.jit``
and writes the recorded graph (``ember._graph.ir.Graph``) as an ONNX model.

Each IR node is written by its op's ONNX spelling (the primitive class's ``onnx``
attribute; ``_export_ops.EXPORTERS`` for the calls recorded by name), which emits ONNX
nodes through :class:`GraphBuilder`.
Before that, with ``do_constant_folding``, nodes that read only parameters, buffers and
constants are evaluated once (a BatchNorm's scale and shift in eval mode, an LSTM's
re-ordered weights), as PyTorch's exporter does. Sizes read with ``x.size(0)`` stay
``Shape``/``Gather`` computations for the axes named in ``dynamic_axes``, and are
constants otherwise. Protobufs are built with the ``onnx`` package's helpers.
"""
import enum
import io
import os

import numpy as np

from ember.onnx import _proto

__all__ = ["export", "TrainingMode", "OperatorExportTypes", "UnsupportedOnnxExport",
           "is_in_onnx_export"]

DEFAULT_OPSET = 18
MIN_OPSET, MAX_OPSET = 13, 21
_EXPORTING = [False]


class TrainingMode(enum.IntEnum):
    """PyTorch's ``torch.onnx.TrainingMode``."""
    EVAL = 0
    PRESERVE = 1
    TRAINING = 2


class OperatorExportTypes(enum.IntEnum):
    """PyTorch's ``torch.onnx.OperatorExportTypes`` (only ONNX is produced)."""
    ONNX = 0
    ONNX_ATEN = 1
    ONNX_ATEN_FALLBACK = 2
    ONNX_FALLTHROUGH = 3


class OnnxExporterError(RuntimeError):
    """An error of the ONNX exporter (``torch.onnx.OnnxExporterError``)."""


class UnsupportedOnnxExport(OnnxExporterError):
    """An op (or an argument of one) that ember cannot write in ONNX at this opset."""


def is_in_onnx_export():
    """True while :func:`export` runs the model."""
    return _EXPORTING[0]


class GraphBuilder:
    """Collects ONNX nodes, initializers and names while one graph is exported."""

    def __init__(self, opset, dynamic_values=frozenset()):
        self.onnx = _proto.require_onnx()
        self.opset = opset
        self.nodes = []
        self.initializers = []
        self.names = {}            # id(Value) -> ONNX name
        self.folded = {}           # id(Value) -> NumPy array (constant-folded)
        self.dynamic = dynamic_values   # ids of int Values that must stay computations
        self._used = set()
        self._consts = {}

    # ----- names ------------------------------------------------------------------------
    def fresh(self, hint):
        hint = "".join(c if c.isalnum() or c in "._:/" else "_" for c in str(hint)) or "v"
        name, k = hint, 0
        while name in self._used:
            k += 1
            name = f"{hint}_{k}"
        self._used.add(name)
        return name

    def op(self, op_type, inputs, n_outputs=1, name_hint=None, domain="", **attrs):
        """Append an ONNX node; returns its output name (or names when n_outputs > 1)."""
        outs = [self.fresh(f"/{name_hint or op_type}_output_{i}") for i in range(n_outputs)]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        node = self.onnx.helper.make_node(op_type, [i if i is not None else "" for i in inputs],
                                          outs, name=self.fresh(f"/{name_hint or op_type}"),
                                          domain=domain or None, **attrs)
        self.nodes.append(node)
        return outs[0] if n_outputs == 1 else outs

    def const(self, array, hint="const"):
        """A constant holding ``array``: a small one (shapes, axes, scalars; shared between
        equal ones) is a ``Constant`` node, as in PyTorch's files, so that the
        initializers hold the model's parameters (and larger folded values) only."""
        array = np.asarray(array)
        if array.size > 16:
            name = self.fresh(hint)
            self.initializers.append(self.onnx.numpy_helper.from_array(array, name))
            return name
        key = (array.dtype.str, array.shape, array.tobytes())
        hit = self._consts.get(key)
        if hit is not None:
            return hit
        name = self.fresh(hint)
        self.nodes.append(self.onnx.helper.make_node(
            "Constant", [], [name], name=self.fresh(f"/Constant_{hint}"),
            value=self.onnx.numpy_helper.from_array(array, name)))
        self._consts[key] = name
        return name

    def ints(self, values, hint="shape"):
        """A 1-D int64 tensor from Python ints and traced sizes (IR int Values)."""
        from ember._graph.ir import Ref
        if all(not isinstance(v, Ref) or id(v.value) not in self.dynamic for v in values):
            return self.const(np.asarray([self.number(v) for v in values], np.int64), hint)
        parts = []
        for v in values:
            if isinstance(v, Ref):
                parts.append(self.op("Unsqueeze", [self.tensor(v), self.const(
                    np.asarray([0], np.int64), "axes0")]))
            else:
                parts.append(self.const(np.asarray([v], np.int64), hint))
        return self.op("Concat", parts, axis=0)

    def number(self, v):
        """The example's Python number behind an int argument (a Ref to a size or a plain
        int)."""
        from ember._graph.ir import Ref
        if isinstance(v, Ref):
            if v.value.data is None or id(v.value) in self.dynamic and \
                    v.value.node is not None and v.value.node.op == "Int":
                # a tensor input (narrow's start), or an int read from a tensor's value,
                # where the op takes a Python number (PyTorch's exporter refuses it too)
                raise UnsupportedOnnxExport(
                    f"the graph input {v.value.name} where the op takes a Python number: its "
                    "value would be frozen into the file")
            return int(v.value.data)
        return v

    def is_dynamic(self, v):
        from ember._graph.ir import Ref
        return isinstance(v, Ref) and id(v.value) in self.dynamic

    def tensor(self, x, like=None, dtype=None):
        """The ONNX name of an argument: a traced value, or a Python number made a
        constant of ``like``'s dtype (or ``dtype``)."""
        from ember._graph.ir import Ref
        if isinstance(x, Ref):
            v = x.value
            if id(v) in self.names:
                return self.names[id(v)]
            if id(v) in self.folded:
                name = self.const(self.folded[id(v)], f"onnx::{v.name}")
                self.names[id(v)] = name
                return name
            if v.type == "int":
                name = self.const(np.asarray(v.data, np.int64), "size")
                return name
            raise KeyError(f"value %{v.name} has no ONNX name yet")
        if dtype is None and like is not None:
            dtype = self.np_dtype(like)
        if dtype is None:
            dtype = np.float32 if isinstance(x, float) else np.bool_ if isinstance(x, bool) \
                else np.int64
        return self.const(np.asarray(x, dtype), "scalar")

    @staticmethod
    def np_dtype(ref):
        v = ref.value
        if v.type == "int":
            return np.dtype(np.int64)
        return np.dtype(v.dtype.np) if v.dtype is not None else np.dtype(np.float32)

    @staticmethod
    def shape(ref):
        return tuple(ref.value.shape) if ref.value.shape is not None else None

    def elem_type(self, np_dtype):
        return _proto.onnx_type_of(np_dtype)


def _dynamic_int_values(graph, dynamic_axes, input_names):
    """Ids of the int Values (sizes and arithmetic on them) that depend on a dynamic axis."""
    from ember._graph.symint import TensorInt
    dyn_dims = set()
    # an int read from a tensor's value (``x.select(0, k)``) follows it in every run
    reads = {id(n.outputs[0]) for n in graph.nodes if n.target is TensorInt}
    for i, v in enumerate(graph.inputs):
        name = input_names[i] if i < len(input_names) else v.name
        axes = (dynamic_axes or {}).get(name)
        if axes:
            for a in (axes if isinstance(axes, (list, tuple)) else axes.keys()):
                dyn_dims.add((id(v), a % max(len(v.shape or ()), 1)))
    dynamic = set(reads)
    if not dyn_dims and not reads:
        return dynamic
    tensor_dyn = {id(v) for v in graph.inputs}  # tensors whose shape may vary
    for n in graph.nodes:
        if n.op == "size":
            src = n.inputs[0]
            dim = n.attrs.get("dim", 0)
            nd = len(src.shape or ())
            if id(src) in tensor_dyn and ((id(src), dim % max(nd, 1)) in dyn_dims or
                                          (src.kind != "input" and dyn_dims)):
                dynamic.add(id(n.outputs[0]))
        elif any(id(v) in dynamic for v in n.inputs if v.type == "int"):
            dynamic.update(id(o) for o in n.outputs)
        if any(id(v) in tensor_dyn for v in n.inputs):
            tensor_dyn.update(id(o) for o in n.outputs if o.type != "int")
    return dynamic


def _fold_constants(graph, gb, params, training):
    """Evaluate nodes that read only parameters, buffers, constants and folded values."""
    from ember._graph.capture import RANDOM_OPS
    from ember._graph.ir import _fill
    known = {}
    for name, v in graph.params.items():
        known[id(v)] = params[name]
    for c in graph.constants:
        known[id(c)] = c.data
    env = {}
    for n in graph.nodes:
        if n.op in RANDOM_OPS or n.op == "size" or not n.inputs or training:
            continue
        if not all(id(v) in known or id(v) in env for v in n.inputs):
            continue
        if any(v.type == "int" for v in n.inputs):
            continue
        full = dict(known)
        full.update(env)
        from ember.autograd.grad_mode import no_grad
        with no_grad():
            args = _fill(n.args, full)
            kwargs = _fill(n.kwargs, full)
            t = n.target
            out = t.apply(*args, **kwargs) if isinstance(t, type) else t(*args, **kwargs)
        outs = out if n.multi else (out,)
        for v, o in zip(n.outputs, outs):
            env[id(v)] = o
            gb.folded[id(v)] = o.detach().numpy().copy()
    return set(env)


def export(model, args, f=None, export_params=True, verbose=False,
           training=TrainingMode.EVAL, input_names=None, output_names=None,
           operator_export_type=OperatorExportTypes.ONNX, opset_version=None,
           do_constant_folding=True, dynamic_axes=None, keep_initializers_as_inputs=False,
           custom_opsets=None, export_modules_as_functions=False, autograd_inlining=True,
           *, kwargs=None, dynamic_shapes=None, external_data=True, dynamo=False,
           report=False, optimize=False, verify=False, profile=False, dump_exported_program=False,
           artifacts_dir=".", fallback=False, _external_data_threshold=2 ** 31 - 1):
    """Export ``model`` run on ``args`` as an ONNX model written to ``f``.

    The arguments mean what they mean in ``torch.onnx.export``: ``f`` a path or a binary
    file object (None: return the ``onnx.ModelProto``); ``dynamic_axes`` (or the
    ``dynamic_shapes`` spelling) names the axes left symbolic, e.g.
    ``{"x": {0: "batch"}}``; the default opset is 18 and 13-21 are accepted. Models
    whose weights pass 2 GB are saved with ONNX's external-data format beside ``f``.

    >>> ember.onnx.export(model, (ember.randn(1, 3, 32, 32),), "model.onnx",  # doctest: +SKIP
    ...                   input_names=["x"], dynamic_axes={"x": {0: "batch"}})
    """
    onnx = _proto.require_onnx()
    from ember._graph.record import record as _record
    from ember.nn.modules.module import Module
    from ember.onnx import _export_ops

    opset = DEFAULT_OPSET if opset_version is None else int(opset_version)
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise ValueError(f"ember.onnx.export: opset_version {opset} is outside the supported "
                         f"range {MIN_OPSET}-{MAX_OPSET}")
    if operator_export_type not in (OperatorExportTypes.ONNX, None):
        raise NotImplementedError("ember.onnx.export writes standard ONNX only "
                                  "(operator_export_type=ONNX)")
    if export_modules_as_functions:
        raise NotImplementedError("ember.onnx.export(export_modules_as_functions=True)")
    if isinstance(args, dict) or (not isinstance(args, tuple)):
        args = (args,)
    if args and isinstance(args[-1], dict) and kwargs is None:
        kwargs, args = args[-1], args[:-1]
    if dynamic_shapes is not None and dynamic_axes is None:
        dynamic_axes = _axes_from_dynamic_shapes(dynamic_shapes, input_names, model, args)

    is_module = isinstance(model, Module)
    was_training = model.training if is_module else False
    if is_module and training == TrainingMode.EVAL:
        model.eval()
    elif is_module and training == TrainingMode.TRAINING:
        model.train()
    train = is_module and model.training
    kw = dict(kwargs or {})
    try:
        _EXPORTING[0] = True
        fn = model if not kw else (lambda *a: model(*a, **kw))
        flat_args = args + tuple(kw.values())
        call = fn if not kw else (lambda *a: model(*a[:len(args)],
                                                 **dict(zip(kw, a[len(args):]))))
        graph = _record(call, flat_args, model if is_module else None, False, False)[0]
    finally:
        _EXPORTING[0] = False
        if is_module:
            model.train(was_training)

    in_names = list(input_names or [])
    for i, v in enumerate(graph.inputs):
        if i >= len(in_names):
            in_names.append(list(kw)[i - len(args)] if i >= len(args) and kw else
                            v.name.replace(".", "_"))
    gb = GraphBuilder(opset, _dynamic_int_values(graph, dynamic_axes, in_names))
    params = {}
    if is_module:
        params = dict(model.named_parameters())
        params.update((k, b) for k, b in model.named_buffers() if b is not None)
    gb.param_arrays = {k: v.detach().numpy() for k, v in params.items()}
    if do_constant_folding:
        _fold_constants(graph, gb, params, train)

    inputs_vi = []
    for i, v in enumerate(graph.inputs):
        name = in_names[i]
        gb.names[id(v)] = name
        gb._used.add(name)
        inputs_vi.append(_value_info(onnx, name, v, (dynamic_axes or {}).get(name)))
    used = {id(x) for n in graph.nodes for x in n.inputs}
    used |= {id(x) for x in graph.outputs()}
    param_inputs = []
    for qn, v in graph.params.items():
        if id(v) not in used or id(v) in gb.folded:
            continue
        gb.names[id(v)] = qn
        gb._used.add(qn)
        if export_params:
            gb.initializers.append(onnx.numpy_helper.from_array(
                params[qn].detach().numpy(), qn))
            if keep_initializers_as_inputs:
                param_inputs.append(_value_info(onnx, qn, v, None))
        else:
            param_inputs.append(_value_info(onnx, qn, v, None))
    for c in graph.constants:
        if id(c) in used and id(c) not in gb.names:
            gb.names[id(c)] = gb.const(c.data.detach().numpy(), f"onnx::Constant_{c.name}")

    for n in graph.nodes:
        if all(id(o) in gb.folded for o in n.outputs):
            continue
        if n.op == "size" or (n.outputs and all(o.type == "int" for o in n.outputs)):
            if not any(id(o) in gb.dynamic for o in n.outputs):
                continue
        conv = _export_ops.converter(n)
        if conv is None:
            raise _unsupported(n, opset, "has no ONNX converter")
        try:
            outs = conv(gb, n, *n.args, **n.kwargs)
        except UnsupportedOnnxExport as e:
            raise _unsupported(n, opset, str(e)) from None
        except TypeError:
            if not any(v.node is not None and v.node.op == "Int" or
                       v.type == "Tensor" and v.shape == () and v.dtype is not None and
                       v.dtype.name.startswith(("int", "uint")) for v in n.inputs):
                raise
            # a converter that writes this argument as an attribute or a Python number
            raise _unsupported(n, opset, "takes an int read from a tensor's value (traced "
                               "aten::Int, or a 0-d integer tensor) where ONNX needs a "
                               "constant; PyTorch's exporter refuses such a dim too") from None
        if isinstance(outs, str):
            outs = [outs]
        for v, name in zip(n.outputs, outs):
            if name is not None:
                gb.names[id(v)] = name

    out_values = graph.outputs()
    out_names = list(output_names or [])
    for i in range(len(out_names), len(out_values)):
        out_names.append(f"output_{i}" if len(out_values) > 1 or True else "output")
    outputs_vi = []
    for v, name in zip(out_values, out_names):
        src = gb.tensor(_ref(v))
        gb.nodes.append(onnx.helper.make_node("Identity", [src], [name],
                                              name=gb.fresh("/Identity_out")))
        outputs_vi.append(_value_info(onnx, name, v, (dynamic_axes or {}).get(name)))
    g = onnx.helper.make_graph(gb.nodes, "main_graph", inputs_vi + param_inputs, outputs_vi,
                               gb.initializers)
    model_proto = onnx.helper.make_model(
        g, opset_imports=[onnx.helper.make_opsetid("", opset)], producer_name="ember",
        producer_version=_ember_version())
    model_proto.ir_version = min(model_proto.ir_version, 10)
    _drop_identity_outputs(model_proto)
    _drop_unused_initializers(model_proto, keep_initializers_as_inputs)
    if dynamic_axes:
        _symbolic_output_shapes(onnx, model_proto)
    if verbose:
        print(onnx.helper.printable_graph(model_proto.graph))
    if f is None:
        return model_proto
    _write(onnx, model_proto, f, external_data, _external_data_threshold)
    return None


def _ref(v):
    from ember._graph.ir import Ref
    return Ref(v)


def _ember_version():
    import ember
    return ember.__version__


def _unsupported(node, opset, why):
    where = f" at {node.source[0]}:{node.source[1]}" if node.source else ""
    from ember.onnx._export_ops import exportable_ops
    return UnsupportedOnnxExport(
        f"ember.onnx.export: the op {node.op!r} (called{where}, module {node.scope or '<top>'})"
        f" {why} at opset {opset}. Exportable ops: {', '.join(exportable_ops())}.")


def _value_info(onnx, name, v, dyn):
    if v.type == "int":
        return onnx.helper.make_tensor_value_info(name, onnx.TensorProto.INT64, [])
    shape = list(v.shape) if v.shape is not None else None
    if shape is not None and dyn:
        axes = dyn if isinstance(dyn, dict) else {a: f"{name}_dynamic_axes_{k + 1}"
                                                  for k, a in enumerate(dyn)}
        for a, label in axes.items():
            shape[a % len(shape)] = label
    return onnx.helper.make_tensor_value_info(name, _proto.onnx_type_of(v.dtype.np), shape)


def _drop_identity_outputs(model):
    """An output that is just an Identity of a node's result renames that result instead
    (as lean as PyTorch's graphs: no Identity tails)."""
    g = model.graph
    graph_inputs = {i.name for i in g.input} | {i.name for i in g.initializer}
    producers = {o: n for n in g.node for o in n.output}
    outputs = {o.name for o in g.output}
    consumers = {}
    for n in g.node:
        for i in n.input:
            consumers[i] = consumers.get(i, 0) + 1
    keep = []
    for n in g.node:
        if n.op_type == "Identity" and n.output[0] in outputs and n.input[0] in producers \
                and n.input[0] not in graph_inputs and consumers.get(n.input[0], 0) == 1 \
                and n.input[0] not in outputs:
            src = producers[n.input[0]]
            src.output[list(src.output).index(n.input[0])] = n.output[0]
            continue
        keep.append(n)
    del g.node[:]
    g.node.extend(keep)


def _drop_unused_initializers(model, keep_as_inputs):
    """Parameters read only by folded nodes (a BatchNorm's statistics, an LSTM's weights
    before re-ordering) are not written."""
    g = model.graph
    read = {i for n in g.node for i in n.input} | {o.name for o in g.output}
    kept = [t for t in g.initializer if t.name in read]
    del g.initializer[:]
    g.initializer.extend(kept)
    if keep_as_inputs:
        names = {t.name for t in kept}
        inputs = [i for i in g.input if i.name in read or i.name in names]
        del g.input[:]
        g.input.extend(inputs)


def _symbolic_output_shapes(onnx, model):
    """Output dims that follow a dynamic input axis are written symbolic (as shape
    inference over the exported graph finds them), not frozen at the example's size."""
    bare = onnx.ModelProto()
    bare.CopyFrom(model)
    for out in bare.graph.output:
        out.type.tensor_type.ClearField("shape")
    try:
        inferred = onnx.shape_inference.infer_shapes(bare)
    except Exception:  # noqa: BLE001 - best effort: the traced shapes stay
        return
    found = {o.name: o for o in inferred.graph.output}
    for out in model.graph.output:
        inf = found.get(out.name)
        if inf is None or not inf.type.tensor_type.HasField("shape"):
            continue
        dims = out.type.tensor_type.shape.dim
        idims = inf.type.tensor_type.shape.dim
        if len(dims) != len(idims):
            for d in dims:  # rank known, sizes not: leave them open
                if d.HasField("dim_value"):
                    d.Clear()
            continue
        for d, i in zip(dims, idims):
            if i.HasField("dim_value") and i.dim_value == d.dim_value:
                continue
            d.Clear()
            if i.HasField("dim_param"):
                d.dim_param = i.dim_param


def _write(onnx, model, f, external_data, threshold):
    from ember.utils._atomic import atomic_write
    size = sum(t.ByteSize() for t in model.graph.initializer)
    if isinstance(f, (str, os.PathLike)):
        path = os.fspath(f)
        if external_data and size > threshold:
            from onnx.external_data_helper import convert_model_to_external_data
            location = os.path.basename(path) + ".data"
            convert_model_to_external_data(model, all_tensors_to_one_file=True,
                                           location=location, size_threshold=1024)
            _write_external(onnx, model, os.path.dirname(os.path.abspath(path)))
        with atomic_write(path, "wb") as fh:
            fh.write(model.SerializeToString())
        return
    if size > threshold:
        raise ValueError("ember.onnx.export: a model over 2 GB needs a path for f, so its "
                         "weights can go to an external data file beside it")
    f.write(model.SerializeToString())


def _write_external(onnx, model, base_dir):
    """Write the external-data tensors (atomically) and clear them from the proto."""
    from onnx.external_data_helper import (
        ExternalDataInfo,
        _get_all_tensors,
        uses_external_data,
    )

    from ember.utils._atomic import atomic_write
    files = {}
    for t in _get_all_tensors(model):
        if uses_external_data(t) and t.HasField("raw_data"):
            info = ExternalDataInfo(t)
            buf = files.setdefault(info.location, io.BytesIO())
            offset = buf.tell()
            buf.write(t.raw_data)
            for e in t.external_data:
                if e.key == "offset":
                    e.value = str(offset)
            if not any(e.key == "offset" for e in t.external_data):
                t.external_data.add(key="offset", value=str(offset))
            if not any(e.key == "length" for e in t.external_data):
                t.external_data.add(key="length", value=str(len(t.raw_data)))
            t.ClearField("raw_data")
    for location, buf in files.items():
        with atomic_write(os.path.join(base_dir, location), "wb") as fh:
            fh.write(buf.getvalue())


def _axes_from_dynamic_shapes(dynamic_shapes, input_names, model, args):
    """torch.export-style ``dynamic_shapes`` (per argument: {axis: Dim or name}) as
    ``dynamic_axes`` keyed by input name."""
    import inspect
    specs = list(dynamic_shapes.values()) if isinstance(dynamic_shapes, dict) else \
        list(dynamic_shapes)
    names = list(input_names or [])
    if not names:
        try:
            fwd = model.forward if hasattr(model, "forward") else model
            names = [p for p in inspect.signature(fwd).parameters][:len(args)]
        except (TypeError, ValueError):
            names = [f"input_{i}" for i in range(len(args))]
    out = {}
    for name, spec in zip(names, specs):
        if spec:
            out[name] = {a: getattr(d, "__name__", str(d)) for a, d in spec.items()} \
                if isinstance(spec, dict) else list(spec)
    return out
