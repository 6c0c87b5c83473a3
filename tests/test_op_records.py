"""Every primitive's record is complete: each ``Primitive`` subclass declares a vmap
batching rule (``batch``) or sits in ``ember.ops._batch.NO_BATCH_RULE`` with a reason,
so that moving or renaming an op cannot silently cost it its rule."""
import importlib
import pkgutil

import ember
from ember.autograd.node import Primitive
from ember.ops import _batch


def _import_everything():
    # primitives live in modules that `import ember` does not load (onnx, jit, optional
    # backends): load them all, skipping modules whose optional dependency is missing
    for m in pkgutil.walk_packages(ember.__path__, "ember."):
        try:
            importlib.import_module(m.name)
        except ImportError:
            pass


def primitives():
    """Every Primitive subclass."""
    _import_everything()
    seen, stack = set(), [Primitive]
    while stack:
        for c in stack.pop().__subclasses__():
            if c not in seen:
                seen.add(c)
                stack.append(c)
    return sorted(seen, key=lambda c: (c.__module__, c.__qualname__))


def _name(c):
    return f"{c.__module__}.{c.__qualname__}"


def test_every_primitive_has_a_batching_rule_or_a_stated_exemption():
    missing = [_name(c) for c in primitives()
               if c.batch is None and c not in _batch.NO_BATCH_RULE]
    assert not missing, ("primitives without a vmap batching rule (declare `batch = ...` "
                         f"on the class, or exempt them in ops/_batch.py): {missing}")


def test_exemptions_name_live_rule_less_primitives_with_reasons():
    live = set(primitives())
    for cls, why in _batch.NO_BATCH_RULE.items():
        assert cls in live, f"NO_BATCH_RULE lists {cls!r}, which is not a primitive"
        assert cls.batch is None, f"{_name(cls)} has a rule but is listed in NO_BATCH_RULE"
        assert isinstance(why, str) and why.strip() and "\n" not in why, _name(cls)


def test_rules_are_plain_functions_of_the_rule_protocol():
    # the dispatcher calls cls.batch(cls, level, args, params)
    import inspect
    for c in primitives():
        if c.batch is not None:
            assert inspect.isfunction(c.batch), _name(c)
            assert len(inspect.signature(c.batch).parameters) == 4, _name(c)



def test_declared_variants_match_torch():
    # one Variants row per op makes its function, Tensor method and in-place method:
    # each exists exactly where torch has it
    import sys

    import torch
    _import_everything()
    families = [m for name, m in sorted(sys.modules.items())
                if name.startswith("ember.ops.") and hasattr(m, "_VARIANTS")]
    assert {"ember.ops.unary", "ember.ops.quantization"} <= {m.__name__ for m in families}
    for mod in families:
        names = [n for row in mod._VARIANTS for n in row.names]
        assert sorted(names) == sorted(mod.__all__)
        assert len(set(names)) == len(names), "a name declared twice"
        for n in names:
            assert getattr(ember, n) is getattr(mod, n) and hasattr(torch, n), n
            assert hasattr(ember.Tensor, n) == hasattr(torch.Tensor, n), n
            assert hasattr(ember.Tensor, n + "_") == hasattr(torch.Tensor, n + "_"), n + "_"

