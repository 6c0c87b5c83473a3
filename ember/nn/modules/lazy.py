"""Lazy layers: ``in_features`` / ``in_channels`` / ``num_features`` are read from the
first input, then the module becomes the ordinary class (``LazyLinear`` -> ``Linear``)
with its parameters drawn exactly as that class draws them (so after the same seed,
the same values as PyTorch)."""
from ember.autograd.grad_mode import no_grad
from ember.nn.modules.conv import (
    Conv1d,
    Conv2d,
    Conv3d,
    ConvTranspose1d,
    ConvTranspose2d,
    ConvTranspose3d,
)
from ember.nn.modules.linear import Linear
from ember.nn.modules.normalization import (
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
)
from ember.nn.parameter import UninitializedBuffer, UninitializedParameter, is_lazy

__all__ = ["LazyModuleMixin", "LazyLinear", "LazyConv1d", "LazyConv2d", "LazyConv3d",
           "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d",
           "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyInstanceNorm1d",
           "LazyInstanceNorm2d", "LazyInstanceNorm3d"]


class LazyModuleMixin:
    """Shape-inferring initialization: a forward pre-hook calls
    ``initialize_parameters(*inputs)`` once, then the module becomes ``cls_to_become``.
    Loading a state dict into a lazy module materializes its parameters from it."""

    cls_to_become = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._load_hook = self._register_load_state_dict_pre_hook(self._lazy_load_hook)
        self._initialize_hook = self.register_forward_pre_hook(self._infer_parameters,
                                                               with_kwargs=True)

    def _lazy_load_hook(self, state_dict, prefix, local_metadata, strict, missing_keys,
                        unexpected_keys, error_msgs):
        for table in (self._parameters, self._buffers):
            for name, t in table.items():
                key = prefix + name
                if t is not None and key in state_dict and is_lazy(t) \
                        and not is_lazy(state_dict[key]):
                    with no_grad():
                        t.materialize(state_dict[key].shape)

    def initialize_parameters(self, *args, **kwargs):
        """Materialize the parameters from the first input (each lazy class defines it)."""
        raise NotImplementedError(f"initialize_parameters is not implemented for "
                                  f"{self.__class__.__name__}")

    def has_uninitialized_params(self):
        """Whether any parameter or buffer still waits for its shape."""
        return any(is_lazy(t) for t in list(self._parameters.values())
                   + list(self._buffers.values()))

    def _infer_parameters(self, module, args, kwargs=None):
        module.initialize_parameters(*args, **(kwargs or {}))
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {self._get_name()} has not been fully initialized")
        module._initialize_hook.remove()
        module._load_hook.remove()
        delattr(module, "_initialize_hook")
        delattr(module, "_load_hook")
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become

    def _replicate_for_data_parallel(self):
        raise RuntimeError("Modules with uninitialized parameters can't be used with "
                           "`DataParallel`. Run a dummy forward pass to correctly initialize "
                           "the modules")


class LazyLinear(LazyModuleMixin, Linear):
    """``Linear`` whose ``in_features`` is ``input.shape[-1]`` of the first input."""

    cls_to_become = Linear

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        super().__init__(0, 0, False)
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input):
        if self.has_uninitialized_params():
            with no_grad():
                self.in_features = input.shape[-1]
                self.weight.materialize((self.out_features, self.in_features))
                if self.bias is not None:
                    self.bias.materialize((self.out_features,))
                self.reset_parameters()
        elif self.in_features == 0:
            # materialized by load_state_dict: ember's Linear checks in_features
            self.in_features = self.weight.shape[1]


class _LazyConvMixin(LazyModuleMixin):
    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def _get_in_channels(self, input):
        nd = self._nd
        if input.dim() not in (nd + 1, nd + 2):
            raise RuntimeError(f"Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input to "
                               f"{self.__class__.__name__}, but got input of size: {input.shape}")
        return input.shape[1] if input.dim() == nd + 2 else input.shape[0]

    def initialize_parameters(self, input, *args, **kwargs):
        if self.has_uninitialized_params():
            self.in_channels = self._get_in_channels(input)
            if self.in_channels % self.groups != 0:
                raise ValueError("in_channels must be divisible by groups")
            with no_grad():
                if self.transposed:
                    shape = (self.in_channels, self.out_channels // self.groups)
                else:
                    shape = (self.out_channels, self.in_channels // self.groups)
                self.weight.materialize(shape + tuple(self.kernel_size))
                if self.bias is not None:
                    self.bias.materialize((self.out_channels,))
                self.reset_parameters()


def _lazy_conv(base, transposed):
    def __init__(self, out_channels, kernel_size, stride=1, padding=0, *rest, device=None,
                 dtype=None, **kwargs):
        if transposed:
            names = ("output_padding", "groups", "bias", "dilation", "padding_mode")
        else:
            names = ("dilation", "groups", "bias", "padding_mode")
        opts = dict(zip(names, rest))
        opts.update(kwargs)
        bias = opts.pop("bias", True)
        LazyModuleMixin.__init__(self, 0, 0, kernel_size, stride, padding, bias=False, **opts)
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_channels = out_channels
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    name = "Lazy" + base.__name__
    cls = type(name, (_LazyConvMixin, base), {
        "__init__": __init__, "cls_to_become": base, "__module__": __name__,
        "__doc__": f"``{base.__name__}`` whose ``in_channels`` is read from the first input."})
    return cls


LazyConv1d = _lazy_conv(Conv1d, False)
LazyConv2d = _lazy_conv(Conv2d, False)
LazyConv3d = _lazy_conv(Conv3d, False)
LazyConvTranspose1d = _lazy_conv(ConvTranspose1d, True)
LazyConvTranspose2d = _lazy_conv(ConvTranspose2d, True)
LazyConvTranspose3d = _lazy_conv(ConvTranspose3d, True)


class _LazyNormMixin(LazyModuleMixin):
    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None):
        super().__init__(0, eps, momentum, False, False)
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            self.bias = UninitializedParameter(device=device, dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            self.running_var = UninitializedBuffer(device=device, dtype=dtype)
            from ember._factory import tensor
            from ember.backend.dtypes import int64
            self.num_batches_tracked = tensor(0, dtype=int64)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input):
        if self.has_uninitialized_params():
            self.num_features = input.shape[1]
            if self.affine:
                self.weight.materialize((self.num_features,))
                self.bias.materialize((self.num_features,))
            if self.track_running_stats:
                self.running_mean.materialize((self.num_features,))
                self.running_var.materialize((self.num_features,))
            self.reset_parameters()


def _lazy_norm(base):
    # PyTorch's lazy instance norms default to affine=True, track_running_stats=True too
    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None):
        _LazyNormMixin.__init__(self, eps, momentum, affine, track_running_stats, device, dtype)

    return type("Lazy" + base.__name__, (_LazyNormMixin, base), {
        "__init__": __init__, "cls_to_become": base, "__module__": __name__,
        "__doc__": f"``{base.__name__}`` whose ``num_features`` is read from the first input."})


LazyBatchNorm1d = _lazy_norm(BatchNorm1d)
LazyBatchNorm2d = _lazy_norm(BatchNorm2d)
LazyBatchNorm3d = _lazy_norm(BatchNorm3d)
LazyInstanceNorm1d = _lazy_norm(InstanceNorm1d)
LazyInstanceNorm2d = _lazy_norm(InstanceNorm2d)
LazyInstanceNorm3d = _lazy_norm(InstanceNorm3d)
