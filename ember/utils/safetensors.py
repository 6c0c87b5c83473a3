"""The safetensors format: an 8-byte header length, a JSON header, then raw tensor bytes.

Files written here load with the ``safetensors`` package (NumPy and torch APIs) and
vice versa. Like safetensors itself, a file holds a flat dict of contiguous tensors
that share no memory.
"""
import json
import struct

import numpy as np

from ember.utils._atomic import atomic_write

__all__ = ["save_file", "load_file", "save", "load"]

_CODES = {"float16": "F16", "float32": "F32", "float64": "F64", "int8": "I8", "int16": "I16",
          "int32": "I32", "int64": "I64", "uint8": "U8", "bool": "BOOL"}
_FROM_CODE = {v: k for k, v in _CODES.items()}


def save(tensors, metadata=None):
    """Serialise a dict of name → tensor to safetensors bytes."""
    from ember._tensor import Tensor
    header = {}
    blobs = []
    offset = 0
    arrays = {}
    for name, t in tensors.items():
        if not isinstance(name, str):
            raise TypeError(f"safetensors keys must be strings, got {type(name).__name__}")
        if not isinstance(t, Tensor):
            raise TypeError(f"safetensors values must be tensors; {name!r} is "
                            f"{type(t).__name__}")
        arrays[name] = t.detach()._host()
    _check_no_sharing(arrays)
    # larger alignments first, then by name: the order the safetensors package uses
    for name in sorted(arrays, key=lambda k: (-arrays[k].itemsize, k)):
        arr = arrays[name]
        data = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"),
                                                copy=False).tobytes()
        header[name] = {"dtype": _CODES[str(arr.dtype)], "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if metadata is not None:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise ValueError("safetensors metadata must map strings to strings")
        header["__metadata__"] = metadata
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * ((-len(raw)) % 8)
    return struct.pack("<Q", len(raw)) + raw + b"".join(blobs)


def _check_no_sharing(arrays):
    names = list(arrays)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            x, y = arrays[a], arrays[b]
            if x.size and y.size and np.shares_memory(x, y):
                raise RuntimeError(f"tensors {a!r} and {b!r} share memory; safetensors stores "
                                   "each tensor on its own: clone one of them first")


def save_file(tensors, filename, metadata=None):
    """Write a dict of name → tensor to a safetensors file, replacing it atomically."""
    data = save(tensors, metadata)
    with atomic_write(filename, "wb") as f:
        f.write(data)


def load(data, device="cpu"):
    """Read safetensors bytes into a dict of name → tensor."""
    return _parse(memoryview(data), device)


def load_file(filename, device="cpu"):
    """Read a safetensors file into a dict of name → tensor."""
    with open(filename, "rb") as f:
        return _parse(memoryview(f.read()), device)


def _parse(buf, device):
    from ember._tensor import _make
    if len(buf) < 8:
        raise ValueError("safetensors data is truncated: no header length")
    (n,) = struct.unpack("<Q", buf[:8])
    if n > len(buf) - 8:
        raise ValueError(f"safetensors header of {n} bytes runs past the end of the data")
    try:
        header = json.loads(bytes(buf[8:8 + n]))
    except ValueError as e:
        raise ValueError(f"safetensors header is not valid JSON: {e}") from None
    body = buf[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        code = info["dtype"]
        if code not in _FROM_CODE:
            raise TypeError(f"safetensors dtype {code} of {name!r} is not supported by ember")
        dt = np.dtype(_FROM_CODE[code]).newbyteorder("<")
        begin, end = info["data_offsets"]
        shape = tuple(info["shape"])
        if end > len(body) or begin > end or (end - begin) != int(np.prod(shape)) * dt.itemsize:
            raise ValueError(f"safetensors entry {name!r} does not fit the data (offsets "
                             f"{begin}..{end}, shape {list(shape)})")
        arr = np.frombuffer(body[begin:end], dtype=dt).reshape(shape).astype(dt.newbyteorder("="))
        t = _make(arr, False)
        out[name] = t if device == "cpu" else t.to(device)
    return out
