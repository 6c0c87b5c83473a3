"""The optimizers of PyTorch's OptimizerInfo table (``optim_db``) run on ember and torch.

A case is one ``OptimizerInput`` of one ``OptimizerInfo`` (with each of the global
flags foreach / fused / differentiable the table lists for the CPU, and the inputs the
table keeps for accelerators, such as ``capturable`` and Tensor betas), at one
parameter dtype (float32, float64 and, where the table says the optimizer supports
them, complex64), optionally with the parameters split into two param groups. Both
libraries start from the same parameters (0-d, 1-d, 2-d, a transposed 2-d one and an
empty one; only 2-d ones for Muon) and get the same gradients (the 1-d one has none on
some steps; on the last step the 2-d one's holds NaN, inf, -inf and -0.0); LBFGS
minimizes a small quadratic through a closure; SparseAdam gets sparse gradients (a row
twice). ``run_case`` compares the parameters after every step, then the state dicts
(structure, dtypes, values), then loads each library's state dict into the other and
compares three more steps.
It returns None when everything agrees, else the first difference as a message.
"""
import copy
import inspect
import math
import re
import warnings

import numpy as np
import torch
from torch.testing._internal.common_optimizers import (
    _get_optim_inputs_including_global_cliquey_kwargs,
    optim_db,
)

import ember

STEPS = 10
MORE = 3
NO_GRAD_STEPS = (2, 5, 6)  # steps on which the 1-d parameter has no gradient
DTYPES = (np.float32, np.float64)
SPECIAL_STEP = STEPS - 1  # the step whose 2-d gradient holds NaN, infinities and -0.0


def _inputs(info):
    """``(desc, kwargs)`` of every input of ``info`` on the CPU, flags included; with
    ``foreach=True`` too (the table leaves it to accelerators, but PyTorch runs it on the
    CPU); then the accelerator-only inputs (``capturable``, Tensor betas) on the CPU."""
    rows = [(o.desc, o.kwargs) for o in
            _get_optim_inputs_including_global_cliquey_kwargs("cpu", None, info)]
    if "foreach" in info.supported_impls:
        rows += [(desc + " & foreach (on the CPU)", dict(kwargs, foreach=True))
                 for desc, kwargs in rows if not any(kwargs.get(k) for k in
                                                     ("fused", "differentiable"))]
    seen = [repr(sorted(o.kwargs.items(), key=str)) for o in info.optim_inputs_func("cpu")]
    for o in info.optim_inputs_func("cuda"):
        if repr(sorted(o.kwargs.items(), key=str)) not in seen:
            rows.append((o.desc + " (accelerator input, on the CPU)", o.kwargs))
    return rows


def _cases():
    cases = []
    for info in optim_db:
        for desc, kwargs in _inputs(info):
            for dtype in DTYPES + (np.complex64,) * info.supports_complex:
                cases.append((info.name, desc, kwargs, dtype, False))
                flags = [k for k in ("foreach", "fused", "differentiable") if kwargs.get(k)]
                if info.supports_param_groups and not flags:
                    cases.append((info.name, desc, kwargs, dtype, True))
    return cases


CASES = _cases()


def case_id(case):
    name, desc, _, dtype, groups = case
    return f"{name}-{desc}-{np.dtype(dtype).name}" + ("-groups" if groups else "")


# ----- the two libraries' objects from NumPy -------------------------------------------
def _shapes(name):
    if name == "Muon":
        return [(3, 4), (2, 5), (4, 3)]
    if name == "SparseAdam":  # (its gradients are sparse: no 0-d parameter)
        return [(5,), (6,), (3, 4), (0,), (4, 3)]
    if name == "Adafactor":  # (PyTorch's divides by an empty parameter's size: no step)
        return [(), (5,), (3, 4), (4, 3)]
    return [(), (5,), (3, 4), (0,), (4, 3)]


def _random(rng, shape, dtype):
    a = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return np.asarray(a, dtype=dtype)


def _initial(name, dtype):
    rng = np.random.default_rng(0)
    return [_random(rng, s, dtype) for s in _shapes(name)]


def _grads(name, dtype, step):
    rng = np.random.default_rng(1000 + step)
    grads = [_random(rng, s, dtype) for s in _shapes(name)]
    if step == SPECIAL_STEP and name != "LBFGS":
        grads[2].reshape(-1)[:4] = [np.nan, np.inf, -np.inf, -0.0]
    return grads


def _transposed(name, arrays):
    """Whether the last parameter is a transposed (non-contiguous) view: not for LBFGS,
    whose PyTorch flattens gradients with ``view`` (KNOWN in test_optim_db)."""
    return name != "LBFGS" and arrays[-1].ndim == 2


def _tensors(m, arrays, transposed):
    """Tensors of ``arrays``; the last one a transposed view if ``transposed`` (its
    gradient too: autograd gives a gradient its parameter's strides)."""
    out = [m.from_numpy(a.copy()) for a in arrays]
    if transposed:
        out[-1] = m.from_numpy(np.ascontiguousarray(arrays[-1].T)).t()
    return out


def _sparse(m, a):
    """A sparse COO gradient holding rows 0 and the last of ``a`` (row 0 twice, in two
    parts, so ``coalesce`` sums it)."""
    if a.shape[0] == 0:
        return m.sparse_coo_tensor(np.zeros((1, 0), np.int64), a.copy(), a.shape)
    rows = np.array([0, a.shape[0] - 1, 0])
    values = a[rows].copy()
    values[0] *= 0.25
    values[2] *= 0.75
    return m.sparse_coo_tensor(m.from_numpy(rows[None]), m.from_numpy(values), a.shape)


def to_numpy_tree(x):
    """A state dict (or kwargs) with every tensor as ``('T', array)``: library-free."""
    if isinstance(x, (torch.Tensor, ember.Tensor)):
        return ("T", x.detach().numpy().copy(order="K"))  # (strides kept)
    if isinstance(x, dict):
        return {k: to_numpy_tree(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(to_numpy_tree(v) for v in x)
    return x


def from_numpy_tree(m, x):
    if isinstance(x, tuple) and len(x) == 2 and x[0] == "T" and isinstance(x[1], np.ndarray):
        return m.from_numpy(x[1].copy(order="K"))
    if isinstance(x, dict):
        return {k: from_numpy_tree(m, v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(from_numpy_tree(m, v) for v in x)
    return x


def _group_lr(name, kwargs):
    lr = kwargs.get("lr")
    if lr is None:
        lr = inspect.signature(getattr(torch.optim, name)).parameters["lr"].default
    return 0.5 * float(lr)


def _optimizer(m, case, params):
    name, _, kwargs, _, groups = case
    kw = from_numpy_tree(m, to_numpy_tree(kwargs))
    if groups:
        params = [{"params": params[:2]},
                  {"params": params[2:], "lr": _group_lr(name, kwargs)}]
    return getattr(m.optim, name)(params, **kw)


def _quadratic(m, params, dtype):
    """LBFGS's closure: ``sum_i sum(a_i * |p_i - c_i|**2) + 0.1 * (p_0 * p_2).sum().real``,
    a convex quadratic."""
    rng = np.random.default_rng(7)
    real = np.float32 if np.dtype(dtype).kind == "c" else dtype
    coef = [(m.from_numpy(rng.uniform(0.5, 2.0, p.shape).astype(real)),
             m.from_numpy(_random(rng, p.shape, dtype))) for p in params]

    def loss():
        total = 0.1 * (params[0] * params[2]).sum().real
        for p, (a, c) in zip(params, coef):
            total = total + (a * (p - c).abs() ** 2).sum()
        return total
    return loss


class Outcome:
    """What one library did: parameters after each step, the state dict, or an error."""

    def __init__(self):
        self.steps, self.state, self.error = [], None, None


def run_side(m, case, start, stop, arrays=None, state=None):
    """Steps ``start..stop-1`` of ``case`` in library ``m`` from ``arrays`` (the
    initial parameters by default), after loading ``state`` (a NumPy tree) if given."""
    name, _, _, dtype, _ = case
    out = Outcome()
    stage = "construction"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            arrays = _initial(name, dtype) if arrays is None else arrays
            transposed = _transposed(name, arrays)
            params = [p.requires_grad_() for p in _tensors(m, arrays, transposed)]
            opt = _optimizer(m, case, params)
            if state is not None:
                stage = "load_state_dict"
                opt.load_state_dict(from_numpy_tree(m, copy.deepcopy(state)))
            closure = None
            if name == "LBFGS":
                loss = _quadratic(m, params, dtype)

                def closure():
                    opt.zero_grad()
                    value = loss()
                    value.backward()
                    return value
            for step in range(start, stop):
                stage = f"step {step}"
                if closure is None:
                    grads = _tensors(m, _grads(name, dtype, step), transposed)
                    if name == "SparseAdam":
                        grads = [_sparse(m, g.detach().numpy()) for g in grads]
                    for i, (p, g) in enumerate(zip(params, grads)):
                        p.grad = None if i == 1 and step in NO_GRAD_STEPS else g
                opt.step(closure)
                out.steps.append([p.detach().numpy().copy() for p in params])
            stage = "state_dict"
            out.state = to_numpy_tree(opt.state_dict())
    except Exception as e:  # noqa: BLE001 (an error is an outcome to compare)
        out.error = (stage, type(e).__name__, _message(e))
    return out


# ----- comparison ----------------------------------------------------------------------
def _message(e):
    """An exception's first line, with the library's name as torch's."""
    dtype_or_size = r"\bember\.(?=(Size|float\d*|complex\d*|u?int\d*|bfloat16|bool)\b)"
    return re.sub(dtype_or_size, "torch.", str(e).split("\n")[0][:200])


def _close(e, t, where, exact=False):
    if e.dtype != t.dtype or e.shape != t.shape:
        return f"{where}: ember {e.dtype}{e.shape}, torch {t.dtype}{t.shape}"
    if exact and not (np.array_equal(e, t, equal_nan=True) and
                      np.array_equal(np.signbit(e.real), np.signbit(t.real))):
        return f"{where}: not the same bits"
    if t.dtype.kind == "c":  # parts compared one by one (an infinite part is no NaN)
        e, t = _pairs(e), _pairs(t)
    try:
        torch.testing.assert_close(torch.from_numpy(np.ascontiguousarray(e)),
                                   torch.from_numpy(np.ascontiguousarray(t)), equal_nan=True)
    except AssertionError as err:
        lines = [s.strip() for s in str(err).split("\n") if "Greatest" in s]
        return f"{where}: values ({'; '.join(lines)})"
    return None


def _pairs(a):
    return np.ascontiguousarray(a)[..., None].view(a.real.dtype)


def compare_trees(e, t, where):
    """The first difference between two NumPy trees, or None."""
    if isinstance(t, tuple) and len(t) == 2 and t[0] == "T":
        if not (isinstance(e, tuple) and len(e) == 2 and e[0] == "T"):
            return f"{where}: ember {type(e).__name__} {e!r:.60}, torch a tensor"
        return _close(e[1], t[1], where)
    if isinstance(e, tuple) and len(e) == 2 and e[0] == "T":
        return f"{where}: ember a tensor, torch {type(t).__name__} {t!r:.60}"
    if isinstance(t, dict):
        if not isinstance(e, dict) or list(e) != list(t):
            ek = list(e) if isinstance(e, dict) else type(e).__name__
            return f"{where}: keys ember {ek}, torch {list(t)}"
        for k in t:
            msg = compare_trees(e[k], t[k], f"{where}[{k!r}]")
            if msg:
                return msg
        return None
    if isinstance(t, (list, tuple)):
        if type(e) is not type(t) or len(e) != len(t):
            return f"{where}: ember {e!r:.80}, torch {t!r:.80}"
        for i, (a, b) in enumerate(zip(e, t)):
            msg = compare_trees(a, b, f"{where}[{i}]")
            if msg:
                return msg
        return None
    if isinstance(t, float) and type(e) is float and math.isclose(e, t, rel_tol=1e-6):
        return None  # a loss, summed in another order
    if type(e) is not type(t) or not (e == t or (e != e and t != t)):
        return f"{where}: ember {type(e).__name__} {e!r}, torch {type(t).__name__} {t!r}"
    return None


def exact_bits(case):
    """Whether ember promises ``case``'s parameters to the bit: SGD's float32 updates
    (docs/optim.md; PyTorch's fused kernel rounds its own way)."""
    name, _, kwargs, dtype, _ = case
    return name == "SGD" and dtype == np.float32 and not kwargs.get("fused")


def compare(e, t, what, exact=False):
    if e.error or t.error:
        if e.error and t.error and e.error == t.error:
            return None
        return f"{what}: ember {e.error or 'runs'}, torch {t.error or 'runs'}"
    for step, (es, ts) in enumerate(zip(e.steps, t.steps)):
        for i, (a, b) in enumerate(zip(es, ts)):
            msg = _close(a, b, f"{what}: step {step} param {i}", exact)
            if msg:
                return msg
    return compare_trees(e.state, t.state, f"{what}: state_dict")


def run_case(case):
    """None when ember and torch agree on ``case``, else the first difference."""
    t = run_side(torch, case, 0, STEPS)
    e = run_side(ember, case, 0, STEPS)
    msg = compare(e, t, "run", exact_bits(case))
    if msg or t.error:
        return msg
    # each library's state dict loaded into the other (and into itself: the reference)
    for src, who in ((t, "torch"), (e, "ember")):
        arrays = [a.copy(order="C") for a in src.steps[-1]]
        ours = run_side(ember, case, STEPS, STEPS + MORE, arrays, src.state)
        theirs = run_side(torch, case, STEPS, STEPS + MORE, arrays, src.state)
        msg = compare(ours, theirs, f"{who}'s state dict loaded", exact_bits(case))
        if msg:
            return msg
    return None


# ----- the table's error inputs --------------------------------------------------------
def error_cases():
    """``(name, desc, make)``: ``make(m)`` builds and steps the optimizer of one of the
    table's error inputs in library ``m`` (parameters converted, the same objects where
    the input repeats one)."""
    from torch.testing._internal.common_optimizers import OptimizerErrorEnum
    cases = []
    for info in optim_db:
        if info.optim_error_inputs_func is None:
            continue
        for err in info.optim_error_inputs_func(device="cpu", dtype=torch.float32):
            oi = err.optimizer_error_input
            step = err.error_on == OptimizerErrorEnum.STEP_ERROR
            cases.append((info.name, oi.desc, _error_maker(info.name, oi, step)))
    return cases


def _error_maker(name, oi, step):
    def make(m):
        memo = {}
        params = _convert(m, oi.params, memo)
        if params is None:
            params = [m.from_numpy(np.ones(3, np.float32)).requires_grad_()]
        opt = getattr(m.optim, name)(params, **_convert(m, oi.kwargs, memo))
        if step:
            opt.step()
    return make


def _convert(m, x, memo):
    """Torch objects of an error input as library ``m``'s: a Tensor (Parameter) with its
    requires_grad and grad, the same object for the same tensor."""
    if m is torch:
        return x  # the table's own objects
    if isinstance(x, torch.Tensor):
        if id(x) not in memo:
            t = m.from_numpy(x.detach().to_dense().numpy().copy())
            if x.is_sparse:
                t = t.to_sparse()
            if isinstance(x, torch.nn.Parameter):
                t = m.nn.Parameter(t, requires_grad=x.requires_grad)
            else:
                t = t.requires_grad_(x.requires_grad)
            if x.grad is not None:
                t.grad = m.from_numpy(x.grad.numpy().copy())
            memo[id(x)] = t
        return memo[id(x)]
    if isinstance(x, dict):
        return {k: _convert(m, v, memo) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_convert(m, v, memo) for v in x)
    return x


def error_outcome(make, m):
    """``(exception or warning class name, first line of its message)``, or None."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            make(m)
        except Exception as e:  # noqa: BLE001 (an error is an outcome to compare)
            return type(e).__name__, _message(e)
    for w in caught:
        if "duplicate" in str(w.message):
            return w.category.__name__, str(w.message).split("\n")[0]
    return None
