"""The ``tensorboard`` package's generated protobuf modules, imported on first use so
that ``import ember`` never needs them; a missing package is named with its extra."""
import types

_MISSING = ("TensorBoard logging needs the tensorboard and protobuf packages: "
            "pip install -e '.[tensorboard]'")
_modules = None


def pb():
    """A namespace of the protobuf modules: summary, tensor, tensor_shape, event, graph,
    node_def, attr_value, versions, step_stats, config."""
    global _modules
    if _modules is None:
        try:
            from tensorboard.compat.proto import (
                attr_value_pb2,
                config_pb2,
                event_pb2,
                graph_pb2,
                node_def_pb2,
                step_stats_pb2,
                summary_pb2,
                tensor_pb2,
                tensor_shape_pb2,
                versions_pb2,
            )
        except ImportError as e:
            raise ImportError(f"{_MISSING} ({e})") from None
        _modules = types.SimpleNamespace(
            summary=summary_pb2, tensor=tensor_pb2, tensor_shape=tensor_shape_pb2,
            event=event_pb2, graph=graph_pb2, node_def=node_def_pb2, attr_value=attr_value_pb2,
            versions=versions_pb2, step_stats=step_stats_pb2, config=config_pb2)
    return _modules
