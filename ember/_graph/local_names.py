"""Names of traced values taken from the Python locals that hold them (``jit.trace``).

When an op reads a value that has no name yet, PyTorch's tracer looks at the innermost
Python frame for a local holding that very tensor and names the value after it
(``%y``, printed ``y`` in ``.code``). ember's ops run through its own Python code, so
the frame searched is the one PyTorch would see: the user's code, or the ``forward``
of an ``nn`` module and the ``nn.functional`` functions that are Python in PyTorch too
(where the local is usually ``input``).
"""
import os

__all__ = ["name_from_locals"]

_EMBER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_NN_DIR = os.path.join(_EMBER_DIR, "nn", "")
# nn.functional functions that PyTorch runs in C++ (no Python frame of their own)
_NATIVE_FUNCTIONAL = {
    "linear", "bilinear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
    "conv_transpose2d", "conv_transpose3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
    "gelu", "softplus", "hardshrink", "softshrink", "logsigmoid", "pixel_shuffle",
    "pixel_unshuffle", "channel_shuffle", "one_hot", "pdist", "cosine_similarity",
    "pairwise_distance", "hardtanh_", "elu_", "leaky_relu_", "rrelu_",
}


def _torch_frame(f):
    """The frame PyTorch's tracer would see as the innermost Python frame of the call
    running at ``f``."""
    while f is not None:
        path, name = f.f_code.co_filename, f.f_code.co_name
        if not path.startswith(_EMBER_DIR):
            return f
        if path.startswith(_NN_DIR) and not name.startswith("_"):
            base = os.path.basename(path)
            if (os.sep + "modules" + os.sep in path and name == "forward") or \
                    (base.startswith("functional") and name not in _NATIVE_FUNCTIONAL):
                return f
        f = f.f_back
    return None


def name_from_locals(trace, t, v, frame):
    """Name the unnamed value ``v`` of ``trace`` after a local holding ``t`` itself in
    the frame PyTorch would search from ``frame``. A name given before passes to the
    newer value; the older one takes a suffix (``a.1``), as PyTorch renames it."""
    f = _torch_frame(frame)
    if f is None:
        return
    for k, x in f.f_locals.items():
        if x is t:
            if k == "self" or not k.isidentifier() or (k[0] == "_" and k[1:].isdigit()):
                return
            old = trace.local_names.get(k)
            if old is not None:
                n = trace.local_suffix.get(k, 0) + 1
                trace.local_suffix[k] = n
                old.name = f"{k}.{n}"
            elif k in trace.graph._names:
                k = trace.graph._fresh(k)   # an input's name: the new value is k.N
            trace.local_names[k] = v
            v.name = k
            return
