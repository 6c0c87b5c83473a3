"""The ``onnx`` package, imported lazily, and conversions between its protobufs and ember.

ONNX support is an optional extra: ember itself needs only NumPy. Everything that
touches protobufs goes through the ``onnx`` package (its helpers and numpy_helper),
never a hand-written encoder.
"""
import importlib

import numpy as np

__all__ = ["require_onnx", "np_dtype_of", "onnx_type_of", "to_array"]


def require_onnx():
    """The ``onnx`` module, or an ImportError naming the extra that provides it."""
    try:
        return importlib.import_module("onnx")
    except ImportError as e:
        raise ImportError("ember.onnx needs the 'onnx' package: pip install ember[onnx]") from e


def np_dtype_of(elem_type):
    """The NumPy dtype of an ONNX ``TensorProto.DataType`` code."""
    onnx = require_onnx()
    return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))


def onnx_type_of(np_dtype):
    """The ONNX ``TensorProto.DataType`` code of a NumPy dtype."""
    onnx = require_onnx()
    return onnx.helper.np_dtype_to_tensor_dtype(np.dtype(np_dtype))


def to_array(tensor_proto, base_dir=None):
    """A TensorProto (inline or external data) as a NumPy array."""
    onnx = require_onnx()
    if base_dir is not None and tensor_proto.data_location == onnx.TensorProto.EXTERNAL:
        from onnx.external_data_helper import load_external_data_for_tensor
        load_external_data_for_tensor(tensor_proto, base_dir)
    return onnx.numpy_helper.to_array(tensor_proto)
