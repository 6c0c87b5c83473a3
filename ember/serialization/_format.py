"""The facts of PyTorch's checkpoint format that both the writer and the reader need."""
from ember.backend import dtypes as _dt

FORMAT_VERSION = 3  # the `version` record torch 2.x writes and reads
ALIGN = 64  # storage records start at multiples of 64 bytes

STORAGE_OF = {"float32": "FloatStorage", "float64": "DoubleStorage", "float16": "HalfStorage",
              "int64": "LongStorage", "int32": "IntStorage", "int16": "ShortStorage",
              "int8": "CharStorage", "uint8": "ByteStorage", "bool": "BoolStorage",
              "complex64": "ComplexFloatStorage", "complex128": "ComplexDoubleStorage",
              "bfloat16": "BFloat16Storage"}
DTYPE_OF_STORAGE = {v: _dt._BY_NAME[k] for k, v in STORAGE_OF.items() if k in _dt._BY_NAME}
# dtypes torch 2.x writes as untyped (byte) storages rebuilt by _rebuild_tensor_v3
UNTYPED = {"uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
           "float8_e5m2fnuz", "float8_e8m0fnu", "complex32"}


class CheckpointError(RuntimeError):
    """A checkpoint file is damaged; the message says which part."""
