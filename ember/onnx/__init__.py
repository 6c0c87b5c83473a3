"""ember.onnx: ONNX import (and, with the capture layer, export).

``ember.onnx.load(path)`` builds an ``nn.Module`` that computes an ONNX model with ember
ops. The ``onnx`` package is an optional extra (``pip install -e '.[onnx]'``), imported
only when a function here is called.
"""
from ember.onnx._export import (
    OperatorExportTypes,
    TrainingMode,
    UnsupportedOnnxExport,
    export,
    is_in_onnx_export,
)
from ember.onnx._import import InvalidOnnxModel, OnnxModule, UnsupportedOnnxOp, load

__all__ = ["export", "load", "OnnxModule", "TrainingMode", "OperatorExportTypes",
           "UnsupportedOnnxOp", "InvalidOnnxModel", "UnsupportedOnnxExport", "is_in_onnx_export",
           "IMPORTABLE_OPS", "EXPORTABLE_OPS"]


def __getattr__(name):
    if name == "IMPORTABLE_OPS":
        from ember.onnx._import import _ensure_converters
        from ember.onnx._registry import IMPORTERS
        _ensure_converters()
        return sorted(op for domain, op in IMPORTERS if domain == "")
    if name == "EXPORTABLE_OPS":
        from ember.onnx._export_ops import exportable_ops
        return exportable_ops()
    raise AttributeError(f"module 'ember.onnx' has no attribute {name!r}")
from ember.onnx._export import OnnxExporterError  # noqa: E402,F401

__all__ += ["OnnxExporterError"]
