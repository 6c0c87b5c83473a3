"""The special-value sweep (``special_values.py``) as a test: every OpInfo op outside
linear algebra, on inputs holding NaN, +-inf, -0.0, subnormals and the largest finite
values, gives torch's class of result (NaN, +-inf, +-0, finite) element by element,
forward and first gradient — or is listed here.

``TORCH_WRONG`` holds the ops where ember keeps the mathematically right value on
purpose (docs/differences.md says why). ``OPEN`` holds differences not fixed yet, with
the first element that differs; the goal is an empty dict. Both are exact: an op that
starts to agree must leave its list, so the lists only shrink. ``CPU_ORDER`` holds the
ops where the order of a sum that overflows follows the CPU's kernels: they may agree,
or differ only in which infinity or NaN that sum gives.
"""
import pytest
import torch
from special_values import LAPACK, check
from test_opinfo import PRESENT, _key

TORCH_WRONG = {
    '__rmod__':
        "y % x is exact and finite for finite y, x != 0; torch's vector loop divides first: NaN",
    'as_strided_scatter':
        "the input's gradient is 0 where src overwrites it; torch's passes it there only",
    'copysign':
        "copysign's gradient at +-inf is the sign it applies; torch's result / input is NaN",
    'digamma':
        "its gradient, trigamma, is +inf at -1, -2, ..., -max; torch's gives 6.6e32/NaN there",
    'fmod':
        "fmod(x, y) is exact and finite for finite x, y != 0; torch's vector loop divides: NaN",
    'frexp':
        "the mantissa's gradient is 2**-e; torch forms 2**e in float32 (inf/0 past 2**+-127)",
    'igamma':
        "P(a, x) for a = max, x = 4.55 is 0 (as scipy's); torch's series gives NaN",
    'igammac':
        "Q(a, x) for a subnormal a is about a * E1(x), 5.7e-42 (as scipy's); torch's is 0",
    'logit':
        "logit's gradient is NaN at NaN, 1/(x(1-x)) at -0; torch's SIMD loop and tail disagree",
    'nn.functional.celu':
        "the gradient at NaN is NaN, as torch's vector loop gives; its scalar tail gives 1",
    'nn.functional.elu':
        "the gradient at NaN is NaN, as torch's vector loop gives; its scalar tail gives 1",
    'nn.functional.gelu':
        "gelu(+inf) is +inf (x * Phi(x) tends to x); torch's kernel gives NaN",
    'nn.functional.hardtanh':
        "the gradient at NaN is 0, as torch's vector loop gives; its scalar tail gives 1",
    'nn.functional.hardswish':
        "hardswish(x) is x above 3; torch's x * 6 / 6 overflows to inf above max/6",
    'native_group_norm':
        "a group whose variance overflows is normalized exactly (finite), and the mean of a "
        "group holding +max and -max is finite; torch's float32 moments overflow to NaN",
    'nn.functional.group_norm':
        "a group whose variance overflows is normalized exactly (finite); torch's Welford "
        "moments give NaN or the bias alone, by the row's length and SIMD lanes",
    'nn.functional.instance_norm':
        "the gradient of the summed output is exactly 0; torch's rounding leaves 1e-17",
    'nn.functional.relu6':
        "the gradient at NaN is 0, as torch's vector loop gives; its scalar tail gives 1",
    'nn.functional.selu':
        "the gradient at NaN is NaN, as torch's vector loop gives; its scalar tail gives 1.05",
    'nn.functional.softshrink':
        "the gradient at NaN is 0, as torch's vector loop gives; its scalar tail gives 1",
    'polygamma.polygamma_n_0':
        "trigamma is +inf at the poles -1, -2, ..., -max; torch's reflection gives 6.6e32/NaN",
    'polygamma.polygamma_n_1':
        "trigamma is +inf at the poles -1, -2, ..., -max; torch's reflection gives 6.6e32/NaN",
    'polygamma.polygamma_n_2':
        "trigamma is +inf at the poles -1, -2, ..., -max; torch's reflection gives 6.6e32/NaN",
    'polygamma.polygamma_n_3':
        "trigamma is +inf at the poles -1, -2, ..., -max; torch's reflection gives 6.6e32/NaN",
    'polygamma.polygamma_n_4':
        "trigamma is +inf at the poles -1, -2, ..., -max; torch's reflection gives 6.6e32/NaN",
    'remainder':
        "x mod y is exact and finite for finite x, y != 0; torch's vector loop divides: NaN",
}
# torch's softmax kernel has its own vectorised exp (not the libm exp NumPy and torch.exp
# share), so its values differ from ember's in the last bit; where its slice happens to
# sum to exactly 1 the gradient of the sum, y * (1 - sum(y)), is an exact -0 and
# ember's is a rounding residue (1e-17), or the reverse
_SOFTMAX_RESIDUE = 'gradient of the summed output: ember +-0, torch x (1e-17), or the reverse'
OPEN = {
    # finite frames holding +-max whose butterflies overflow: torch's FFT adds in
    # another order than NumPy's pocketfft, so other bins become infinite
    'stft': 'forward (float64, finite frame of +-max): ember -inf, torch x',
    'softmax': _SOFTMAX_RESIDUE,
    'softmax.with_dtype': _SOFTMAX_RESIDUE,
    'nn.functional.softmin': _SOFTMAX_RESIDUE,
    'nn.functional.softmin.with_dtype': _SOFTMAX_RESIDUE,
    'masked.softmax': _SOFTMAX_RESIDUE,
    'masked.softmin': _SOFTMAX_RESIDUE,
    # the gradient of the summed output of x / ||x||_p is 0: both sides leave rounding
    # residues (2e-16), at other elements (torch's pow and sum round otherwise)
    'nn.functional.normalize': 'gradient (float64, p=0.5): ember +0, torch x (8.9e-16)',
    # a row holding +max and -max that cancel: torch's mean adds one by one, NumPy's
    # pairwise sum in another order, so what is left of the finite rest differs
    'nn.functional.adaptive_avg_pool1d': 'forward (float32, +-max cancel): ember +0, torch x',
}

# rows whose products overflow to both +inf and -inf: torch's kernels (MKL's sgemm for mm,
# those of its convolutions, embedding_bag's weighted sums) keep them in separate partial
# sums, whose total is NaN, or fuse a multiply into an infinite sum (FMA: inf, where a
# rounded product would make it NaN); OpenBLAS (ember's) reaches one of them first and
# stays infinite. Only the order of a sum that overflows differs, and that order follows
# the CPU's kernels (AVX2 or AVX-512, and which AVX-512 machine): on some CPUs the two
# agree. Each may differ only in that way (docs/differences.md)
CPU_ORDER = {
    'mm': 'forward (float32, row of +-max products): ember -inf, torch NaN',
    'matmul': 'forward (float32, row of +-max products): ember -inf, torch NaN',
    '__rmatmul__': 'forward (float64, row of +-max products): ember +inf, torch NaN',
    'nn.functional.conv1d': 'forward (+-max products): ember NaN, torch +inf',
    'nn.functional.conv2d': 'forward (float32, +-max products): ember +inf, torch NaN',
    'nn.functional.conv_transpose3d': 'forward (float64, +-max products): ember -inf, torch NaN',
    'nn.functional.embedding_bag': 'forward (float32, weighted +-max rows): ember NaN, torch +inf',
}

INFINITE = {"nan", "+inf", "-inf"}
OPS = [op for op in PRESENT if not op.name.startswith(LAPACK)]


def _first_difference(op):
    compared = 0
    for dtype in (torch.float32, torch.float64):
        if dtype not in op.supported_dtypes("cpu"):
            continue
        n, diff = check(op, dtype)
        compared += n
        if diff:
            return compared, diff
    return compared, None


@pytest.mark.parametrize("op", OPS, ids=_key)
def test_special_values_as_torch(op):
    key = _key(op)
    try:
        _, diff = _first_difference(op)
    except Exception as err:  # noqa: BLE001 - a harness failure counts as a difference
        diff = f"harness: {type(err).__name__}: {err}"
    if key in CPU_ORDER:  # agrees, or differs only in which infinity or NaN a sum gives
        assert diff is None or (" forward: " in diff and
                                {diff.split(" ember ")[1].split()[0],
                                 diff.split(" torch ")[1].split()[0]} <= INFINITE), diff
    elif key in TORCH_WRONG or key in OPEN:
        assert diff, f"{key} now agrees with torch: remove it from the lists"
    else:
        assert diff is None, diff


def test_lists_name_live_ops():
    keys = {_key(op) for op in OPS}
    assert set(TORCH_WRONG) <= keys and set(OPEN) <= keys and set(CPU_ORDER) <= keys
    assert not set(TORCH_WRONG) & set(OPEN)
    assert not (set(TORCH_WRONG) | set(OPEN)) & set(CPU_ORDER)
