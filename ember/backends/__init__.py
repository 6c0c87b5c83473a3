"""``torch.backends``-style flags. ember has one CPU backend (NumPy) and CuPy for cuda,
so these flags are accepted and recorded; none of them changes ember's numerics."""
import contextlib
import sys
import types

__all__ = ["cudnn", "cuda", "mps", "mkldnn", "openmp", "opt_einsum", "mha"]


def _flags(name, available, **flags):
    mod = types.ModuleType(f"ember.backends.{name}")
    mod.is_available = lambda: available
    for k, v in flags.items():
        setattr(mod, k, v)
    sys.modules[mod.__name__] = mod  # so that ``import ember.backends.cudnn`` finds it
    return mod


cudnn = _flags("cudnn", False, enabled=True, benchmark=False, deterministic=False,
               allow_tf32=True, benchmark_limit=None, version=lambda: None)


@contextlib.contextmanager
def _cudnn_flags(enabled=False, benchmark=False, benchmark_limit=10, deterministic=False,
                 allow_tf32=True, fp32_precision="none", depthwise_kernel="auto"):
    """``torch.backends.cudnn.flags``: set the recorded cudnn flags for a block (every
    one of them, to the values given or these defaults, as torch does) and put the
    previous values back after it."""
    names = ("enabled", "benchmark", "deterministic", "allow_tf32")
    saved = {k: getattr(cudnn, k) for k in names}
    for k, v in zip(names, (enabled, benchmark, deterministic, allow_tf32)):
        setattr(cudnn, k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(cudnn, k, v)


cudnn.flags = _cudnn_flags
mps = _flags("mps", False, is_built=lambda: False)
mkldnn = _flags("mkldnn", False, enabled=False)
openmp = _flags("openmp", False)
opt_einsum = _flags("opt_einsum", False, enabled=False, strategy=None)
cuda = _flags("cuda", False, is_built=lambda: False)
cuda.matmul = types.SimpleNamespace(allow_tf32=False, allow_fp16_reduced_precision_reduction=True,
                                    allow_bf16_reduced_precision_reduction=True)
cuda.enable_flash_sdp = cuda.enable_mem_efficient_sdp = cuda.enable_math_sdp = \
    lambda enabled=True: None

# torch.backends.mha: whether nn.MultiheadAttention / TransformerEncoder take PyTorch's fused
# inference path; ember follows its numbers (NaN rows, zeroed padding) when enabled
mha = _flags("mha", True)
mha._fastpath_enabled = True
mha.get_fastpath_enabled = lambda: mha._fastpath_enabled
mha.set_fastpath_enabled = lambda value: setattr(mha, "_fastpath_enabled", bool(value))
