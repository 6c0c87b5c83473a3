"""Hook plumbing for Module: removable handles and full backward hooks.

Full backward hooks (``register_full_backward_hook``) work as in PyTorch: the
module's tensor inputs and outputs pass through an identity node each; a hook on
the output identity sees the gradients w.r.t. the outputs (and runs the backward
pre-hooks, which may replace them), and a hook on the input identity sees the
gradients w.r.t. the inputs and calls the user's hooks, which may replace those.
"""
import warnings

from ember._tensor import Tensor
from ember.autograd.grad_mode import state as _grad_state
from ember.ops.identity import _Identity
from ember.utils.hooks import RemovableHandle

__all__ = ["RemovableHandle", "BackwardHook"]


_IDENTITIES = {}


def _identity(tensors):
    n = len(tensors)
    cls = _IDENTITIES.get(n)
    if cls is None:
        cls = _IDENTITIES[n] = type("BackwardHookFunction", (_Identity,),
                                    {"n_outputs": n, "_node_name": _Identity._node_name})
    out = cls.apply(*tensors)
    return (out,) if n == 1 else out


def _pack_with_none(indices, values, size):
    res = [None] * size
    for i, v in zip(indices, values):
        res[i] = v
    return tuple(res)


class BackwardHook:
    """Runs a module's full backward (pre-)hooks once its gradients are known."""

    def __init__(self, module, user_hooks, user_pre_hooks):
        self.module = module
        self.user_hooks = user_hooks
        self.user_pre_hooks = user_pre_hooks
        self.grad_outputs = None
        self.n_outputs = -1
        self.output_tensors_index = None
        self.n_inputs = -1
        self.input_tensors_index = None

    def _apply_on_tensors(self, fn, args):
        idx = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a._requires_grad]
        if not (idx and _grad_state.grad_enabled):
            return args, None
        new = _identity([args[i] for i in idx])
        fn(new[0].grad_fn)
        out = list(args)
        for i, t in zip(idx, new):
            out[i] = t
        return tuple(out), idx

    def _set_user_hook(self, node):
        def hook(grad_input, _):
            if self.grad_outputs is None:
                return None
            res = _pack_with_none(self.input_tensors_index, grad_input, self.n_inputs)
            for user_hook in self.user_hooks:
                out = user_hook(self.module, res, self.grad_outputs)
                if out is None:
                    continue
                if isinstance(out, Tensor):
                    out = (out,)
                if len(out) != len(res):
                    raise RuntimeError("Backward hook returned an invalid number of "
                                       f"grad_input, got {len(out)}, but expected {len(res)}")
                res = tuple(out)
            self.grad_outputs = None
            return tuple(res[i] for i in self.input_tensors_index)
        node.register_hook(hook)

    def setup_input_hook(self, args):
        """Route the module's tensor inputs through an identity that calls the hooks."""
        res, idx = self._apply_on_tensors(self._set_user_hook, args)
        self.n_inputs = len(args)
        self.input_tensors_index = idx
        return res

    def setup_output_hook(self, result):
        """Route the module's tensor outputs through an identity that captures their grads."""
        def fn(node):
            def hook(grad_input, _):
                self.grad_outputs = _pack_with_none(self.output_tensors_index, grad_input,
                                                    self.n_outputs)
                expected = len(self.grad_outputs)
                for pre_hook in self.user_pre_hooks:
                    out = pre_hook(self.module, self.grad_outputs)
                    if out is None:
                        continue
                    if isinstance(out, Tensor):
                        out = (out,)
                    if len(out) != expected:
                        raise RuntimeError("Backward pre hook returned an invalid number of "
                                           f"grad_output, got {len(out)}, but expected "
                                           f"{expected}")
                    self.grad_outputs = tuple(out)
                local = self.grad_outputs
                if self.input_tensors_index is None:
                    warnings.warn("Full backward hook is firing when gradients are computed "
                                  "with respect to module outputs since no inputs require "
                                  "gradients.", stacklevel=2)
                    grad_inputs = (None,) * self.n_inputs
                    for user_hook in self.user_hooks:
                        res = user_hook(self.module, grad_inputs, self.grad_outputs)
                        if res is not None and not (isinstance(res, tuple) and
                                                    all(r is None for r in res)):
                            raise RuntimeError(
                                "Backward hook for Modules where no input requires gradient "
                                "should always return None or None for all gradients.")
                    self.grad_outputs = None
                return tuple(local[i] for i in self.output_tensors_index)
            node.register_hook(hook)

        is_tuple = isinstance(result, tuple)
        args = result if is_tuple else (result,)
        res, idx = self._apply_on_tensors(fn, args)
        self.n_outputs = len(args)
        self.output_tensors_index = idx
        return res if is_tuple else res[0]
