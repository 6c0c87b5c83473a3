"""ember: a readable deep learning framework on NumPy that speaks PyTorch's API.

    import ember as torch
    x = torch.tensor(2.0, requires_grad=True)
"""
import numpy as _np

# PyTorch computes inf and nan without warnings; so does ember (this sets NumPy's
# floating point error handling for the process, see docs/design.md)
_np.seterr(divide="ignore", invalid="ignore", over="ignore", under="ignore")

from ember._tensor import Size, Tensor
from ember.backend import device
from ember.backend.dtypes import *
from ember.backend.dtypes import dtype
from ember import ops
from ember.ops import *
from ember._factory import *
from ember._random import *
from ember._random_ops import *  # rand, randn, normal ... and the Tensor methods
from ember.autograd.grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from ember import autograd
import ember.linalg as linalg  # torch.linalg (replaces the ember.ops.linalg name)
import ember.fft as fft  # torch.fft
from ember.autograd.anomaly import (
    is_anomaly_check_nan_enabled,
    is_anomaly_enabled,
    set_anomaly_enabled,
)
from ember import cuda
from ember._tensor_str import get_printoptions, printoptions, set_printoptions
from ember import optim
from ember.serialization import load, save
from ember import nn
import ember.utils.data as _utils_data  # torch.utils.data works after `import torch`

from ember import accelerator, amp, backends, distributed
from ember import jit  # torch.jit: TorchScript archives and interpreter
from ember.amp import autocast
from ember.sparse import sparse_coo, sparse_coo_tensor, spmm, strided
from ember._legacy import *
from ember import testing
from ember import profiler
from ember import masked
from ember import hub
import ember.special as special  # torch.special
import ember.distributions as distributions  # torch.distributions

__version__ = "0.1.0"


# torch's submodules reachable as attributes after `import torch`; optional extras among
# them (onnx) are imported only when first asked for
_LAZY_MODULES = ("export", "_logging", "onnx", "multiprocessing", "compiler", "library",
                 "fx", "overrides", "xpu", "_dynamo", "_functorch", "_C")


def __getattr__(name):
    if name == "random":
        # torch.random, loaded on first use: an eager import would let `from ember import *`
        # shadow Python's random module
        import importlib
        return importlib.import_module("ember.random")
    if name in _LAZY_MODULES:  # torch.export, torch.onnx, ...: loaded on first use
        import importlib
        return importlib.import_module("ember." + name)
    if name == "ScriptModule":
        return jit.ScriptModule
    if name == "PyTorchFileReader":  # torch._C's checkpoint record reader, under torch too
        from ember._C._serialization import PyTorchFileReader
        return PyTorchFileReader
    # a PyTorch program asking for something ember lacks gets a message saying so
    from ember.compat import missing_attribute
    raise missing_attribute(__name__, name)
from ember import signal
from ember._spectral import istft, stft
from ember.signal.windows import (
    bartlett_window,
    blackman_window,
    hamming_window,
    hann_window,
    kaiser_window,
)
from ember import func  # torch.func transforms
from ember.func import vmap  # torch.vmap
from ember.nn._aten_ops import *  # torch.dropout, torch.batch_norm, torch.lstm ... (ATen's forms)
import ember._tensor_methods  # Tensor.gcd, .renorm_, .dim_order, ... (bindings)
from ember._tensor_methods import *  # torch.gcd_, torch.adjoint, removed torch.solve/eig ...
from ember._runtime_api import *  # flags, autocast/determinism settings, dlpack, range ...
from ember import cpu, storage  # torch.cpu, torch.storage
from ember.sparse._mm import *  # torch.smm, hsmm, sspaddmm ...; sparse in-place resizes
from ember.ops._views import as_strided  # torch.as_strided
from ember.sparse._csr import sparse_csr_tensor, crow_indices_copy, col_indices_copy  # noqa: E402, E501
from ember.sparse import sparse_csr, sparse_csc, sparse_bsr, sparse_bsc  # noqa: E402
from ember.ops import _numpy_names  # noqa: E402

_numpy_names.install()  # axis=/keepdims= for dim=/keepdim=, as torch's argument parser
