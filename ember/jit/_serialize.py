"""``jit.load``, ``jit.save``, ``jit.freeze``, ``jit.optimize_for_inference``."""

__all__ = ["load", "save", "freeze", "optimize_for_inference"]


def save(m, f, _extra_files=None):
    """Save a ScriptModule as a TorchScript archive (``torch.jit.load`` reads it).

    ``f`` is a path (written atomically) or a writable binary file; ``_extra_files``
    maps archive names to str or bytes contents, stored under ``extra/``.
    """
    from ember.jit._module import RecursiveScriptModule
    from ember.jit._traced import TracedModule
    if isinstance(m, TracedModule):
        m.save(f, _extra_files=_extra_files)  # raises, naming the op TorchScript lacks
    if not isinstance(m, RecursiveScriptModule):
        raise TypeError(f"jit.save expects a ScriptModule (from jit.trace, jit.script or "
                        f"jit.load), got {type(m).__name__}")
    m.save(f, _extra_files=_extra_files)


def load(f, map_location=None, _extra_files=None, _restore_shapes=False):
    """Load a TorchScript archive written by ``torch.jit.save`` or ``ember.jit.save``.

    The archive's code runs in ember's interpreter over an allowlist and its pickles
    go through the weights-only unpickler: no Python from the file is executed.
    ``_extra_files`` is a dict whose keys name extra files to read; their contents
    (bytes) are filled in. ``map_location`` moves the tensors (``"cpu"``, a device).
    """
    from ember.jit._archive import load_archive
    return load_archive(f, map_location, _extra_files)


def freeze(mod, preserved_attrs=None, optimize_numerics=True):
    """PyTorch's ``jit.freeze``: an eval-mode module whose parameters are constants.

    ember's interpreter has no graph passes to apply, so this returns the module in
    eval mode with gradients off for its parameters (outputs are unchanged).
    """
    from ember.jit._module import RecursiveScriptModule
    if not isinstance(mod, RecursiveScriptModule):
        raise RuntimeError("Freezing expects a ScriptModule as input. Please use "
                           "torch.jit.script or torch.jit.trace to script your 'nn.Module'.")
    if mod.training:
        raise RuntimeError("Freezing is currently only implemented for modules in eval mode. "
                           "Please call .eval() on your module before freezing.")
    for p in mod.parameters():
        p.requires_grad_(False)
    return mod


def optimize_for_inference(mod, other_methods=None):
    """PyTorch's ``jit.optimize_for_inference``: freeze (if needed) for inference."""
    if mod.training:
        mod = mod.eval()
    return freeze(mod)
