"""The ``onnx`` package, imported lazily, and conversions between its protobufs and ember.

ONNX support is an optional extra: ember itself needs only NumPy. Everything that
touches protobufs goes through the ``onnx`` package (its helpers and numpy_helper),
never a hand-written encoder.
"""
import importlib

import numpy as np

__all__ = ["require_onnx", "np_dtype_of", "onnx_type_of", "to_array", "InvalidOnnxModel"]


def require_onnx():
    """The ``onnx`` module, or an ImportError naming the extra that provides it."""
    try:
        return importlib.import_module("onnx")
    except ImportError as e:
        raise ImportError("ember.onnx needs the 'onnx' package: pip install -e '.[onnx]'") from e


def np_dtype_of(elem_type):
    """The NumPy dtype of an ONNX ``TensorProto.DataType`` code."""
    onnx = require_onnx()
    return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))


def onnx_type_of(np_dtype):
    """The ONNX ``TensorProto.DataType`` code of a NumPy dtype."""
    onnx = require_onnx()
    return onnx.helper.np_dtype_to_tensor_dtype(np.dtype(np_dtype))


class InvalidOnnxModel(ValueError):
    """An ONNX model that contradicts itself, e.g. an initializer whose declared dims do
    not match the data it holds."""


# element widths in bits of the ONNX types stored packed, several to a byte
_SUB_BYTE = {"INT4": 4, "UINT4": 4, "FLOAT4E2M1": 4, "INT2": 2, "UINT2": 2,
             "FLOAT6E2M3": 6, "FLOAT6E3M2": 6}


def _check_declared_size(tensor_proto, what):
    """Refuse dims that are negative or that do not match the data actually stored.

    Done before any array is built, so a tensor declaring 2**40 elements over a dozen
    bytes is named here rather than failing (or allocating) inside NumPy.
    """
    onnx = require_onnx()
    dims = list(tensor_proto.dims)
    try:
        type_name = onnx.TensorProto.DataType.Name(tensor_proto.data_type)
    except ValueError:
        raise InvalidOnnxModel(f"ember.onnx: {what} has data type {tensor_proto.data_type}, "
                               "which ONNX does not define") from None
    if any(d < 0 for d in dims):
        raise InvalidOnnxModel(f"ember.onnx: {what} has negative dims {dims}")
    n = 1
    for d in dims:
        n *= d  # Python ints: no overflow, however large the declared dims
    if tensor_proto.data_type in (0, onnx.TensorProto.STRING) or \
            tensor_proto.data_location == onnx.TensorProto.EXTERNAL:
        return  # strings have no fixed width; external data is checked once it is read
    if tensor_proto.HasField("raw_data"):
        bits = _SUB_BYTE.get(type_name) or 8 * np_dtype_of(tensor_proto.data_type).itemsize
        want, have, unit = -(-n * bits // 8), len(tensor_proto.raw_data), "bytes of raw_data"
    elif type_name in _SUB_BYTE:
        return  # packing in the typed fields varies by type: onnx's own reader checks it
    else:
        field = onnx.helper.tensor_dtype_to_field(tensor_proto.data_type)
        want = n * (2 if type_name.startswith("COMPLEX") else 1)
        have, unit = len(getattr(tensor_proto, field)), f"values in {field}"
    if want != have:
        raise InvalidOnnxModel(f"ember.onnx: {what} declares dims {dims} ({n} elements of "
                               f"{type_name}, {want} {unit}) but holds {have} {unit}")


def to_array(tensor_proto, base_dir=None, what=None):
    """A TensorProto (inline or external data) as a NumPy array, its declared dims first
    checked against its data (:class:`InvalidOnnxModel` names the tensor if they differ)."""
    onnx = require_onnx()
    what = what or f"tensor {tensor_proto.name!r}"
    if base_dir is not None and tensor_proto.data_location == onnx.TensorProto.EXTERNAL:
        from onnx.external_data_helper import load_external_data_for_tensor
        try:
            load_external_data_for_tensor(tensor_proto, base_dir)
        except ValueError as e:  # a data file shorter than the model says
            raise InvalidOnnxModel(f"ember.onnx: {what}: {e}") from e
    _check_declared_size(tensor_proto, what)
    try:
        return onnx.numpy_helper.to_array(tensor_proto)
    except (ValueError, TypeError) as e:
        raise InvalidOnnxModel(f"ember.onnx: {what} cannot be read: {e}") from e
