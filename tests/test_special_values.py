"""The special-value sweep (``special_values.py``) as a test: every OpInfo op outside
linear algebra, on inputs holding NaN, +-inf, -0.0, subnormals and the largest finite
values, gives torch's class of result (NaN, +-inf, +-0, finite) element by element,
forward and first gradient — or is listed here.

``TORCH_WRONG`` holds the ops where ember keeps the mathematically right value on
purpose (docs/differences.md says why). ``OPEN`` holds differences not fixed yet, with
the first element that differs; the goal is an empty dict. Both are exact: an op that
starts to agree must leave its list, so the lists only shrink.
"""
import pytest
import torch
from special_values import LAPACK, check
from test_opinfo import PRESENT, _key

TORCH_WRONG = {
    'as_strided_scatter':
        "the input's gradient is 0 where src overwrites it; torch's passes it there only",
    'copysign':
        "copysign's gradient at +-inf is the sign it applies; torch's result / input is NaN",
    'digamma':
        "its gradient, trigamma, is +inf at -1, -2, ..., -max; torch's gives 6.6e32/NaN there",
    'frexp':
        "the mantissa's gradient is 2**-e; torch forms 2**e in float32 (inf/0 past 2**+-127)",
    'logit':
        "logit's gradient is NaN at NaN, 1/(x(1-x)) at -0; torch's SIMD loop and tail disagree",
    'nn.functional.gelu':
        "gelu(+inf) is +inf (x * Phi(x) tends to x); torch's kernel gives NaN",
    'nn.functional.hardswish':
        "hardswish(x) is x above 3; torch's x * 6 / 6 overflows to inf above max/6",
    'native_group_norm':
        "the mean of a group holding +max and -max is finite; torch's float32 sum overflows",
    'nn.functional.instance_norm':
        "the gradient of the summed output is exactly 0; torch's rounding leaves 1e-17",
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
}
# torch's softmax kernel has its own vectorised exp (not the libm exp NumPy and torch.exp
# share), so its values differ from ember's in the last bit; where its slice happens to
# sum to exactly 1 the gradient of the sum, y * (1 - sum(y)), is an exact -0 and
# ember's is a rounding residue (1e-17)
OPEN = {
    # finite frames holding +-max whose butterflies overflow: torch's FFT adds in
    # another order than NumPy's pocketfft, so other bins become infinite
    'stft': 'forward (float64, finite frame of +-max): ember -inf, torch x',
}

if torch.backends.cpu.get_cpu_capability() == "AVX512":
    # (on AVX2 machines torch's softmax rounds as ember's does, and these agree)
    OPEN.update({
        'nn.functional.softmin': 'gradient: ember x (-1.7e-17), torch -0',
        'nn.functional.softmin.with_dtype': 'gradient: ember x (-1.7e-17), torch -0',
    })
else:
    # rows whose products overflow to both +inf and -inf: torch's AVX2 kernels (MKL's
    # sgemm for mm, those of its convolutions) keep them in separate partial sums, whose
    # total is NaN; OpenBLAS (ember's) reaches one of them first and stays infinite.
    # Only the order of a sum that overflows differs (docs/differences.md)
    OPEN.update({
        'mm': 'forward (float32, row of +-max products): ember -inf, torch NaN',
        'nn.functional.conv2d': 'forward (float32, +-max products): ember +inf, torch NaN',
        'nn.functional.conv_transpose3d':
            'forward (float64, +-max products): ember -inf, torch NaN',
    })

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
    if key in TORCH_WRONG or key in OPEN:
        assert diff, f"{key} now agrees with torch: remove it from the lists"
    else:
        assert diff is None, diff


def test_lists_name_live_ops():
    keys = {_key(op) for op in OPS}
    assert set(TORCH_WRONG) <= keys and set(OPEN) <= keys
    assert not set(TORCH_WRONG) & set(OPEN)
