"""Learning-rate schedulers (PyTorch's ``torch.optim.lr_scheduler``).

A scheduler reads and writes the ``'lr'`` of its optimizer's param groups (and,
for the cyclic ones, ``'momentum'`` or ``betas[0]``). The formulas, including the
recursive ("chainable") forms PyTorch uses in ``step()``, follow PyTorch 2.13
exactly, so the sequences of learning rates agree to rounding. ``state_dict()`` is
the scheduler's ``__dict__`` without the optimizer, as in PyTorch.
"""
import math
import types
import warnings
from bisect import bisect_right
from collections import Counter
from functools import wraps
from weakref import ref

from ember._tensor import Tensor
from ember.optim.optimizer import Optimizer, _to_scalar

# the composite, plateau and cyclic schedulers live in a sibling file (for size) that
# builds on the classes here; they are loaded on first use (__getattr__ at the end)
_COMPOSITE = ("SequentialLR", "ChainedScheduler", "ReduceLROnPlateau", "CyclicLR", "OneCycleLR")
__all__ = ["LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR", "LinearLR",
           "ExponentialLR", "CosineAnnealingLR", "CosineAnnealingWarmRestarts",
           "PolynomialLR", "LRScheduler", *_COMPOSITE]

EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being deprecated "
    "where possible. Please use `scheduler.step()` to step the scheduler. During the "
    "deprecation, if epoch is different from None, the closed form is used instead of the "
    "new chainable form, where available. Please open an issue if you are unable to "
    "replicate your use case: https://github.com/pytorch/pytorch/issues/new/choose.")


def _copy(value):
    return value.clone() if isinstance(value, Tensor) else value


def _check_optimizer(optimizer):
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")


def _callable_state(fn):
    """How a user function is saved: None for a plain function, else a copy of the
    callable object's ``__dict__``."""
    return None if isinstance(fn, types.FunctionType) else fn.__dict__.copy()


def _load_callable_state(fn, saved):
    """Restore what :func:`_callable_state` saved into the callable object ``fn``."""
    if saved is not None:
        fn.__dict__.update(saved)


def _format_param(name, optimizer, param):
    """One value per param group, from a scalar or a list of the right length."""
    if isinstance(param, (list, tuple)):
        if len(param) != len(optimizer.param_groups):
            raise ValueError(f"{name} must have the same length as optimizer.param_groups. "
                             f"{name} has {len(param)} values, param_groups has "
                             f"{len(optimizer.param_groups)}.")
    else:
        param = [param] * len(optimizer.param_groups)
    return list(map(_copy, param))


def _param_groups_val_list(optimizer, key):
    return [_copy(group[key]) for group in optimizer.param_groups]


def _update_param_group_val(param_group, key, val):
    """Set ``param_group[key]``; a tensor-valued entry is filled in place."""
    current = param_group[key]
    if isinstance(current, Tensor):
        v = _to_scalar(val)
        current._data[...] = v._data if isinstance(v, Tensor) else v
        current._vc[0] += 1
    else:
        param_group[key] = val


class _enable_get_lr_call:
    def __init__(self, o):
        self.o = o

    def __enter__(self):
        self.o._get_lr_called_within_step = True
        return self

    def __exit__(self, *exc):
        self.o._get_lr_called_within_step = False


class _initial_mode:
    def __init__(self, o):
        self.o = o

    def __enter__(self):
        self.o._is_initial = True

    def __exit__(self, *exc):
        self.o._is_initial = False


def _warn_get_lr_called_within_step(scheduler):
    if not scheduler._get_lr_called_within_step:
        warnings.warn("To get the last learning rate computed by the scheduler, please use "
                      "`get_last_lr()`.", UserWarning, stacklevel=3)


class LRScheduler:
    """Base class of the schedulers: adjusts the optimizer's learning rates per ``step()``.

    Subclasses implement ``get_lr()`` (the chainable form, from the current group
    values) and optionally ``_get_closed_form_lr()`` (used when ``step(epoch)`` is given).

    Args:
        optimizer (Optimizer): the wrapped optimizer.
        last_epoch (int): index of the last epoch, -1 to start fresh (default: -1);
            resuming needs ``'initial_lr'`` in every param group.
    """

    _get_lr_called_within_step = False
    _is_initial = False
    # attributes state_dict() leaves out besides the optimizer (functions rebuilt on load)
    _unsaved = ()
    # attributes holding lists saved item by item through _save_item/_load_item, not by
    # reference: the user functions of LambdaLR, the child schedulers of SequentialLR
    _saved_by_content = ()

    def __init__(self, optimizer, last_epoch=-1):
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", _copy(group["lr"]))
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when "
                        "resuming scheduler with last_epoch >= 0.\nThis typically happens "
                        "when:\n1. You're trying to resume training from a checkpoint but "
                        "haven't properly loaded the optimizer state\n2. You're using "
                        "last_epoch >= 0 for a fresh training run (not recommended)")
        self.base_lrs = _param_groups_val_list(optimizer, "initial_lr")
        self.last_epoch = last_epoch
        self._patch_optimizer_step()
        self._initial_step()

    def _patch_optimizer_step(self):
        # wrap optimizer.step to notice a scheduler stepped before its optimizer
        opt = self.optimizer
        if hasattr(opt.step, "_wrapped_by_lr_sched"):
            return
        opt_ref = ref(opt)
        func = opt.step.__func__

        @wraps(func)
        def wrapper(*args, **kwargs):
            o = opt_ref()
            o._opt_called = True
            return func.__get__(o, o.__class__)(*args, **kwargs)
        wrapper._wrapped_by_lr_sched = True
        opt.step = wrapper

    def _initial_step(self):
        self._step_count = 0
        with _initial_mode(self):
            self.step()

    def state_dict(self):
        """The scheduler's state: every attribute except the optimizer.

        User functions (``lr_lambda``) are saved as None, callable objects by their
        ``__dict__``; child schedulers by their own state dicts.
        """
        skip = ("optimizer", *self._unsaved, *self._saved_by_content)
        state = {key: value for key, value in self.__dict__.items() if key not in skip}
        for key in self._saved_by_content:
            state[key] = [self._save_item(item) for item in getattr(self, key)]
        return state

    def load_state_dict(self, state_dict):
        """Load a state returned by :meth:`state_dict`."""
        saved = {key: state_dict.pop(key) for key in self._saved_by_content}
        self.__dict__.update(state_dict)
        state_dict.update(saved)
        for key, items in saved.items():
            objects = getattr(self, key)
            for idx, item in enumerate(items):
                self._load_item(objects[idx], item)

    def get_last_lr(self):
        """The learning rates (one per param group) set by the last ``step()``."""
        return self._last_lr

    def get_lr(self):
        """The learning rates for the current ``last_epoch`` (chainable form)."""
        raise NotImplementedError

    def step(self, epoch=None):
        """Advance one epoch (or jump to ``epoch``, deprecated) and set the new rates."""
        if self._step_count == 1:
            if not hasattr(self.optimizer.step, "_wrapped_by_lr_sched"):
                warnings.warn(
                    "Seems like `optimizer.step()` has been overridden after learning rate "
                    "scheduler initialization. Please, make sure to call `optimizer.step()` "
                    "before `lr_scheduler.step()`. See more details at "
                    "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate",
                    UserWarning, stacklevel=2)
            elif not getattr(self.optimizer, "_opt_called", False):
                warnings.warn(
                    "Detected call of `lr_scheduler.step()` before `optimizer.step()`. In "
                    "PyTorch 1.1.0 and later, you should call them in the opposite order: "
                    "`optimizer.step()` before `lr_scheduler.step()`.  Failure to do this will "
                    "result in PyTorch skipping the first value of the learning rate schedule. "
                    "See more details at "
                    "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate",
                    UserWarning, stacklevel=2)
        self._step_count += 1
        if epoch is not None:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch=None):
        if epoch is None:
            self.last_epoch += 1
            self._set_lrs(self.get_lr)
        else:
            self.last_epoch = epoch
            self._set_lrs(getattr(self, "_get_closed_form_lr", self.get_lr))

    def _set_lrs(self, compute):
        """Set the groups' lrs to ``compute()`` (called as from ``step``); record them."""
        with _enable_get_lr_call(self):
            values = compute()
        for param_group, lr in zip(self.optimizer.param_groups, values):
            _update_param_group_val(param_group, "lr", lr)
        self._last_lr = _param_groups_val_list(self.optimizer, "lr")


class _LRScheduler(LRScheduler):
    pass


class _LambdaMixin:
    """One user function per param group (``lr_lambdas``), saved as :func:`_callable_state`."""

    _saved_by_content = ("lr_lambdas",)
    _save_item = staticmethod(_callable_state)
    _load_item = staticmethod(_load_callable_state)

    def _set_lambdas(self, optimizer, lr_lambda):
        if not isinstance(lr_lambda, (list, tuple)):
            self.lr_lambdas = [lr_lambda] * len(optimizer.param_groups)
        else:
            if len(lr_lambda) != len(optimizer.param_groups):
                raise ValueError(f"Expected {len(optimizer.param_groups)} lr_lambdas, but got "
                                 f"{len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)


class LambdaLR(_LambdaMixin, LRScheduler):
    """Set each group's lr to ``initial_lr * lr_lambda(epoch)``.

    Args:
        optimizer (Optimizer): the wrapped optimizer.
        lr_lambda (Callable or list): a function of the epoch, or one per param group.
        last_epoch (int): index of the last epoch (default: -1).

    Example::

        >>> sched = LambdaLR(opt, lr_lambda=lambda epoch: 0.95 ** epoch)
    """

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.optimizer = optimizer
        self._set_lambdas(optimizer, lr_lambda)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        _warn_get_lr_called_within_step(self)
        return [base_lr * lmbda(self.last_epoch)
                for lmbda, base_lr in zip(self.lr_lambdas, self.base_lrs)]


class MultiplicativeLR(_LambdaMixin, LRScheduler):
    """Multiply each group's lr by ``lr_lambda(epoch)`` every epoch.

    Args:
        optimizer (Optimizer): the wrapped optimizer.
        lr_lambda (Callable or list): a function of the epoch, or one per param group.
        last_epoch (int): index of the last epoch (default: -1).
    """

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.optimizer = optimizer
        self._set_lambdas(optimizer, lr_lambda)
        for fn in self.lr_lambdas:
            if not callable(fn):
                raise TypeError(f"lr_lambda should be a function, but got {type(fn).__name__}")
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        _warn_get_lr_called_within_step(self)
        if not self._is_initial:
            return [group["lr"] * lmbda(self.last_epoch)
                    for lmbda, group in zip(self.lr_lambdas, self.optimizer.param_groups)]
        return _param_groups_val_list(self.optimizer, "lr")


class StepLR(LRScheduler):
    """Multiply the lr by ``gamma`` every ``step_size`` epochs.

    Args:
        optimizer (Optimizer): the wrapped optimizer.
        step_size (int): period of the decay.
        gamma (float): multiplicative factor (default: 0.1).
        last_epoch (int): index of the last epoch (default: -1).
    """

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        _warn_get_lr_called_within_step(self)
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return _param_groups_val_list(self.optimizer, "lr")
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * self.gamma ** (self.last_epoch // self.step_size)
                for base_lr in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiply the lr by ``gamma`` at each milestone epoch (repeated milestones compound).

    Args:
        optimizer (Optimizer): the wrapped optimizer.
        milestones (list): epoch indices.
        gamma (float): multiplicative factor (default: 0.1).
        last_epoch (int): index of the last epoch (default: -1).
    """

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        _warn_get_lr_called_within_step(self)
        if self.last_epoch not in self.milestones:
            return _param_groups_val_list(self.optimizer, "lr")
        return [group["lr"] * self.gamma ** self.milestones[self.last_epoch]
                for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        milestones = sorted(self.milestones.elements())
        return [base_lr * self.gamma ** bisect_right(milestones, self.last_epoch)
                for base_lr in self.base_lrs]


class ConstantLR(LRScheduler):
    """Multiply the lr by ``factor`` until epoch ``total_iters``.

    Args:
        optimizer (Optimizer): the wrapped optimizer.
        factor (float): the factor, in [0, 1] (default: 1/3).
        total_iters (int): number of epochs with the factor applied (default: 5).
        last_epoch (int): index of the last epoch (default: -1).
    """

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1):
        if factor > 1.0 or factor < 0:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        _warn_get_lr_called_within_step(self)
        if self.last_epoch == 0:
            return [group["lr"] * self.factor for group in self.optimizer.param_groups]
        if self.last_epoch != self.total_iters:
            return _param_groups_val_list(self.optimizer, "lr")
        return [group["lr"] * (1.0 / self.factor) for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * (self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor))
                for base_lr in self.base_lrs]


class LinearLR(LRScheduler):
    """Change the lr factor linearly from ``start_factor`` to ``end_factor`` over
    ``total_iters`` epochs.

    Args:
        optimizer (Optimizer): the wrapped optimizer.
        start_factor (float): factor in the first epoch, in (0, 1] (default: 1/3).
        end_factor (float): factor at the end, in [0, 1] (default: 1.0).
        total_iters (int): number of epochs to reach ``end_factor`` (default: 5).
        last_epoch (int): index of the last epoch (default: -1).
    """

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5,
                 last_epoch=-1):
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 and "
                             "less or equal to 1.")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        _warn_get_lr_called_within_step(self)
        if self.last_epoch == 0:
            return [group["lr"] * self.start_factor for group in self.optimizer.param_groups]
        if self._is_initial or self.last_epoch > self.total_iters:
            return _param_groups_val_list(self.optimizer, "lr")
        return [group["lr"] * (1.0 + (self.end_factor - self.start_factor)
                               / (self.total_iters * self.start_factor
                                  + (self.last_epoch - 1) * (self.end_factor - self.start_factor)))
                for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * (self.start_factor + (self.end_factor - self.start_factor)
                           * min(self.total_iters, self.last_epoch) / self.total_iters)
                for base_lr in self.base_lrs]


class ExponentialLR(LRScheduler):
    """Multiply the lr by ``gamma`` every epoch.

    Args:
        optimizer (Optimizer): the wrapped optimizer.
        gamma (float): multiplicative factor.
        last_epoch (int): index of the last epoch (default: -1).
    """

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        _warn_get_lr_called_within_step(self)
        if self._is_initial:
            return _param_groups_val_list(self.optimizer, "lr")
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * self.gamma ** self.last_epoch for base_lr in self.base_lrs]


class PolynomialLR(LRScheduler):
    """Decay the lr by a polynomial of the given ``power`` to zero at ``total_iters``.

    Args:
        optimizer (Optimizer): the wrapped optimizer.
        total_iters (int): number of epochs of decay (default: 5).
        power (float): power of the polynomial (default: 1.0).
        last_epoch (int): index of the last epoch (default: -1).
    """

    def __init__(self, optimizer, total_iters=5, power=1.0, last_epoch=-1):
        self.total_iters = total_iters
        self.power = power
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        _warn_get_lr_called_within_step(self)
        if self._is_initial or self.last_epoch > self.total_iters:
            return _param_groups_val_list(self.optimizer, "lr")
        decay_factor = ((1.0 - self.last_epoch / self.total_iters)
                        / (1.0 - (self.last_epoch - 1) / self.total_iters)) ** self.power
        return [group["lr"] * decay_factor for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * (1.0 - min(self.total_iters, self.last_epoch) / self.total_iters)
                ** self.power for base_lr in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    r"""Anneal the lr along a cosine from ``initial_lr`` to ``eta_min`` over ``T_max`` epochs.

    ``step()`` uses PyTorch's recursive form
    :math:`\eta_{t+1} = \eta_{min} + (\eta_t - \eta_{min})
    \frac{1 + \cos(\pi (t+1) / T_{max})}{1 + \cos(\pi t / T_{max})}`, which follows other
    changes made to the lr; past ``T_max`` the lr rises again (no restart).

    Args:
        optimizer (Optimizer): the wrapped optimizer.
        T_max (int): half period, in epochs.
        eta_min (float): minimum learning rate (default: 0.0).
        last_epoch (int): index of the last epoch (default: -1).
    """

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        _warn_get_lr_called_within_step(self)
        if self._is_initial:
            return _param_groups_val_list(self.optimizer, "lr")
        if self._step_count == 1 and self.last_epoch > 0:
            return [self.eta_min + (base_lr - self.eta_min)
                    * (1 + math.cos(self.last_epoch * math.pi / self.T_max)) / 2
                    for base_lr in self.base_lrs]
        if (self.last_epoch - 1 - self.T_max) % (2 * self.T_max) == 0:
            return [group["lr"] + (base_lr - self.eta_min)
                    * (1 - math.cos(math.pi / self.T_max)) / 2
                    for base_lr, group in zip(self.base_lrs, self.optimizer.param_groups)]
        return [(1 + math.cos(math.pi * self.last_epoch / self.T_max))
                / (1 + math.cos(math.pi * (self.last_epoch - 1) / self.T_max))
                * (group["lr"] - self.eta_min) + self.eta_min
                for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [self.eta_min + (base_lr - self.eta_min)
                * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base_lr in self.base_lrs]


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing restarted every ``T_i`` epochs, with ``T_i = T_0 * T_mult**i``.

    ``step(epoch)`` accepts fractional epochs (e.g. ``epoch + i / iters``).

    Args:
        optimizer (Optimizer): the wrapped optimizer.
        T_0 (int): epochs until the first restart.
        T_mult (int): factor growing the period after each restart (default: 1).
        eta_min (float): minimum learning rate (default: 0.0).
        last_epoch (int): index of the last epoch (default: -1).
    """

    def __init__(self, optimizer, T_0, T_mult=1, eta_min=0.0, last_epoch=-1):
        if T_0 <= 0 or not isinstance(T_0, int):
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if T_mult < 1 or not isinstance(T_mult, int):
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        if not isinstance(eta_min, (float, int)):
            raise ValueError(f"Expected float or int eta_min, but got {eta_min} of type "
                             f"{type(eta_min)}")
        self.T_0 = T_0
        self.T_i = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        _warn_get_lr_called_within_step(self)
        return [self.eta_min + (base_lr - self.eta_min)
                * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
                for base_lr in self.base_lrs]

    def step(self, epoch=None):
        """Advance one epoch, or go to (possibly fractional) ``epoch``."""
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        else:
            if epoch < 0:
                raise ValueError(f"Expected non-negative epoch, but got {epoch}")
            if epoch >= self.T_0:
                if self.T_mult == 1:
                    self.T_cur = epoch % self.T_0
                else:
                    n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                    self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
                    self.T_i = self.T_0 * self.T_mult ** n
            else:
                self.T_i = self.T_0
                self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        self._set_lrs(self.get_lr)




def __getattr__(name):
    # they live in ember.optim._lr_composite, which builds on the classes
    # above: imported on first use, so that neither module imports the other on load
    if name in _COMPOSITE:
        from ember.optim import _lr_composite
        return getattr(_lr_composite, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_COMPOSITE))
