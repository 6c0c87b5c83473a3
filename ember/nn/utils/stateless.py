"""``torch.nn.utils.stateless``: the deprecated spelling of ``torch.func.functional_call``."""
import warnings

__all__ = ["functional_call"]


def functional_call(module, parameters_and_buffers, args=None, kwargs=None, *,
                    tie_weights=True, strict=False):
    """Call ``module`` with the tensors of the dict ``parameters_and_buffers`` (by
    qualified name) standing in for its parameters and buffers, restoring them
    afterwards. Deprecated in PyTorch 2.0 in favour of :func:`ember.func.functional_call`,
    which also takes a tuple of dicts.

    >>> lin = ember.nn.Linear(2, 1)
    >>> functional_call(lin, {"bias": ember.zeros(1)}, ember.ones(1, 2)).shape
    ember.Size([1, 1])
    """
    warnings.warn("`torch.nn.utils.stateless.functional_call` is deprecated as of PyTorch "
                  "2.0 and will be removed in a future version of PyTorch. Please use "
                  "`torch.func.functional_call` instead which is a drop-in replacement.",
                  FutureWarning, stacklevel=2)
    if not isinstance(parameters_and_buffers, dict):
        raise ValueError("nn.utils.stateless.functional_call takes one dict of tensors, got "
                         f"{type(parameters_and_buffers).__name__}; torch.func.functional_call "
                         "also takes a tuple of dicts")
    from ember.func._module import functional_call as _functional_call  # ember.func is above nn
    return _functional_call(module, parameters_and_buffers, args, kwargs,
                            tie_weights=tie_weights, strict=strict)
