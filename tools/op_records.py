"""How many primitives declare each rule on their class, and how many are exempt from it
(``python tools/op_records.py``; the coverage tests are tests/test_op_records.py and
tests/test_op_spellings.py)."""
import importlib
import pkgutil

import ember
from ember.autograd.node import Primitive

for mod in pkgutil.walk_packages(ember.__path__, "ember."):
    if ".examples" in mod.name or mod.name.endswith("__main__"):
        continue
    try:
        importlib.import_module(mod.name)
    except Exception:  # optional extras
        pass


def subclasses(c):
    seen, stack = set(), [c]
    while stack:
        for s in stack.pop().__subclasses__():
            if s not in seen and not s.__dict__.get("_renamed_from"):
                seen.add(s)
                stack.append(s)
    return seen


prims = subclasses(Primitive)
from ember._graph.names import spelling  # noqa: E402
from ember.jit._op_exempt import NO_TORCHSCRIPT  # noqa: E402
from ember.onnx._op_exempt import NO_ONNX  # noqa: E402
from ember.ops._batch import NO_BATCH_RULE  # noqa: E402

nb = NO_BATCH_RULE() if callable(NO_BATCH_RULE) else NO_BATCH_RULE
rows = {
    "primitives": len(prims),
    "batch (vmap rule)": sum(c.batch is not None for c in prims),
    "batch exempt": len(nb),
    "jvp (own rule, not the double-vjp fallback)": sum(c.jvp is not Primitive.jvp for c in prims),
    "onnx spelling": sum(spelling(c, "onnx") is not None for c in prims),
    "onnx exempt": len(NO_ONNX),
    "torchscript spelling": sum(spelling(c, "torchscript") is not None for c in prims),
    "torchscript exempt": len(NO_TORCHSCRIPT),
    "array vjp (compile plan)": sum(c.vjp is not None for c in prims),
    "complex32_math": sum(bool(c.complex32_math) for c in prims),
}
for k, v in rows.items():
    print(f"{k:45s} {v}")
