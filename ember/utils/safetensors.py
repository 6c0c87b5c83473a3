"""The safetensors format: an 8-byte header length, a JSON header, then raw tensor bytes.

Files written here load with the ``safetensors`` package (NumPy and torch APIs) and
vice versa. Like safetensors itself, a file holds a flat dict of contiguous tensors
that share no memory.
"""
import json
import struct

import numpy as np

from ember.utils._atomic import atomic_write

__all__ = ["save_file", "load_file", "save", "load", "save_model", "load_model"]

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


def _root(arr):
    while isinstance(arr.base, np.ndarray):
        arr = arr.base
    return arr


def _duplicates(state_dict, preferred=()):
    """Map a kept name to the names that alias it (tied weights), as the safetensors package.

    Names whose data overlap form a group; the kept one must cover its whole buffer
    (the others are views of it), preferring names in ``preferred``, then the first by name.
    """
    arrays = {k: v.detach()._host() for k, v in state_dict.items()}
    groups = {}
    for name, arr in arrays.items():
        if arr.size:
            groups.setdefault(id(_root(arr)), []).append(name)
    out = {}
    for names in groups.values():
        if len(names) < 2:
            continue
        root = _root(arrays[names[0]])
        start = root.__array_interface__["data"][0]
        complete = sorted(n for n in names if arrays[n].nbytes == root.nbytes
                          and arrays[n].__array_interface__["data"][0] == start)
        if not complete:
            raise RuntimeError(f"safetensors: tensors {sorted(names)} share memory but none "
                               "covers it all; clone them before saving")
        keep = ([n for n in complete if n in preferred] or complete)[0]
        out[keep] = sorted(n for n in names if n != keep)
    return out


def save_model(model, filename, metadata=None, force_contiguous=True):
    """Save ``model.state_dict()`` to a safetensors file, storing tied weights once.

    Each dropped alias is recorded in the metadata as ``alias -> kept name`` (unless
    ``metadata`` already has that key), as ``safetensors.torch.save_model`` does. The
    file is replaced atomically. Tensors are always stored contiguous, so
    ``force_contiguous`` is accepted for compatibility only.
    """
    state_dict = model.state_dict()
    for keep, aliases in _duplicates(state_dict).items():
        for alias in aliases:
            metadata = {} if metadata is None else metadata
            metadata.setdefault(alias, keep)
            del state_dict[alias]
    save_file(state_dict, filename, metadata=metadata)


def load_model(model, filename, strict=True, device="cpu"):
    """Load a file written by :func:`save_model` into ``model``; aliases are refilled by tying.

    Returns ``(missing, unexpected)`` as ``safetensors.torch.load_model`` does; with
    ``strict=True`` either being non-empty raises ``RuntimeError``.
    """
    state_dict = load_file(filename, device=device)
    aliases = _duplicates(model.state_dict(), preferred=set(state_dict))
    missing, unexpected = model.load_state_dict(state_dict, strict=False)
    missing = set(missing)
    unexpected = list(unexpected)
    for group in aliases.values():
        for alias in group:
            if alias in missing:
                missing.remove(alias)
            else:
                unexpected.append(alias)
    if strict and (missing or unexpected):
        error = f"Error(s) in loading state_dict for {type(model).__name__}:"
        if missing:
            error += "\n    Missing key(s) in state_dict: " + \
                ", ".join(f'"{k}"' for k in sorted(missing))
        if unexpected:
            error += "\n    Unexpected key(s) in state_dict: " + \
                ", ".join(f'"{k}"' for k in sorted(unexpected))
        raise RuntimeError(error)
    return missing, unexpected


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
