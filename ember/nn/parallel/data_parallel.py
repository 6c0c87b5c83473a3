"""``torch.nn.parallel`` for one device: ``DataParallel`` and ``data_parallel`` call the
module directly (what PyTorch does without several GPUs); replicating a module over
several GPUs is not implemented."""
from ember.nn.modules.module import Module

__all__ = ["DataParallel", "data_parallel"]


def _one_device(device_ids):
    ids = list(device_ids) if device_ids is not None else []
    if len(set(ids)) > 1:
        raise NotImplementedError("DataParallel over several devices is not implemented in "
                                  "ember; run the module on one device")


class DataParallel(Module):
    """``torch.nn.DataParallel(module, device_ids=None, output_device=None, dim=0)``.

    ember runs on one device, where PyTorch's DataParallel calls ``module`` itself; so
    does this wrapper. The wrapped module is ``self.module`` (state_dict keys get the
    ``module.`` prefix, as in PyTorch).
    """

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        _one_device(device_ids)
        self.module = module
        self.device_ids = list(device_ids) if device_ids is not None else []
        self.output_device = output_device
        self.dim = dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)


def data_parallel(module, inputs, device_ids=None, output_device=None, dim=0,
                  module_kwargs=None):
    """``module(*inputs, **module_kwargs)`` on one device (PyTorch's functional
    DataParallel with a single device id)."""
    _one_device(device_ids)
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if inputs is not None else ()
    return module(*inputs, **(module_kwargs or {}))

