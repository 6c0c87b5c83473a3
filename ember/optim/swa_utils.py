"""Stochastic weight averaging and EMA (PyTorch's ``torch.optim.swa_utils``).

``AveragedModel`` keeps a running (SWA) or exponential (EMA) average of a model's
parameters, ``SWALR`` anneals each group's lr to a constant ``swa_lr``, and
``update_bn`` recomputes batch-norm statistics for the averaged weights.
"""
import itertools
import math
import warnings
from copy import deepcopy

from ember._factory import tensor
from ember.autograd.grad_mode import no_grad
from ember.backend import dtypes as _dt
from ember.nn import Module
from ember.optim.lr_scheduler import LRScheduler, _format_param

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn",
           "get_swa_multi_avg_fn", "get_ema_avg_fn", "get_swa_avg_fn"]


def _check_decay(decay):
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in "
                         "[0,1] range.")


def _lerp_into(avg, cur, weight):
    """``avg.lerp_(cur, weight)`` on tensors' arrays (floating) or the integer formula."""
    a = avg._data
    if a.dtype.kind == "f":
        if weight < 0.5:
            a += weight * (cur._data - a)
        else:
            a[...] = cur._data - (cur._data - a) * (1 - weight)
    else:
        a[...] = a * (1 - weight) + cur._data * weight
    avg._vc[0] += 1


def get_ema_multi_avg_fn(decay=0.999):
    """An in-place EMA update over lists of tensors: ``ema = decay * ema + (1 - decay) * p``."""
    _check_decay(decay)

    def ema_update(ema_param_list, current_param_list, _):
        for p_ema, p_model in zip(ema_param_list, current_param_list):
            _lerp_into(p_ema, p_model, 1 - decay)
    return ema_update


def get_swa_multi_avg_fn():
    """An in-place running-mean update over lists of tensors."""
    def swa_update(averaged_param_list, current_param_list, num_averaged):
        # as in PyTorch, a tensor count gives a weight in the default float dtype
        weight = float(1 / (num_averaged + 1))
        for p_avg, p_model in zip(averaged_param_list, current_param_list):
            if p_avg._data.dtype.kind == "f":
                _lerp_into(p_avg, p_model, weight)
            else:
                a = p_avg._data
                a[...] = a + (p_model._data - a) / (float(num_averaged) + 1)
                p_avg._vc[0] += 1
    return swa_update


def get_ema_avg_fn(decay=0.999):
    """An EMA function of one tensor: ``decay * ema + (1 - decay) * p``."""
    _check_decay(decay)

    @no_grad()
    def ema_update(ema_param, current_param, num_averaged):
        return decay * ema_param + (1 - decay) * current_param
    return ema_update


def get_swa_avg_fn():
    """A running-mean function of one tensor: ``avg + (p - avg) / (n + 1)``."""
    @no_grad()
    def swa_update(averaged_param, current_param, num_averaged):
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)
    return swa_update


class AveragedModel(Module):
    """A copy of ``model`` whose parameters are averaged by ``update_parameters(model)``.

    By default the average is the running mean (SWA); ``avg_fn(avg, p, n)`` returns a new
    average for one tensor, ``multi_avg_fn(avgs, ps, n)`` updates lists in place (e.g.
    ``get_ema_multi_avg_fn(0.999)``). With ``use_buffers`` buffers are averaged too;
    otherwise they are copied from the model.

    Args:
        model (Module): the model to average (deep-copied).
        device (device): where to keep the copy (default: the model's).
        avg_fn, multi_avg_fn (Callable): the averaging rule (at most one of them).
        use_buffers (bool): average buffers as well as parameters (default: False).
    """

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tensor(0, dtype=_dt.int64, device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def update_parameters(self, model):
        """Fold ``model``'s current parameters into the average."""
        if self.use_buffers:
            self_params = itertools.chain(self.module.parameters(), self.module.buffers())
            model_params = itertools.chain(model.parameters(), model.buffers())
        else:
            self_params, model_params = self.parameters(), model.parameters()
        averaged, current = [], []
        n = int(self.n_averaged.item())
        for p_avg, p_model in zip(self_params, model_params):
            p_model_ = p_model.detach().to(p_avg.device)
            averaged.append(p_avg.detach())
            current.append(p_model_)
            if n == 0:
                p_avg._data[...] = p_model_._data
                p_avg._vc[0] += 1
        if n > 0:
            if self.multi_avg_fn is not None:
                self.multi_avg_fn(averaged, current, self.n_averaged)
            elif self.avg_fn is None:
                # the running mean, with the formula PyTorch uses off CUDA
                for p_avg, p_model in zip(averaged, current):
                    a = p_avg._data
                    a[...] = a + (p_model._data - a) / (n + 1)
                    p_avg._vc[0] += 1
            else:
                for p_avg, p_model in zip(averaged, current):
                    new = self.avg_fn(p_avg, p_model, self.n_averaged)
                    p_avg._data[...] = new._data
                    p_avg._vc[0] += 1
        if not self.use_buffers:
            for b_swa, b_model in zip(self.module.buffers(), model.buffers()):
                b_swa._data[...] = b_model.detach().to(b_swa.device)._data
                b_swa._vc[0] += 1
        self.n_averaged._data += 1
        self.n_averaged._vc[0] += 1


def _is_batchnorm(module):
    return any(c.__name__ == "_BatchNorm" for c in type(module).__mro__)


def update_bn(loader, model, device=None):
    """Recompute the batch-norm running statistics of ``model`` over one pass of ``loader``.

    Each batch (or its first element, for tuples and lists) is fed to the model in
    training mode with cumulative averaging (``momentum=None``).
    """
    with no_grad():
        momenta = {}
        for module in model.modules():
            if _is_batchnorm(module):
                module.reset_running_stats()
                momenta[module] = module.momentum
        if not momenta:
            return
        was_training = model.training
        model.train()
        for module in momenta:
            module.momentum = None
        for batch in loader:
            if isinstance(batch, (list, tuple)):
                batch = batch[0]
            if device is not None:
                batch = batch.to(device)
            model(batch)
        for module, momentum in momenta.items():
            module.momentum = momentum
        model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each group's lr to ``swa_lr`` over ``anneal_epochs``, then hold it.

    Args:
        optimizer (Optimizer): the wrapped optimizer.
        swa_lr (float or list): the SWA learning rate(s).
        anneal_epochs (int): epochs of annealing (default: 10).
        anneal_strategy (str): 'cos' or 'linear' (default: 'cos').
        last_epoch (int): index of the last epoch (default: -1).
    """

    _unsaved = ("anneal_func",)  # rebuilt from _anneal_strategy on load

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos",
                 last_epoch=-1):
        swa_lrs = _format_param("swa_lr", optimizer, swa_lr)
        for lr, group in zip(swa_lrs, optimizer.param_groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ["cos", "linear"]:
            raise ValueError("anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t):
        return t

    @staticmethod
    def _cosine_anneal(t):
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self):
        if not self._get_lr_called_within_step:
            warnings.warn("To get the last learning rate computed by the scheduler, please use "
                          "`get_last_lr()`.", UserWarning, stacklevel=2)
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_t = max(0, min(1, (step - 1) / max(1, self.anneal_epochs)))
        prev_alpha = self.anneal_func(prev_t)
        prev_lrs = [self._get_initial_lr(group["lr"], group["swa_lr"], prev_alpha)
                    for group in self.optimizer.param_groups]
        t = max(0, min(1, step / max(1, self.anneal_epochs)))
        alpha = self.anneal_func(t)
        return [group["swa_lr"] * alpha + lr * (1 - alpha)
                for group, lr in zip(self.optimizer.param_groups, prev_lrs)]

    def _set_anneal_func(self, anneal_strategy):
        self._anneal_strategy = anneal_strategy
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" else \
            self._linear_anneal

    def load_state_dict(self, state_dict):
        """Load a state returned by :meth:`state_dict`."""
        super().load_state_dict(state_dict)
        self._set_anneal_func(self._anneal_strategy)

