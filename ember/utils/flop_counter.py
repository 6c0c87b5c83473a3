"""``torch.utils.flop_counter``: importable, so libraries that offer FLOP counts load;
ember does not count FLOPs (``profile(with_flops=True)`` raises too), so making a
``FlopCounterMode`` raises NotImplementedError naming it. Formulas registered with
``register_flop_formula`` are kept in ``flop_registry``."""
__all__ = ["FlopCounterMode", "register_flop_formula", "flop_registry"]

flop_registry = {}


def register_flop_formula(targets, get_raw=False):
    """Record ``formula`` as the FLOP count of ``targets`` (decorator)."""
    def register(formula):
        for t in (targets if isinstance(targets, (list, tuple)) else [targets]):
            flop_registry[t] = formula
        return formula
    return register


class FlopCounterMode:
    """torch's FLOP counter: not in ember (raises when made)."""

    def __init__(self, mods=None, depth=2, display=True, custom_mapping=None):
        raise NotImplementedError("torch.utils.flop_counter.FlopCounterMode is not "
                                  "implemented in ember: ember does not count FLOPs")
