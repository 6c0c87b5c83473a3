"""ember's core namespace, for modules inside ember.

Holds what ``import ember`` gives from the layers below the subsystems: the Tensor
type, dtypes and devices, every op, the factories, random sampling, the grad modes,
and the namespaces ``linalg``, ``special``, ``autograd`` and ``backend``. The package
root re-exports the same objects, so ``ember._core.exp is ember.exp``
(tests/test_layering.py checks). A module inside ember that uses many of these names
imports this module (``from ember import _core as ember``) instead of the package
root: importing the root from below would make every module depend on every other
one (see "Layers and imports" in docs/design.md). This module imports nothing above
ops/. Its imports keep the root's order, as later star imports win.
"""
# isort: skip_file
from ember._tensor import Size, Tensor  # noqa: F401
from ember.backend import device  # noqa: F401
from ember.backend.dtypes import *  # noqa: F401,F403
from ember.backend.dtypes import dtype  # noqa: F401
from ember.ops import *  # noqa: F401,F403
from ember._factory import *  # noqa: F401,F403
from ember._random import *  # noqa: F401,F403
from ember._random_ops import *  # noqa: F401,F403
from ember.autograd.grad_mode import (  # noqa: F401
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from ember.sparse import sparse_coo, sparse_coo_tensor, spmm, strided  # noqa: F401
from ember._legacy import *  # noqa: F401,F403
# the namespaces at this layer (torch.linalg, torch.special, torch.autograd)
from ember import autograd, backend, linalg, special  # noqa: E402,F401

# the root publishes ATen's forms of these from ember.nn._aten_ops (above this layer);
# the ops of the same names stay reachable as ember.ops.<name>
del grid_sampler, grid_sampler_2d, grid_sampler_3d, native_dropout  # noqa: F821
