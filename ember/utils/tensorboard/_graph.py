"""``add_graph``: a captured forward pass as TensorBoard's ``GraphDef``.

Node names follow PyTorch's (``input/x``, ``Net/Linear[fc1]/addmm``, ``output/output.1``)
so that TensorBoard groups ops by module the same way; an op is ``aten::<name>``.
"""
from ember.utils._graph_capture import capture
from ember.utils.tensorboard._lazy import pb

__all__ = ["graph", "graph_def"]


def graph_def(captured):
    """A ``GraphDef`` from a :class:`~ember.utils._graph_capture.Captured` pass."""
    p = pb()
    ts = p.tensor_shape
    av = p.attr_value.AttrValue
    names, used, nodes = {}, {}, []

    def unique(name):
        n = used.get(name, 0)
        used[name] = n + 1
        return f"{name}.{n}" if n else name

    for op in captured.ops:
        if op.kind == "input":
            name, kind = f"input/{op.name}", "IO Node"
        elif op.kind == "output":
            name, kind = f"output/{op.name}", "IO Node"
        elif op.kind == "param":
            name, kind = f"{op.scope}/{op.name}", "prim::GetAttr"
        else:
            name, kind = f"{op.scope}/{op.name}", op.op_type or f"aten::{op.name}"
        attr = {}
        if op.shape is not None:
            shape = ts.TensorShapeProto(dim=[ts.TensorShapeProto.Dim(size=d) for d in op.shape])
            attr["_output_shapes"] = av(list=av.ListValue(shape=[shape]))
        if op.node_name:
            attr["attr"] = av(s=f"{{ grad_fn : {op.node_name} }}".encode())
        items = op.input_items or [0] * len(op.inputs)
        inputs = [names[k][i] for k, i in zip(op.inputs, items)]
        # one node per item of a call that returned several (PyTorch's graph has a node
        # per output value: lstm's output, h_n and c_n)
        names[op.key] = [unique(name) for _ in range(op.n_outputs)]
        for nm in names[op.key]:
            nodes.append(p.node_def.NodeDef(name=nm, op=kind, input=inputs, attr=attr))
    return p.graph.GraphDef(node=nodes, versions=p.versions.VersionDef(producer=22))


def graph(model, args, verbose=False):
    """(GraphDef, RunMetadata) for ``model(*args)``, as PyTorch's ``add_graph`` writes."""
    g = graph_def(capture(model, args))
    if verbose:
        print(g)
    ss = pb().step_stats
    meta = pb().config.RunMetadata(step_stats=ss.StepStats(
        dev_stats=[ss.DeviceStepStats(device="/device:CPU:0")]))
    return g, meta
