"""The safetensors format: an 8-byte header length, a JSON header, then raw tensor bytes.

Files written here load with the ``safetensors`` package (NumPy and torch APIs) and
vice versa, for every dtype both have: bool, the integers (u)int8..64, float16/32/64,
bfloat16, the float8 kinds (``F8_E4M3`` is ``float8_e4m3fn``) and complex64 (``C64``).
Like safetensors itself, a file holds a flat dict of contiguous tensors that share no
memory. Headers are checked as the package checks them (see ``_safetensors_header``);
problems raise :class:`SafetensorError`, a ``ValueError``.
"""
import io
import os
import struct
import sys

import numpy as np

from ember.utils._atomic import atomic_write
from ember.utils._safetensors_header import (
    MAX_HEADER,
    SafetensorError,
    code_for,
    ember_dtype,
    header_bytes,
    parse_header,
)

__all__ = ["save_file", "load_file", "save", "load", "save_model", "load_model",
           "SafetensorError"]


def _arrays(tensors):
    from ember._tensor import Tensor
    if not isinstance(tensors, dict):
        raise TypeError(f"safetensors expects a dict of name -> tensor, got "
                        f"{type(tensors).__name__}")
    arrays = {}
    for name, t in tensors.items():
        if not isinstance(name, str):
            raise TypeError(f"safetensors keys must be strings, got {type(name).__name__}")
        if not isinstance(t, Tensor):
            raise TypeError(f"safetensors values must be tensors; {name!r} is "
                            f"{type(t).__name__}")
        if name == "__metadata__":
            raise SafetensorError("safetensors: a tensor cannot be named '__metadata__' "
                                  "(the name is reserved for the file's metadata)")
        code_for(name, t.dtype.name)
        arrays[name] = t.detach()._host()
    _check_no_sharing(arrays)
    return arrays


def _write(f, tensors, metadata):
    """Write the file's bytes to ``f`` one tensor at a time (no whole-file copy)."""
    arrays = _arrays(tensors)
    specs = [(name, code_for(name, t.dtype.name), arr.shape, arr.nbytes)
             for (name, arr), t in zip(arrays.items(), tensors.values())]
    raw, specs = header_bytes(specs, metadata)
    f.write(struct.pack("<Q", len(raw)))
    f.write(raw)
    for name, *_ in specs:
        arr = arrays[name]
        if not arr.size:
            continue
        arr = np.ascontiguousarray(arr).reshape(-1)
        if sys.byteorder == "big" and arr.itemsize > 1:  # pragma: no cover
            arr = arr.byteswap()
        # a bytes view: ml_dtypes arrays do not export the buffer protocol themselves
        f.write(memoryview(arr.view(np.uint8)))


def save(tensors, metadata=None):
    """Serialise a dict of name -> tensor to safetensors bytes."""
    out = io.BytesIO()
    _write(out, tensors, metadata)
    return out.getvalue()


def _byte_bounds(arr):
    try:
        from numpy.lib.array_utils import byte_bounds
    except ImportError:  # NumPy < 2
        byte_bounds = np.byte_bounds
    return byte_bounds(arr)


def _check_no_sharing(arrays):
    """Refuse tensors whose memory overlaps, comparing only those whose byte spans meet
    (a sweep over the spans sorted by start, so a large state dict costs n log n)."""
    spans = sorted((*_byte_bounds(a), name) for name, a in arrays.items() if a.size)
    open_spans = []
    for lo, hi, name in spans:
        open_spans = [(h, n) for h, n in open_spans if h > lo]
        for _, other in open_spans:
            if np.shares_memory(arrays[other], arrays[name]):
                raise RuntimeError(f"tensors {other!r} and {name!r} share memory; safetensors "
                                   "stores each tensor on its own: clone one of them first")
        open_spans.append((hi, name))


def save_file(tensors, filename, metadata=None):
    """Write a dict of name -> tensor to a safetensors file, replacing it atomically."""
    with atomic_write(filename, "wb") as f:
        _write(f, tensors, metadata)


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
    """Read safetensors bytes into a dict of name -> tensor.

    Each tensor gets its own writable copy of its bytes, taken straight from ``data``.
    """
    buf = np.frombuffer(memoryview(data).cast("B"), np.uint8)
    entries, body = _read_header(len(buf), lambda lo, hi: buf[lo:hi])

    def fill(arr, lo, hi):
        arr.reshape(-1).view(np.uint8)[...] = buf[body + lo:body + hi]
    return _tensors(entries, fill, device)


def load_file(filename, device="cpu"):
    """Read a safetensors file into a dict of name -> tensor.

    The header is checked before any tensor is read; each tensor is then read straight
    into its own array, so loading takes about the file's size in memory.
    """
    with open(filename, "rb") as f:
        size = os.fstat(f.fileno()).st_size

        def read(lo, hi):
            f.seek(lo)
            return _read_exact(f, bytearray(hi - lo))
        entries, body = _read_header(size, read)

        def fill(arr, lo, hi):
            f.seek(body + lo)
            _read_exact(f, memoryview(arr.reshape(-1).view(np.uint8)))
        return _tensors(entries, fill, device)


def _read_exact(f, view):
    view = memoryview(view)
    got = 0
    while got < len(view):
        n = f.readinto(view[got:])
        if not n:
            raise SafetensorError("safetensors: the file ended early (was it truncated "
                                  "while being read?)")
        got += n
    return view.obj


def _read_header(size, read):
    """Check the header length and the header; return (entries, offset of the data)."""
    if size < 8:
        raise SafetensorError(f"safetensors: {size} bytes is too short for the 8-byte "
                              "header length")
    (n,) = struct.unpack("<Q", bytes(read(0, 8)))
    if n > MAX_HEADER:
        raise SafetensorError(f"safetensors: header length {n} is over the "
                              f"{MAX_HEADER:,}-byte limit")
    if n > size - 8:
        raise SafetensorError(f"safetensors: header length {n} runs past the end of the "
                              f"data ({size} bytes)")
    entries, _ = parse_header(read(8, 8 + n), size - 8 - n)
    return entries, 8 + n


def _tensors(entries, fill, device):
    from ember._tensor import _make
    dtypes = [ember_dtype(name, code) for name, code, *_ in entries]
    out = {}
    for (name, code, shape, lo, hi), dt in zip(entries, dtypes):
        try:
            arr = np.empty(shape, dt.np)
        except ValueError:  # valid for the format, but past NumPy's (and torch's) limits
            raise SafetensorError(f"safetensors: tensor {name!r} of shape {list(shape)} is "
                                  "past what NumPy can represent") from None
        if hi > lo:
            fill(arr, lo, hi)
            if sys.byteorder == "big" and arr.itemsize > 1:  # pragma: no cover
                arr.byteswap(inplace=True)
        if code == "BOOL":  # a byte other than 0/1 would be a bool NumPy mishandles
            np.not_equal(arr.view(np.uint8), 0, out=arr)
        t = _make(arr, False)
        out[name] = t if device == "cpu" else t.to(device)
    return out
