"""Run PyTorch programs on ember: ``import torch`` served by ember, and the small
pieces of ``torch`` that real programs touch first.

``alias_torch()`` installs a finder on ``sys.meta_path`` that answers every import of
``torch`` or ``torch.<sub>`` with the ember module of the same path (``torch.nn.functional``
is ``ember.nn.functional``). ``python -m ember run PROGRAM.py ARGS...`` does this and
then runs the program as ``__main__``.

Programs and libraries check which torch they run on, so the aliased ``torch`` reports
the torch version ember implements: ``torch.__version__``, ``torch.version.__version__``
and ``importlib.metadata.version("torch")`` are ``2.13.0+ember.<ember's version>``, a
:class:`TorchVersion` (a str that compares with strings and tuples as versions). The
metadata comes from a ``torch`` distribution that a finder on ``sys.meta_path`` offers
(``importlib.metadata``'s ``find_distributions`` protocol); ``alias_torch()`` installs
it and ``unalias_torch()`` removes it, and a plain ``import ember`` never does.
``ember.__version__`` stays ember's own.
"""
import importlib
import importlib.abc
import importlib.metadata
import importlib.util
import re
import sys
import types

__all__ = ["alias_torch", "unalias_torch", "MissingTorchAPI", "TorchVersion", "TORCH_VERSION"]

# torch submodules that live elsewhere in ember
_RENAMES = {
    "torch._C": "ember._C",
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

# the torchvision modules ember's stand-in serves (``import torchvision`` under ember run)
_TORCHVISION = {"torchvision": "ember._torchvision",
                "torchvision.transforms": "ember._torchvision.transforms",
                "torchvision.transforms.functional": "ember._torchvision.functional",
                "torchvision.datasets": "ember._torchvision.datasets",
                "torchvision.ops": "ember._torchvision.ops",
                "torchvision.ops.misc": "ember._torchvision.ops",
                "torchvision.models": "ember._torchvision.models",
                "torchvision.io": "ember._torchvision.io",
                # the v2 API's modules: the same stand-ins (transformers imports them)
                "torchvision.transforms.v2": "ember._torchvision.transforms",
                "torchvision.transforms.v2.functional": "ember._torchvision.functional",
                "torchvision.ops.boxes": "ember._torchvision.ops"}

# the torch release whose API ember implements (and whose behaviour its tests compare)
TORCH_VERSION = "2.13.0"


# ----- versions ----------------------------------------------------------------------------
_VERSION_RE = re.compile(
    r"^\s*v?(?:(?P<epoch>[0-9]+)!)?(?P<release>[0-9]+(?:\.[0-9]+)*)"
    r"(?:[-_.]?(?P<pre_l>alpha|a|beta|b|preview|pre|c|rc)[-_.]?(?P<pre_n>[0-9]+)?)?"
    r"(?:-(?P<post_n1>[0-9]+)|[-_.]?(?P<post_l>post|rev|r)[-_.]?(?P<post_n2>[0-9]+)?)?"
    r"(?:[-_.]?(?P<dev_l>dev)[-_.]?(?P<dev_n>[0-9]+)?)?"
    r"(?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?\s*$", re.IGNORECASE)
_PRE_RANK = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}


def _version_key(text):
    """A sort key for a PEP 440 version string, or None if ``text`` is not one.

    The order is PEP 440's: ``2.0.0a1 < 2.0.0rc1 < 2.0.0 < 2.0.0.post1``, a ``.devN``
    before its release, trailing zeros ignored (``2.1 == 2.1.0``), and a local
    ``+label`` after the same public version, its parts compared number to number and
    text to text (numbers after text).
    """
    m = _VERSION_RE.match(text)
    if m is None:
        return None
    release = [int(x) for x in m["release"].split(".")]
    while len(release) > 1 and release[-1] == 0:
        release.pop()
    post = m["post_n1"] or m["post_n2"] or ("0" if m["post_l"] else None)
    dev = m["dev_n"] or ("0" if m["dev_l"] else None)
    if m["pre_l"]:
        pre = (0, _PRE_RANK[m["pre_l"].lower()], int(m["pre_n"] or 0))
    else:
        pre = (-1,) if dev is not None and post is None else (1,)
    local = (-1,) if m["local"] is None else (0, tuple(
        (1, int(part), "") if part.isdigit() else (0, 0, part.lower())
        for part in re.split(r"[-_.]", m["local"])))
    return (int(m["epoch"] or 0), tuple(release), pre,
            (-1,) if post is None else (0, int(post)),
            (1,) if dev is None else (0, int(dev)), local)


def _compare(method):
    def compare(self, other):
        if isinstance(other, str):
            theirs = _version_key(other)
        elif isinstance(other, (tuple, list)):
            theirs = _version_key(".".join(str(part) for part in other))
        else:
            return NotImplemented
        mine = _version_key(self)
        if mine is None or theirs is None:
            # not versions (``'parrot'``): the string's own comparison, as torch falls back to
            return getattr(str, method)(self, other)
        return getattr(mine, method)(theirs)
    compare.__name__ = method
    return compare


class TorchVersion(str):
    """A version string that compares as a version, as ``torch.torch_version.TorchVersion``.

    ``TorchVersion("2.13.0+ember.0.1.0") >= "2.0"`` and ``< (2, 14)`` hold; ``==`` is
    version equality (``TorchVersion("2.1") == "2.1.0"``) while ``!=`` and the hash stay
    the string's, as in torch.
    """

    __eq__ = _compare("__eq__")
    __lt__ = _compare("__lt__")
    __le__ = _compare("__le__")
    __gt__ = _compare("__gt__")
    __ge__ = _compare("__ge__")
    __hash__ = str.__hash__


def torch_version():
    """The version the aliased ``torch`` reports: ``2.13.0+ember.<ember's version>``."""
    from ember import __version__
    return TorchVersion(f"{TORCH_VERSION}+ember.{__version__}")


# ----- the aliased torch module and its version modules --------------------------------------
class _TorchNamespace(types.ModuleType):
    """``torch`` under :func:`alias_torch`: ember's namespace (read and written through),
    except for the version attributes and the module's own dunders."""

    def __getattr__(self, name):
        return getattr(sys.modules["ember"], name)

    def __setattr__(self, name, value):
        if name in _OWN or (name.startswith("__") and name.endswith("__")):
            super().__setattr__(name, value)
        else:  # `torch.foo = bar` patches ember, which every ember module reads
            setattr(sys.modules["ember"], name, value)

    def __delattr__(self, name):
        if name in self.__dict__:
            super().__delattr__(name)
        else:
            delattr(sys.modules["ember"], name)

    def __dir__(self):
        return sorted(set(dir(sys.modules["ember"])) | set(self.__dict__))


_OWN = ("version", "torch_version")
_served = {}  # torch module name -> the module ember serves for it, made on first import


def _version_module(name):
    module = types.ModuleType(name, "torch's build information, as ember reports it.")
    version = torch_version()
    if name == "torch.version":
        module.__all__ = ["__version__", "debug", "cuda", "git_version", "hip", "rocm", "xpu"]
        module.__version__ = version
        module.debug = False
        module.cuda = module.hip = module.rocm = module.xpu = None
        module.git_version = "ember-" + version.split("+ember.")[1]
    else:
        module.__all__ = ["TorchVersion", "__version__"]
        module.TorchVersion = TorchVersion
        module.__version__ = version
    return module


def _served_module(fullname):
    """The module ember serves for ``torch``, ``torch.version`` or ``torch.torch_version``."""
    module = _served.get(fullname)
    if module is None:
        if fullname == "torch":
            ember = importlib.import_module("ember")
            module = _TorchNamespace("ember", ember.__doc__)
            module.__version__ = torch_version()
            module.version = _served_module("torch.version")
            module.torch_version = _served_module("torch.torch_version")
        else:
            module = _version_module(fullname)
        _served[fullname] = module
    return module


class _TorchDistribution(importlib.metadata.Distribution):
    """The ``torch`` distribution's metadata: name and the version ember implements."""

    def read_text(self, filename):
        if filename == "METADATA":
            return (f"Metadata-Version: 2.1\nName: torch\nVersion: {torch_version()}\n"
                    "Summary: the PyTorch API, served by ember\n")
        if filename == "top_level.txt":
            return "torch\n"
        return None

    def locate_file(self, path):
        import pathlib
        return pathlib.Path(sys.modules["ember"].__file__).parent / path


class _TorchDistributionFinder(importlib.metadata.DistributionFinder):
    """Answers ``importlib.metadata`` questions about ``torch`` with ember's distribution."""

    def find_spec(self, fullname, path=None, target=None):
        return None

    def find_distributions(self, context=None):
        name = None if context is None else context.name
        if name is None or re.sub(r"[-_.]+", "-", name).lower() == "torch":
            yield _TorchDistribution()


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
        if fullname == "functorch" or fullname.startswith("functorch."):
            # the functorch package (torch's wheel ships one) is ember.func's transforms
            return self._spec(fullname, "torch._functorch" + fullname[len("functorch"):])
        if fullname == "torchvision" or fullname.startswith("torchvision."):
            return self._torchvision_spec(fullname)
        if fullname != "torch" and not fullname.startswith("torch."):
            return None
        return self._spec(fullname, fullname)

    def _torchvision_spec(self, fullname):
        # torchvision's compiled operators cannot load without PyTorch's C++ library:
        # its import-time names come from ember's stand-in (ember/_torchvision)
        target_name = _TORCHVISION.get(fullname)
        if target_name is None:
            served = ", ".join(n.removeprefix("torchvision.") for n in _TORCHVISION
                               if n != "torchvision")
            raise MissingTorchAPI(f"{fullname} is not provided by ember's torchvision "
                                  f"stand-in (it has {served})", name=fullname)
        module = importlib.import_module(target_name)
        return importlib.util.spec_from_loader(fullname, _Loader(module), is_package=True)

    def _spec(self, requested, fullname):
        if fullname in ("torch", "torch.version", "torch.torch_version"):
            return importlib.util.spec_from_loader(
                fullname, _Loader(_served_module(fullname)), is_package=fullname == "torch")
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
        return importlib.util.spec_from_loader(requested, _Loader(module), is_package=True)


_finder = TorchAliasFinder()
_dist_finder = _TorchDistributionFinder()


def _served_by_ember(module):
    return (getattr(module, "__name__", "").startswith("ember")
            or any(module is m for m in _served.values()))


def alias_torch():
    """Make ``import torch`` (and every ``torch.*`` submodule) import ember instead.

    The one line for a program (or notebook) that wants ``torch`` to be ember without
    ``python -m ember run``: call it before anything imports torch::

        import ember.compat; ember.compat.alias_torch()
        import torch            # ember, reporting torch.__version__ == "2.13.0+ember.X"

    It also makes ``importlib.metadata.version("torch")`` report that version.
    """
    for name in [n for n in sys.modules if n == "torch" or n.startswith("torch.")]:
        if not _served_by_ember(sys.modules[name]):
            raise RuntimeError("torch is already imported in this process; call "
                               "ember.compat.alias_torch() before anything imports torch")
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)
    if _dist_finder not in sys.meta_path:
        sys.meta_path.insert(0, _dist_finder)


def unalias_torch():
    """Undo ``alias_torch()``: forget the aliases and remove the import hooks."""
    for finder in (_finder, _dist_finder):
        if finder in sys.meta_path:
            sys.meta_path.remove(finder)
    for name in [n for n in sys.modules
                 if n.split(".")[0] in ("torch", "functorch", "torchvision")]:
        if _served_by_ember(sys.modules[name]):
            del sys.modules[name]


def missing_attribute(module_name, name):
    """The AttributeError a torch program sees for an API ember lacks."""
    torch_name = "torch" + module_name[len("ember"):]
    return AttributeError(f"module '{module_name}' has no attribute '{name}': "
                          f"{torch_name}.{name} is not implemented in ember yet")


def missing_torchvision(module_name, name):
    """The AttributeError for a torchvision name that ember's stand-in lacks."""
    return AttributeError(f"module '{module_name}' has no attribute '{name}': "
                          f"{module_name}.{name} is not provided by ember's torchvision "
                          "stand-in")
