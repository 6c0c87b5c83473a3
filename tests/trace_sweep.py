"""The trace-at-other-shapes sweep: every module case of the nn oracle tables and the
jit/ONNX zoos, traced at the example's shapes and replayed at others.

For each case the inputs are grown, one dimension of one input at a time (and then
every dimension that could grow alone, all at once); a variant that eager ember
rejects is a size the layer does not allow and is left out. At every other variant the
traced function must give eager's result (to float32 rounding), or the trace must have
emitted a ``TracerWarning`` and ``check_inputs`` must catch the difference.

``python tests/trace_sweep.py`` prints the figures (cases, equal, warned).
"""
import copy
import warnings

import numpy as np
from oracle import make_inputs

import ember
from ember._graph.names import RANDOM_CALLS
from ember.jit import TracerWarning, TracingCheckError


def _tables():
    """{table name: [Case]} of the nn oracle's module cases."""
    import test_nn_layers
    import test_nn_losses
    import test_nn_rnn
    return {
        "layers.ACTIVATIONS": test_nn_layers.ACTIVATIONS,
        "layers.LINEAR": test_nn_layers.LINEAR,
        "layers.EMBEDDING": test_nn_layers.EMBEDDING,
        "layers.DROPOUT_EVAL": test_nn_layers.DROPOUT_EVAL,
        "rnn.MODULES": test_nn_rnn.MODULES,
        "rnn.CELLS": test_nn_rnn.CELLS,
        "rnn.PACKED": test_nn_rnn.PACKED,
        "losses.LOSSES": test_nn_losses.LOSSES,
    }


class Item:
    """One sweep entry: ``run(*tensors)`` (seeded, so a module built inside gets the same
    parameters at every call) and its example ``arrays``; ``fresh()``, where given, makes
    the module to trace (a copy, so that state a call changes starts equal)."""

    def __init__(self, name, run, arrays, fresh=None):
        self.name, self.run, self.arrays, self.fresh = name, run, arrays, fresh


def _module_items():
    """The oracle's ``(name, factory(nn), input shape)`` module tables, in eval and
    training mode."""
    import test_nn_conv
    import test_nn_pool_norm
    rows = [("conv.MODULES", r) for r in test_nn_conv.MODULES] + \
        [("pool_norm.MODULES", r) for r in test_nn_pool_norm.MODULES] + \
        [("pool_norm.BN", r) for r in test_nn_pool_norm.BN]
    items = []
    for table, (name, factory, shape) in rows:
        for train in (False, True):
            ember.manual_seed(0)
            template = factory(ember.nn).double().train(train)

            def fresh(_t=template):
                return copy.deepcopy(_t)

            def run(x, _fresh=fresh):
                return _fresh()(x)
            arr = np.random.default_rng(0).standard_normal(shape)
            items.append(Item(f"{table}:{name}_{'train' if train else 'eval'}", run,
                              [arr], fresh))
    return items


def _attention_items():
    """The attention modules (the oracle's attention tables build them per framework)."""
    nn = ember.nn
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 2, 8))
    xb = rng.standard_normal((2, 5, 8))
    mask = np.zeros((2, 5), bool)
    mask[0, -1] = True

    def seeded(factory):
        ember.manual_seed(0)
        return factory().double().eval()
    mha = seeded(lambda: nn.MultiheadAttention(8, 2))
    mha_bf = seeded(lambda: nn.MultiheadAttention(8, 2, batch_first=True))
    enc = seeded(lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0))
    enc_bf = seeded(lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0,
                                                       batch_first=True, norm_first=True))
    stack = seeded(lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(
        8, 2, 16, dropout=0.0, batch_first=True), 2, enable_nested_tensor=False))
    dec = seeded(lambda: nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0))
    causal = lambda t: ember.nn.Transformer.generate_square_subsequent_mask(t.shape[0])
    return [
        Item("attention:MHA_self", lambda q: mha(q, q, q), [x]),
        Item("attention:MHA_batch_first_kpm", lambda q, m: mha_bf(q, q, q, key_padding_mask=m),
             [xb, mask]),
        Item("attention:MHA_cross", lambda q, k: mha(q, k, k), [x, x[:3]]),
        Item("attention:EncoderLayer", enc, [x]),
        Item("attention:EncoderLayer_pre_norm_bf_kpm",
             lambda s, m: enc_bf(s, src_key_padding_mask=m), [xb, mask]),
        Item("attention:Encoder_bf_kpm", lambda s, m: stack(s, src_key_padding_mask=m),
             [xb, mask]),
        Item("attention:Encoder_causal", lambda s: stack(s, mask=causal(s.transpose(0, 1)),
                                                         is_causal=True), [xb]),
        Item("attention:DecoderLayer", lambda t, m: dec(t, m), [x, x[:3]]),
    ]


def _oracle_items():
    items = _module_items() + _attention_items()
    for table, cases in _tables().items():
        for case in cases:
            def run(*xs, _fn=case.fn):
                ember.manual_seed(0)
                return _fn(ember, *xs)
            items.append(Item(f"{table}:{case.name}", run, make_inputs(case)))
    return items


def _zoo_items():
    import jit_trace_zoo
    import onnx_zoo
    items = []
    for name, (factory, make) in jit_trace_zoo.models(ember).items():
        ember.manual_seed(0)
        model = factory().eval()
        items.append(Item(f"jit_zoo:{name}", model, [_np(a) for a in _tuple(make(2))]))
    for name, (model, make, _axes) in onnx_zoo.zoo().items():
        model.eval()
        items.append(Item(f"onnx_zoo:{name}", model, [_np(a) for a in make(2, 5)]))
    return items


def _tuple(x):
    return x if isinstance(x, tuple) else (x,)


def _np(a):
    return a.numpy().copy() if isinstance(a, ember.Tensor) else a


def items():
    """Every entry of the sweep."""
    return _oracle_items() + _zoo_items()


# ----- one entry ----------------------------------------------------------------------
def _tensors(arrays):
    return [ember.tensor(a) if isinstance(a, np.ndarray) else a for a in arrays]


def _flat(out):
    if isinstance(out, ember.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    if isinstance(out, dict):
        return [t for o in out.values() for t in _flat(o)]
    if hasattr(out, "_fields"):
        return [t for o in out for t in _flat(o)]
    return []


def _same(a, b):
    fa, fb = _flat(a), _flat(b)
    if len(fa) != len(fb):
        return False
    for x, y in zip(fa, fb):
        if tuple(x.shape) != tuple(y.shape):
            return False
        x, y = x.detach().numpy(), y.detach().numpy()
        if x.dtype.kind in "fc":
            scale = max(1.0, float(np.nanmax(np.abs(x))) if x.size else 1.0)
            if not np.allclose(x, y, rtol=1e-5, atol=1e-5 * scale, equal_nan=True):
                return False
        elif not np.array_equal(x, y):
            return False
    return True


def _grown(arrays, i, d):
    a = arrays[i]
    out = list(arrays)
    out[i] = np.concatenate([a, np.take(a, [0], axis=d)], axis=d)
    return out


def _variants(arrays):
    """(label, arrays) with one dimension of one input grown by one, and with one
    dimension grown in every input that has it at the same size (counted from the left,
    then from the right: an input and its target, a mask and its sequence)."""
    out, seen = [], set()
    for i, a in enumerate(arrays):
        if not isinstance(a, np.ndarray):
            continue
        for d in range(a.ndim):
            n = a.shape[d]
            if not n:
                continue
            out.append(((i, d), _grown(arrays, i, d)))
            for side in ("left", "right"):
                grown, which = list(arrays), []
                for j, b in enumerate(arrays):
                    if not isinstance(b, np.ndarray) or b.ndim == 0:
                        continue
                    e = d if side == "left" else b.ndim - (a.ndim - d)
                    if 0 <= e < b.ndim and b.shape[e] == n:
                        grown = _grown(grown, j, e)
                        which.append((j, e))
                key = tuple(which)
                if len(which) > 1 and key not in seen:
                    seen.add(key)
                    out.append((key, grown))
    return out


def _eager(run, arrays):
    try:
        with ember.no_grad():
            return run(*_tensors(arrays))
    except Exception:
        return None


def sweep(item):
    """``(status, detail)``: status ``equal`` (every other shape gives eager's result),
    ``warned`` (a TracerWarning was emitted and check_inputs catches each difference),
    ``fixed`` (no dimension the layer allows can change: nothing to replay),
    ``random`` (the trace replays fresh random draws), or ``FAIL``."""
    base = _eager(item.run, item.arrays)
    if base is None:
        return "FAIL", "eager call fails on the example"
    allowed = []
    for label, arrays in _variants(item.arrays):
        if _eager(item.run, arrays) is not None:
            allowed.append((label, arrays))
    singles = [label for label, _ in allowed if isinstance(label[0], int)]
    if len(singles) > 1:
        joint = list(item.arrays)
        for i, d in singles:
            joint = _grown(joint, i, d)
        if _eager(item.run, joint) is not None:
            allowed.append(("all", joint))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            traced = ember.jit.trace(item.fresh() if item.fresh else item.run,
                                     tuple(_tensors(item.arrays)), check_trace=False,
                                     strict=False)
        except Exception as e:
            return "FAIL", f"trace fails: {type(e).__name__}: {str(e)[:200]}"
    warned = [w for w in caught if issubclass(w.category, TracerWarning)]
    graph = traced.graph

    def replay(*ts):
        # a module built inside ``run`` has its initial fills recorded as random draws
        # (as PyTorch's trace records them): seeded as ``run`` seeds itself, the replay
        # draws the same parameters
        ember.manual_seed(0)
        return traced(*ts)
    if not _same(replay(*_tensors(item.arrays)), base):
        if any(n.op in RANDOM_CALLS for n in graph.nodes):
            return "random", "random draws"
        return "FAIL", "replay differs at the example's shapes"
    if not allowed:
        return "fixed", "no dimension can change"
    bad = []
    for label, arrays in allowed:
        want = _eager(item.run, arrays)
        try:
            got = replay(*_tensors(arrays))
            ok = _same(got, want)
        except Exception as e:
            ok, got = False, e
        if not ok:
            bad.append((label, arrays, got))
    if not bad:
        return ("warned" if warned else "equal"), f"{len(allowed)} shapes"
    if not warned:
        label, _, got = bad[0]
        what = f"{type(got).__name__}: {str(got)[:150]}" if isinstance(got, Exception) \
            else "different values"
        return "FAIL", f"silently wrong at variant {label}: {what}"
    for label, arrays, _ in bad:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                ember.jit.trace(item.fresh() if item.fresh else item.run,
                                tuple(_tensors(item.arrays)), strict=False,
                                check_inputs=[tuple(_tensors(arrays))])
            except TracingCheckError:
                continue
            except Exception:
                continue  # the check's own trace or replay fails loudly
        return "FAIL", f"warned, but check_inputs misses variant {label}"
    msg = str(warned[0].message)
    return "warned", f"{warned[0].filename}:{warned[0].lineno}: {msg[:80]}"


def figures(results):
    """{status: count} of ``{name: (status, detail)}``."""
    counts = {}
    for status, _ in results.values():
        counts[status] = counts.get(status, 0) + 1
    return counts


def main():
    results = {}
    for item in items():
        results[item.name] = sweep(item)
    for name, (status, detail) in results.items():
        if status not in ("equal",):
            print(f"{status:7s} {name}: {detail}")
    c = figures(results)
    print(f"trace sweep: {len(results)} cases; " +
          ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
    return results


if __name__ == "__main__":
    import sys
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    main()
