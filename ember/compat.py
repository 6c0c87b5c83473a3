"""Run PyTorch programs on ember: ``import torch`` served by ember, and the small
pieces of ``torch`` that real programs touch first.

``alias_torch()`` installs a finder on ``sys.meta_path`` that answers every import of
``torch`` or ``torch.<sub>`` with the ember module of the same path (``torch.nn.functional``
is ``ember.nn.functional``). ``python -m ember run PROGRAM.py ARGS...`` does this and
then runs the program as ``__main__``.
"""
import importlib
import importlib.abc
import importlib.util
import sys
import types

__all__ = ["alias_torch", "unalias_torch", "MissingTorchAPI"]

# torch submodules that live elsewhere in ember
_RENAMES = {
    "torch._C": None,
    "torch.utils.data.dataloader": "ember.utils.data.dataloader",
    "torch.utils.data.dataset": "ember.utils.data.dataset",
    "torch.utils.data.sampler": "ember.utils.data.sampler",
    "torch.utils.data.distributed": "ember.utils.data.sampler",
    "torch.nn.parameter": "ember.nn.parameter",
    "torch.serialization": "ember.serialization",
    "torch.testing": "ember.testing",
}
# torch.distributions keeps one module per distribution; ember groups them by family
_RENAMES.update({f"torch.distributions.{sub}": f"ember.distributions.{family}"
                 for family, subs in {
                     "continuous": "normal uniform laplace cauchy exponential exp_family",
                     "discrete": "bernoulli binomial multinomial poisson geometric "
                                 "negative_binomial",
                     "categorical": "one_hot_categorical",
                     "gamma": "chi2 beta dirichlet studentT fishersnedecor",
                     "multivariate_normal": "lowrank_multivariate_normal",
                     "wrappers": "independent mixture_same_family",
                     "relaxed": "relaxed_bernoulli relaxed_categorical continuous_bernoulli",
                     "transformed": "transformed_distribution log_normal half_normal "
                                    "half_cauchy gumbel weibull pareto inverse_gamma "
                                    "kumaraswamy logistic_normal",
                     "circular": "von_mises"}.items()
                 for sub in subs.split()})


class MissingTorchAPI(ModuleNotFoundError):
    """A torch module that ember does not provide (yet)."""


class _Loader(importlib.abc.Loader):
    def __init__(self, module):
        self.module = module

    def create_module(self, spec):
        return self.module

    def exec_module(self, module):
        pass


def _module_attribute(target_name):
    """``ember.backends.cudnn`` and the like: a module object kept as an attribute of
    its parent rather than a file (``import torch.backends.cudnn`` must find it)."""
    parent, _, last = target_name.rpartition(".")
    try:
        obj = getattr(importlib.import_module(parent), last, None)
    except ImportError:
        return None
    return obj if isinstance(obj, types.ModuleType) else None


class TorchAliasFinder(importlib.abc.MetaPathFinder):
    """Serve ``torch`` and ``torch.*`` imports with ember's modules."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch" and not fullname.startswith("torch."):
            return None
        target_name = _RENAMES.get(fullname, "ember" + fullname[len("torch"):])
        if target_name is None:
            raise MissingTorchAPI(f"{fullname} (PyTorch's C++ extension module) has no "
                                  "counterpart in ember")
        try:
            module = importlib.import_module(target_name)
        except ModuleNotFoundError as e:
            module = _module_attribute(target_name)
            if module is None and e.name and (e.name == target_name
                                              or target_name.startswith(e.name + ".")):
                raise MissingTorchAPI(
                    f"{fullname} is not implemented in ember yet (looked for {target_name})",
                    name=fullname) from None
            if module is None:
                raise
        # every served module may have submodules (torch.cuda.amp, torch.backends.cudnn)
        return importlib.util.spec_from_loader(fullname, _Loader(module), is_package=True)


_finder = TorchAliasFinder()


def alias_torch():
    """Make ``import torch`` (and every ``torch.*`` submodule) import ember instead."""
    for name in [n for n in sys.modules if n == "torch" or n.startswith("torch.")]:
        mod = sys.modules[name]
        if not getattr(mod, "__name__", "").startswith("ember"):
            raise RuntimeError("torch is already imported in this process; call "
                               "ember.compat.alias_torch() before anything imports torch")
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)


def unalias_torch():
    """Undo ``alias_torch()``: forget the aliases and remove the import hook."""
    if _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
    for name in [n for n in sys.modules if n == "torch" or n.startswith("torch.")]:
        if getattr(sys.modules[name], "__name__", "").startswith("ember"):
            del sys.modules[name]


def missing_attribute(module_name, name):
    """The AttributeError a torch program sees for an API ember lacks."""
    torch_name = "torch" + module_name[len("ember"):]
    return AttributeError(f"module '{module_name}' has no attribute '{name}': "
                          f"{torch_name}.{name} is not implemented in ember yet")
