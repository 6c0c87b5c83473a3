"""The machinery of the ``ember.compile`` sweep over PyTorch's OpInfo table
(test_compile_opdb.py): an op's sample as a function of its tensors, the calls a
compiled function meets (other values, strides, ``requires_grad``, dtypes, shapes, the
first call again) and the comparison of each call with eager ember.

Each call runs twice from the same arrays, eagerly and compiled, with fresh input
tensors each time (so an in-place change is compared too). The results must agree in
values (to the bit: a compiled call replays eager's kernels), dtype, shape, strides,
``requires_grad``, which inputs an output is (``x.add_(y)`` returns ``x``) or shares
memory with (a view of an input), the inputs' values after the call (in-place ops and
``out=``), and the gradients of ``sum(output * w)`` (``w`` fixed random) with respect to
the inputs that require grad (to rounding: a capture call differentiates its recorded
graph, whose composites are their parts).
Where eager raises, the compiled call must raise the same type.
"""
import warnings

import numpy as np
import torch
from opdb_trace import _other_values
from test_opinfo import RANDOM_SAMPLE, _ember_fn, _flat, _key, _numpy, _samples, _to_ember

import ember
from ember._compile import Unsupported

MODES = ("default", "dynamic", "fullgraph")
# how many of an op's samples become compiled functions, and how many later samples are
# searched for calls with the same structure (other shapes, 0-d, empty)
FIRST = 2
SEARCH = 10


def _is_seq(x):
    return isinstance(x, (list, tuple)) and not isinstance(x, torch.Size) \
        and not hasattr(x, "_fields")


def tensors_of(x):
    """The tensors of a sample's argument tree, in a fixed order."""
    if isinstance(x, torch.Tensor):
        return [x]
    if _is_seq(x):
        return [t for v in x for t in tensors_of(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in tensors_of(v)]
    return []


def fill(x, it, cls):
    """The tree ``x`` with each tensor of class ``cls`` replaced by the next of ``it``."""
    if isinstance(x, cls):
        return next(it)
    if _is_seq(x):
        return type(x)(fill(v, it, cls) for v in x)
    if isinstance(x, dict):
        return {k: fill(v, it, cls) for k, v in x.items()}
    return x


def structure(x):
    """The tree without its tensors' shapes: equal for calls one function can take."""
    if isinstance(x, torch.Tensor):
        return ("T", x.dtype, x.layout)
    if _is_seq(x):
        return (type(x).__name__,) + tuple(structure(v) for v in x)
    if isinstance(x, dict):
        return tuple((k, structure(v)) for k, v in x.items())
    return repr(x)


class Call:
    """One call's inputs: per tensor its array (as the sample's torch tensor holds it),
    whether it requires grad, and how it is laid out (``"c"``: contiguous, ``"t"``: the
    same values as a transposed view of the transposed values, ``"s"``: every other
    element of a larger array)."""

    def __init__(self, label, arrays, grads, layouts=None):
        self.label, self.arrays, self.grads = label, arrays, grads
        self.layouts = layouts or ["c"] * len(arrays)

    def tensors(self):
        """Fresh ember tensors for one run of the call."""
        out = []
        for a, g, lay in zip(self.arrays, self.grads, self.layouts):
            if lay == "t" and a.ndim >= 2:
                t = ember.tensor(np.ascontiguousarray(np.swapaxes(a, -1, -2))).transpose(-1, -2)
            elif lay == "s" and a.ndim >= 1 and a.size:
                big = np.empty(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
                big[..., ::2] = a
                t = ember.tensor(big)[..., ::2]
            else:
                t = ember.tensor(a.copy())
            out.append(t.requires_grad_(True) if g else t)
        return out


def _float(a):
    return a.dtype.kind in "fc"


def grad_flags(op, arrays, on):
    """Which inputs require grad: the floating ones of a differentiable op, when ``on``."""
    return [bool(on and op.supports_autograd and _float(a)) for a in arrays]


def sample_calls(op, dtype, draws, index):
    """The calls of sample ``index``: ``(tree, [Call])``, or None when the sample has no
    strided tensor. ``draws``: the op's samples under seeds 0 and 1."""
    s = draws[0][index]
    if RANDOM_SAMPLE.get(op.name, lambda s: False)(s):  # it draws random numbers
        return None
    tree = (s.input, tuple(s.args), dict(s.kwargs))
    base = tensors_of(tree)
    if not base or any(t.layout != torch.strided or t.is_conj() or t.is_neg()
                       for t in base):
        return None
    arrays = [_numpy(t.detach()) for t in base]
    calls = [Call("first", arrays, grad_flags(op, arrays, True))]
    other = draws[1][index] if index < len(draws[1]) else None
    if other is not None:
        t2 = (other.input, tuple(other.args), dict(other.kwargs))
        same = structure(t2) == structure(tree) and \
            [tuple(t.shape) for t in tensors_of(t2)] == [a.shape for a in arrays]
        if same:
            others = [_numpy(t.detach()) for t in tensors_of(t2)]
            if all(np.array_equal(a, b, equal_nan=True) for a, b in zip(arrays, others)):
                # the sample draws no random values (unique's, combinations'...): other
                # values of its own, as the trace sweep makes them (floats redrawn with
                # the sample's signs, integers permuted)
                others = _other_values(arrays, index)
            calls.append(Call("other values", others, calls[0].grads))
    if any(a.ndim >= 2 for a in arrays):
        calls.append(Call("transposed layout", arrays, calls[0].grads,
                          ["t"] * len(arrays)))
    if any(a.ndim >= 1 and a.size for a in arrays):
        calls.append(Call("strided", arrays, calls[0].grads, ["s"] * len(arrays)))
    if any(calls[0].grads):
        calls.append(Call("no requires_grad", arrays, [False] * len(arrays)))
    swap = {np.dtype(np.float32): np.float64, np.dtype(np.float64): np.float32}
    if any(a.dtype in swap for a in arrays):
        cast = [a.astype(swap[a.dtype]) if a.dtype in swap else a for a in arrays]
        calls.append(Call("other float dtype", cast, calls[0].grads))
    # later samples with this structure (other shapes: 0-d, empty...), at most three
    found = 0
    for j, t in enumerate(draws[0]):
        if j == index or found == 3:
            continue
        tj = (t.input, tuple(t.args), dict(t.kwargs))
        if structure(tj) != structure(tree):
            continue
        arr = [_numpy(v.detach()) for v in tensors_of(tj)]
        if [a.shape for a in arr] == [a.shape for a in arrays]:
            continue
        found += 1
        calls.append(Call(f"sample {j} shapes {[a.shape for a in arr]}", arr,
                          grad_flags(op, arr, True)))
    calls.append(Call("first again", arrays, calls[0].grads))
    return tree, calls


def make_fn(op, tree, variant="op"):
    """The op as an ember function of the sample's tensors (``variant``: ``"op"``, the
    in-place method ``"inplace"``, or ``"out"``: the last argument is ``out=``)."""
    etree = _to_ember(tree)
    if variant == "inplace" and op.name.startswith("nn.functional."):
        efn = _ember_fn(op)

        def functional_inplace(*ts):
            i, a, k = fill(etree, iter(ts), ember.Tensor)
            return efn(i, *a, **k, inplace=True)
        return functional_inplace
    if variant == "inplace":
        name = op.name.split(".")[-1]
        name = name if name.endswith("_") else name + "_"
        if op.name.startswith("__"):
            name = "__i" + op.name[2:]
        method = getattr(ember.Tensor, name)

        def inplace(*ts):
            i, a, k = fill(etree, iter(ts), ember.Tensor)
            return method(i, *a, **k)
        return inplace
    efn = _ember_fn(op)
    if variant == "out":
        def with_out(*ts):
            i, a, k = fill(etree, iter(ts[:-1]), ember.Tensor)
            return efn(i, *a, **k, out=ts[-1])
        return with_out

    def fn(*ts):
        i, a, k = fill(etree, iter(ts), ember.Tensor)
        return efn(i, *a, **k)
    return fn


def _bits(a):
    return a.view(np.uint8) if a.dtype.kind != "O" and a.size and a.dtype.itemsize else a


def _weights(out, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(tuple(o.shape)).astype(o.detach().numpy().dtype)
            if o.is_floating_point() else None for o in out]


def _run(fn, call, out_like=None):
    """``(result or exception, inputs after the call, flat outputs, gradients)``."""
    ts = call.tensors()
    if out_like is not None:
        ts.append(ember.empty_like(out_like))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = fn(*ts)
    except Exception as e:  # noqa: BLE001 - compared with the other side's outcome
        return e, ts, None, None
    flat = [o for o in _flat(res) if isinstance(o, ember.Tensor)]
    diff = [o for o in flat if o.requires_grad and o.is_floating_point()]
    grads = None
    if diff:
        w = _weights(diff, 7)
        loss = sum((o * ember.tensor(wi)).sum() for o, wi in zip(diff, w))
        leaves = [t for t in ts if t.requires_grad]
        try:
            grads = ember.autograd.grad(loss, leaves, allow_unused=True)
        except Exception as e:  # noqa: BLE001 - compared with the other side's outcome
            grads = e
    return res, ts, flat, grads


def _same_array(a, b, what):
    assert a.shape == b.shape, f"{what}: shape {b.shape} != eager {a.shape}"
    assert a.dtype == b.dtype, f"{what}: dtype {b.dtype} != eager {a.dtype}"
    if a.dtype.kind in "fc":
        ok = np.array_equal(a, b, equal_nan=True) and \
            np.array_equal(np.signbit(a.real), np.signbit(b.real))
    else:
        ok = np.array_equal(a, b)
    if not ok:
        bad = np.argwhere(~((a == b) | (np.isnan(a) & np.isnan(b)) if a.dtype.kind in "fc"
                           else a != b))
        raise AssertionError(f"{what}: values differ from eager's (at {bad[:3].tolist()}; "
                             f"eager {a.ravel()[:4]}, compiled {b.ravel()[:4]})")


def compare_runs(eager, comp, what):
    """Raise AssertionError where the compiled run ``comp`` differs from ``eager``."""
    e_res, e_ts, e_flat, e_g = eager
    c_res, c_ts, c_flat, c_g = comp
    if isinstance(e_res, Exception):
        assert isinstance(c_res, Exception), \
            f"{what}: eager raised {type(e_res).__name__} ({str(e_res)[:100]}), compiled " \
            "returned"
        assert isinstance(c_res, type(e_res)) or isinstance(e_res, type(c_res)), \
            f"{what}: eager raised {type(e_res).__name__}, compiled {type(c_res).__name__}"
        return
    if isinstance(c_res, Exception):
        raise AssertionError(f"{what}: compiled raised {type(c_res).__name__}: "
                             f"{str(c_res)[:200]}")
    e_all, c_all = _flat(e_res), _flat(c_res)
    assert len(e_all) == len(c_all), f"{what}: {len(c_all)} outputs, eager {len(e_all)}"
    for j, (a, b) in enumerate(zip(e_all, c_all)):
        w = f"{what} output {j}"
        if not isinstance(a, ember.Tensor):
            assert type(a) is type(b) and (a == b or a != a and b != b), \
                f"{w}: {b!r} != eager {a!r}"
            continue
        assert isinstance(b, ember.Tensor), f"{w}: {type(b).__name__}, eager a Tensor"
        assert a.dtype == b.dtype, f"{w}: dtype {b.dtype} != eager {a.dtype}"
        assert tuple(a.shape) == tuple(b.shape), f"{w}: shape {tuple(b.shape)} != eager " \
            f"{tuple(a.shape)}"
        assert a.requires_grad == b.requires_grad, \
            f"{w}: requires_grad {b.requires_grad} != eager {a.requires_grad}"
        if getattr(a, "layout", ember.strided) != ember.strided:
            a, b = a.to_dense(), b.to_dense()
        if a.dtype == ember.complex32:  # (no NumPy twin: compared in complex64)
            a, b = a.cfloat(), b.cfloat()
        _same_array(a.detach().numpy(), b.detach().numpy(), w)
        if a.numel() > 1:
            assert a.stride() == b.stride(), f"{w}: strides {b.stride()} != eager " \
                f"{a.stride()}"
        ea = [k for k, t in enumerate(e_ts) if t is a]
        ca = [k for k, t in enumerate(c_ts) if t is b]
        assert ea == ca, f"{w}: is input {ca}, eager's is input {ea}"
        es = [k for k, t in enumerate(e_ts) if np.shares_memory(t._data, a._data)]
        cs = [k for k, t in enumerate(c_ts) if np.shares_memory(t._data, b._data)]
        assert es == cs, f"{w}: shares memory with inputs {cs}, eager's with {es}"
    for k, (a, b) in enumerate(zip(e_ts, c_ts)):
        _same_array(a.detach().numpy(), b.detach().numpy(), f"{what} input {k} after the call")
    if e_g is None:
        assert c_g is None, f"{what}: compiled outputs require grad, eager's do not"
        return
    assert c_g is not None, f"{what}: no differentiable output, eager has one"
    if isinstance(e_g, Exception) or isinstance(c_g, Exception):
        assert type(e_g) is type(c_g), f"{what}: backward gave {type(c_g).__name__}, " \
            f"eager's {type(e_g).__name__}"
        return
    for k, (a, b) in enumerate(zip(e_g, c_g)):
        if a is None or b is None:
            assert a is None and b is None, f"{what} grad {k}: None on one side only"
            continue
        a, b = a.numpy(), b.numpy()
        if a.dtype.kind == "f" and a.shape == b.shape:
            # a capture call differentiates the graph it recorded, where a composite is
            # its parts (addmm's alpha scales the product, not the gradient): the sums
            # group differently, which is rounding (float32 1e-5, float64 1e-12)
            tol = 1e-5 if a.dtype == np.float32 else 1e-12
            scale = max(1.0, float(np.abs(a[np.isfinite(a)]).max(initial=0)))
            np.testing.assert_allclose(b, a, rtol=tol, atol=tol * scale, equal_nan=True,
                                       err_msg=f"{what} grad {k}")
            continue
        _same_array(a, b, f"{what} grad {k}")


def check_calls(fn, calls, mode, where, variant="op"):
    """Compile ``fn`` in ``mode`` and run every call eagerly and compiled. Returns
    ``(calls compared, broke)``: ``broke`` when a ``fullgraph=True`` capture raised
    ``Unsupported`` (a graph break, documented)."""
    kw = {"dynamic": True} if mode == "dynamic" else \
        {"fullgraph": True} if mode == "fullgraph" else {}
    cf = ember.compile(fn, **kw)
    n = 0
    for call in calls:
        out_like = None
        eager = _run(fn, call)
        if variant == "out":
            if isinstance(eager[0], Exception) or not isinstance(eager[0], ember.Tensor):
                continue
            out_like = eager[0]
            eager = _run(fn, call, out_like)
        comp = _run(cf, call, out_like)
        if isinstance(comp[0], Unsupported) and mode == "fullgraph":
            return n, True
        compare_runs(eager, comp, f"{where} {mode} call {call.label!r}")
        n += 1
    return n, False


def _dtypes(op):
    supported = op.supported_dtypes("cpu")
    out = [d for d in (torch.float32, torch.float64) if d in supported]
    ints = [d for d in (torch.int64, torch.int32, torch.uint8, torch.bool) if d in supported]
    return out + ints[:1]


def _draws(op, dtype):
    """The op's first samples under seed 0 (as test_opinfo.py draws them) and under seed
    1 (the same shapes and arguments, other values)."""
    first = _samples(op, dtype, False, SEARCH)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(1)
        second = []
        for s in op.sample_inputs_func(op, "cpu", dtype, False):
            second.append(s)
            if len(second) == FIRST:
                break
    return first, second


def check_op(op, modes=MODES, variants=("op", "inplace", "out")):
    """Every check of one op: ``{(dtype, sample, variant, mode): error or None}`` and the
    set of ``(dtype, sample, variant)`` whose ``fullgraph=True`` capture broke."""
    results, broke = {}, set()
    key = _key(op)
    for dtype in _dtypes(op):
        try:
            draws = _draws(op, dtype)
        except Exception:  # noqa: BLE001 - a generator torch cannot run at this dtype
            continue
        for i in range(min(FIRST, len(draws[0]))):
            found = sample_calls(op, dtype, draws, i)
            if found is None:
                continue
            tree, calls = found
            for variant in variants:
                if variant == "inplace" and op.inplace_variant is None:
                    continue
                if variant == "out" and not op.supports_out:
                    continue
                vcalls = calls
                if variant != "op":  # an in-place op or out= on leaves: nothing to differentiate
                    vcalls = [Call(c.label, c.arrays, [False] * len(c.arrays), c.layouts)
                              for c in calls if c.label != "no requires_grad"]
                fn = make_fn(op, tree, variant)
                where = f"{key} {str(dtype)[6:]} sample {i} {variant}"
                for mode in modes:
                    try:
                        n, b = check_calls(fn, vcalls, mode, where, variant)
                        results[(str(dtype)[6:], i, variant, mode)] = None if n or b else "skip"
                        if b:
                            broke.add((str(dtype)[6:], i, variant))
                    except AssertionError as e:
                        results[(str(dtype)[6:], i, variant, mode)] = str(e)
    return results, broke
