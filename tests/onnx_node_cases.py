"""Run the ONNX project's backend node test cases against ember's importer.

The cases come from the ``onnx`` package itself (``collect_testcases``): each is a
one-node model (or a function-expanded form of it) with inputs and expected outputs.
"""
import warnings

import numpy as np

import ember
import ember.onnx


def collect():
    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return collect_testcases(None)


def _ops(case):
    return sorted({n.op_type for n in case.model.graph.node})


def _to_np(v):
    if isinstance(v, ember.Tensor):
        return v.detach().numpy()
    if isinstance(v, list):
        return [_to_np(x) for x in v]
    return v


def _close(got, want, rtol, atol):
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and \
            all(_close(g, w, rtol, atol) for g, w in zip(got, want))
    if want is None:
        return got is None
    want = np.asarray(want)
    got = np.asarray(got)
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    if want.dtype.kind == "V" and "float" in want.dtype.name:
        # ml_dtypes' floats (bfloat16, float8): compared as float32, NaNs equal
        got, want = got.astype(np.float32), want.astype(np.float32)
    if want.dtype.kind in "fc":
        return np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    return np.array_equal(got, want)


def _plain(v):
    """Test data as NumPy: the cases store some inputs and outputs as TensorProtos."""
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if type(v).__name__ == "TensorProto":
        from onnx import numpy_helper
        return numpy_helper.to_array(v)
    return v


def run_case(case):
    """(passed: bool, why: str) for one case."""
    try:
        with np.errstate(all="ignore"):
            m = ember.onnx.load(case.model)
            m.eval()
            for inputs, outputs in case.data_sets:
                inputs, outputs = _plain(list(inputs)), _plain(list(outputs))
                with ember.no_grad():
                    got = m(*[ember.onnx._import.as_value(i) if not isinstance(i, list)
                              else [ember.onnx._import.as_value(j) for j in i]
                              for i in inputs])
                got = got if isinstance(got, tuple) else (got,)
                if len(got) != len(outputs):
                    return False, f"{len(got)} outputs, expected {len(outputs)}"
                for g, w in zip(got, outputs):
                    if not _close(_to_np(g), w, case.rtol, case.atol):
                        gw = _to_np(g)
                        info = (getattr(gw, "shape", None), getattr(gw, "dtype", None),
                                np.shape(w), getattr(w, "dtype", None))
                        return False, f"mismatch {info}"
        return True, ""
    except Exception as e:  # noqa: BLE001 - a report of every failing case
        return False, f"{type(e).__name__}: {str(e)[:200]}"


def _op_of(case):
    """The op a case tests: its one node, or for an expanded function the op it names."""
    if len(case.model.graph.node) == 1:
        return case.model.graph.node[0].op_type
    return case.model.graph.node[-1].op_type if "_expanded" not in case.name else \
        case.name[5:].split("_")[0]


if __name__ == "__main__":
    # python tests/onnx_node_cases.py [-v] [--markdown]: the pass count (per op with
    # --markdown, the table docs/onnx.md shows; each failure's reason with -v)
    import collections
    import sys
    cases = collect()
    per_op = collections.defaultdict(lambda: [0, 0])
    fails = []
    ok = 0
    for c in cases:
        passed, why = run_case(c)
        ok += passed
        op = c.model.graph.node[0].op_type if len(c.model.graph.node) == 1 else None
        key = op or next((n.op_type for n in c.model.graph.node
                          if n.op_type.lower() in c.name.replace("_", "")), _op_of(c))
        per_op[key][0] += passed
        per_op[key][1] += 1
        if not passed:
            fails.append((c.name, why))
    print(f"{ok} of {len(cases)} passed ({100 * ok / len(cases):.1f}%)")
    if "--markdown" in sys.argv:
        print("| op | passed | cases |\n|---|---|---|")
        for op in sorted(per_op):
            print(f"| {op} | {per_op[op][0]} | {per_op[op][1]} |")
    if "-v" in sys.argv:
        for name, why in fails:
            print(name, "|", why)
