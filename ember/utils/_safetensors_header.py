"""Reading and writing the JSON header of a safetensors file, with the package's checks.

A safetensors file is an 8-byte little-endian header length ``n``, ``n`` bytes of UTF-8
JSON, then the tensors' bytes. The header is checked here as the ``safetensors`` package
(0.8) checks it before any tensor is touched, so a file loads with ember exactly when it
loads with the package (one deliberate difference: duplicate JSON keys are always refused,
see :func:`parse_header`):

- ``n`` is at most 100,000,000 and the header lies within the data;
- the header is valid UTF-8 and strict JSON (no NaN/Infinity, no lone surrogate escapes,
  numbers within double range, nesting below 128 levels), and a JSON object;
- ``__metadata__``, if present and not null, maps strings to strings;
- every other entry gives ``dtype`` (a known code), ``shape`` (a list of unsigned 64-bit
  integers) and ``data_offsets`` (two of them), as an object (extra fields are ignored)
  or as a three-element list in that order;
- sorted by offsets, the tensors tile the data from 0 with no hole or overlap, each one's
  byte length is its element count times its bit width / 8 (computed with the package's
  64-bit overflow checks), and the last one ends exactly at the end of the data.
"""
import json

__all__ = ["SafetensorError", "CODES", "MAX_HEADER", "parse_header", "header_bytes",
           "code_for", "ember_dtype"]

MAX_HEADER = 100_000_000
_U64 = 2 ** 64
_MAX_DEPTH = 127  # serde_json, the package's parser, refuses nesting of 128 levels

# The package's dtype codes in its own order (saving sorts by it, widest first), with
# their width in bits and ember's dtype name (None: ember has no such dtype).
CODES = {
    "BOOL": (8, "bool"), "F4": (4, None), "F6_E2M3": (6, None), "F6_E3M2": (6, None),
    "U8": (8, "uint8"), "I8": (8, "int8"), "F8_E5M2": (8, "float8_e5m2"),
    "F8_E4M3": (8, "float8_e4m3fn"), "F8_E8M0": (8, "float8_e8m0fnu"),
    "F8_E4M3FNUZ": (8, "float8_e4m3fnuz"), "F8_E5M2FNUZ": (8, "float8_e5m2fnuz"),
    "I16": (16, "int16"), "U16": (16, "uint16"), "F16": (16, "float16"),
    "BF16": (16, "bfloat16"), "I32": (32, "int32"), "U32": (32, "uint32"),
    "F32": (32, "float32"), "C64": (64, "complex64"), "F64": (64, "float64"),
    "I64": (64, "int64"), "U64": (64, "uint64"),
}
_ORDER = {code: i for i, code in enumerate(CODES)}
_BY_EMBER = {name: code for code, (_, name) in CODES.items() if name}


class SafetensorError(ValueError):
    """A safetensors file or header that the format (and the ``safetensors`` package) refuses.

    A ``ValueError`` subclass, so ``except ValueError`` keeps catching damaged data.
    """


def _refuse(msg):
    raise SafetensorError("safetensors: " + msg)


def code_for(name, dtype_name):
    """The safetensors code of an ember dtype, or a clear error naming the tensor."""
    code = _BY_EMBER.get(dtype_name)
    if code is None:
        _refuse(f"tensor {name!r} has dtype {dtype_name}, which the safetensors format "
                f"cannot store (its dtypes: {', '.join(sorted(_BY_EMBER))})")
    return code


def ember_dtype(name, code):
    """ember's dtype for a safetensors code; a clear error when ember has none."""
    ember_name = CODES[code][1]
    if ember_name is None:
        _refuse(f"tensor {name!r} has dtype {code}, which ember does not support")
    from ember.backend import dtypes
    return getattr(dtypes, ember_name)  # without ml_dtypes, its .np names the extra


# ----- JSON, as strict as serde_json -----------------------------------------------------
def _pairs(items):
    out = {}
    for k, v in items:
        if k in out:
            _refuse(f"duplicate key {k!r} in the header")
        out[k] = v
    return out


def _int(text):
    if text == "-0":
        return -0.0  # serde_json reads it as a float: never a valid size
    try:
        v = int(text)
    except ValueError:  # Python's digit limit: far beyond any double
        _refuse("number out of range in the header")
    if -2 ** 63 <= v < _U64:
        return v
    return _float(text)  # serde_json falls back to a double for wider integers


def _float(text):
    v = float(text)
    if v in (float("inf"), float("-inf")):
        _refuse(f"number {text[:40]} out of range in the header")
    return v


def _constant(text):
    _refuse(f"{text} is not JSON (in the header)")


def _check_tree(root):
    """Nesting depth and lone UTF-16 surrogates, which Python's json lets through."""
    stack = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, str):
            try:
                node.encode("utf-8")
            except UnicodeEncodeError:
                _refuse("the header holds a lone surrogate escape (not valid Unicode)")
            continue
        if not isinstance(node, (dict, list)):
            continue
        if depth > _MAX_DEPTH:
            _refuse(f"the header nests deeper than {_MAX_DEPTH} levels")
        if isinstance(node, dict):
            stack.extend((k, depth) for k in node)
            node = node.values()
        stack.extend((v, depth + 1) for v in node)


def _decode(raw):
    try:
        text = str(memoryview(raw), "utf-8")  # no intermediate bytes copy
    except UnicodeDecodeError as e:
        _refuse(f"the header is not valid UTF-8 ({e.reason} at byte {e.start})")
    try:
        header = json.loads(text, object_pairs_hook=_pairs, parse_int=_int,
                            parse_float=_float, parse_constant=_constant)
    except SafetensorError:
        raise
    except RecursionError:
        _refuse(f"the header nests deeper than {_MAX_DEPTH} levels")
    except ValueError as e:
        _refuse(f"the header is not valid JSON: {e}")
    _check_tree(header)
    if not isinstance(header, dict):
        _refuse(f"the header is a JSON {type(header).__name__}, not an object")
    return header


# ----- the header's structure ------------------------------------------------------------
def _usize(v):
    return type(v) is int and 0 <= v < _U64


def _dtype(name, v):
    if isinstance(v, dict) and len(v) == 1:  # serde's map form of an enum: {"F32": null}
        (v, unit), = v.items()
        if unit is not None:
            _refuse(f"tensor {name!r}: dtype {{{v!r}: ...}} must map to null")
    if not isinstance(v, str):
        _refuse(f"tensor {name!r}: dtype must be a string, got {json.dumps(v)[:60]}")
    if v not in CODES:
        _refuse(f"tensor {name!r}: unknown dtype {v[:40]!r} (known: {', '.join(CODES)})")
    return v


def _entry(name, info):
    if isinstance(info, list):
        if len(info) != 3:
            _refuse(f"tensor {name!r}: a list entry must be [dtype, shape, data_offsets], "
                    f"got {len(info)} elements")
        dtype, shape, offsets = info
    elif isinstance(info, dict):
        for field in ("dtype", "shape", "data_offsets"):
            if field not in info:
                _refuse(f"tensor {name!r}: missing field {field!r}")
        dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
    else:
        _refuse(f"tensor {name!r}: expected an object with dtype, shape and data_offsets, "
                f"got {json.dumps(info)[:60]}")
    code = _dtype(name, dtype)
    if not isinstance(shape, list) or not all(_usize(d) for d in shape):
        _refuse(f"tensor {name!r}: shape must be a list of non-negative integers below "
                f"2**64, got {json.dumps(shape)[:80]}")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(map(_usize, offsets))):
        _refuse(f"tensor {name!r}: data_offsets must be two non-negative integers below "
                f"2**64, got {json.dumps(offsets)[:80]}")
    return code, tuple(shape), offsets[0], offsets[1]


def _nbytes(name, code, shape):
    n = 1
    for d in shape:  # the package's checked multiplication: overflow in any step refuses
        n *= d
        if n >= _U64:
            _refuse(f"tensor {name!r}: shape {list(shape)} overflows 64 bits")
    bits = n * CODES[code][0]
    if bits >= _U64:
        _refuse(f"tensor {name!r}: shape {list(shape)} of {code} overflows 64 bits")
    if bits % 8:
        _refuse(f"tensor {name!r}: {n} elements of {code} do not fill whole bytes")
    return bits // 8


def parse_header(raw, data_len):
    """Check a header (its JSON bytes) against ``data_len`` bytes of tensor data.

    Returns ``(entries, metadata)``: ``entries`` is a list of
    ``(name, code, shape, begin, end)`` in file order (offsets relative to the data), and
    ``metadata`` the ``__metadata__`` dict or None. Raises :class:`SafetensorError`.

    Stricter than the package in one respect: a key repeated in any JSON object is refused
    (the package keeps the last of two same-named tensors, and of two metadata entries),
    since readers that keep the first would see a different file.
    """
    header = _decode(raw)
    metadata = header.pop("__metadata__", None)
    if metadata is not None:
        if not isinstance(metadata, dict):
            _refuse(f"__metadata__ must be an object of strings, got {json.dumps(metadata)[:60]}")
        for k, v in metadata.items():
            if not isinstance(v, str):
                _refuse(f"__metadata__[{k!r}] must be a string, got {json.dumps(v)[:60]}")
    entries = [(name,) + _entry(name, info) for name, info in header.items()]
    entries.sort(key=lambda e: (e[3], e[4]))
    start = 0
    for name, code, shape, begin, end in entries:
        if begin != start or end < begin:
            what = "overlaps the previous tensor" if begin < start else (
                "leaves a hole before it" if begin > start else "ends before it begins")
            _refuse(f"invalid data_offsets [{begin}, {end}] for tensor {name!r}: it {what}")
        start = end
        size = _nbytes(name, code, shape)
        if end - begin != size:
            _refuse(f"tensor {name!r}: shape {list(shape)} of {code} needs {size} bytes but "
                    f"data_offsets [{begin}, {end}] give {end - begin}")
    if start != data_len:
        _refuse(f"the tensors cover {start} bytes of data but {data_len} follow the header "
                "(the file must end where the last tensor ends)")
    return entries, metadata


def header_bytes(specs, metadata):
    """The padded JSON header for ``specs``, a list of ``(name, code, shape, nbytes)``.

    Tensors are laid out as the package lays them out (widest dtype code first, then by
    name), so the header is byte-identical to the package's. Returns
    ``(header, ordered_specs)``.
    """
    specs = sorted(specs, key=lambda s: (-_ORDER[s[1]], s[0]))
    header = {}
    if metadata is not None:
        if not isinstance(metadata, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise SafetensorError("safetensors metadata must map strings to strings")
        header["__metadata__"] = metadata
    offset = 0
    for name, code, shape, nbytes in specs:
        header[name] = {"dtype": code, "shape": list(shape),
                        "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    try:
        raw = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        _refuse("a tensor name or metadata string is not valid Unicode (lone surrogate)")
    raw += b" " * ((-len(raw)) % 8)
    return raw, specs
