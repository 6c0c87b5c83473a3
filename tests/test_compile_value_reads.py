"""Value reads inside ember's own code under ``ember.compile``: a number, branch or size
that an ember function computes from a tensor's values outside the recorded ops must not
be replayed from the example for other values. Each case compiles a function at one
value, calls it at a value that takes the other branch (or another size or constant)
and compares with eager ember; a check that PyTorch makes at run time still raises on
the compiled call. See docs/differences.md ("Value reads in ember's own code under
compile (thirteenth pass)") and docs/compile.md ("Graph breaks")."""
import sys
import warnings
from pathlib import Path

import pytest

import ember
import ember.nn.functional as F
from ember._compile import Unsupported

T = ember.tensor


def _same_as_eager(fn, first, second):
    """Compile ``fn``, call it twice at ``first`` (the capture and a replay), then at
    ``second``: its result there is eager ember's."""
    compiled = ember.compile(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled(*first)
        compiled(*first)
        got = compiled(*second)
    want = fn(*second)
    assert got.shape == want.shape
    assert ember.equal(got, want) or ember.allclose(got, want, equal_nan=True), (got, want)


# ----- quantiles: the ranks read are computed from q's values and the NaNs --------------
def test_quantile_tensor_q_follows_each_call():
    """The graph captured at q=0.3 read the ranks at 0.3 for q=0.7 (another order
    statistic)."""
    x = ember.randn(7)
    _same_as_eager(lambda x, q: ember.quantile(x, q), (x, T(0.3)), (x, T(0.7)))


def test_quantile_vector_q_nearest_follows_each_call():
    x = ember.randn(5, 3)
    _same_as_eager(lambda x, q: ember.quantile(x, q, dim=0, interpolation="nearest"),
                   (x, T([0.3, 0.9])), (x, T([0.7, 0.1])))


def test_quantile_nan_in_a_later_input_gives_nan():
    """Captured without a NaN, the replay interpolated over a NaN-containing input as
    if it had none."""
    _same_as_eager(lambda x: ember.quantile(x, 0.5), (T([1.0, 2.0, 3.0]),),
                   (T([1.0, float("nan"), 3.0]),))


def test_nanquantile_follows_the_count_of_nans():
    """Captured with one NaN (two values left), the replay took the median of two."""
    _same_as_eager(lambda x: ember.nanquantile(x, 0.5), (T([1.0, float("nan"), 3.0]),),
                   (T([1.0, 2.0, 3.0]),))


def test_quantile_stays_one_graph_and_differentiates():
    x = ember.randn(6, requires_grad=True)
    q = T(0.3, requires_grad=True)
    compiled = ember.compile(lambda x, q: ember.quantile(x * 2, q).sum(), fullgraph=True)
    compiled(x, q).backward()
    gx, gq = x.grad, q.grad
    x.grad = q.grad = None
    ember.quantile(x * 2, q).sum().backward()
    assert ember.equal(gx, x.grad) and ember.allclose(gq, q.grad)


# ----- a 0-d tensor passed where a number goes ------------------------------------------
def test_pad_tensor_value_follows_each_call():
    """``F.pad(x, p, value=t)``: the fill was the first call's value on every replay."""
    x = ember.randn(3)
    _same_as_eager(lambda x, v: F.pad(x, (1, 1), value=v), (x, T(2.0)), (x, T(5.0)))


def test_gradient_tensor_spacing_follows_each_call():
    x = T([1.0, 2.0, 4.0])
    _same_as_eager(lambda x, s: ember.gradient(x, spacing=s)[0], (x, T(2.0)), (x, T(3.0)))


def test_tensordot_tensor_dims_follow_each_call():
    """Captured at dims=1 (a matrix product), the replay at dims=2 returned a matrix
    instead of the full contraction."""
    x = ember.randn(2, 2)
    _same_as_eager(lambda x, d: ember.tensordot(x, x, dims=d), (x, T(1)), (x, T(2)))


_NUMBER_ARGS = {
    "select": (lambda x, v: x.select(0, v), ember.randn(6), T(3), T(2)),
    "split": (lambda x, v: x.split(v)[0], ember.randn(6), T(3), T(2)),
    "tril": (lambda x, v: x.tril(v), ember.randn(3, 3), T(0), T(1)),
    "diagonal": (lambda x, v: x.diagonal(v), ember.randn(3, 3), T(0), T(1)),
    "cumsum": (lambda x, v: x.cumsum(v), ember.randn(3, 3), T(0), T(1)),
    "repeat": (lambda x, v: x.repeat(v), ember.randn(2), T(2), T(3)),
    "vector_norm": (lambda x, v: ember.linalg.vector_norm(x, v), ember.randn(3), T(1.0),
                    T(3.0)),
    "dist": (lambda x, v: ember.dist(x, x * 0, v), ember.randn(3), T(1.0), T(3.0)),
    "normalize": (lambda x, v: F.normalize(x, v, dim=0), ember.randn(3), T(1.0), T(2.0)),
    "pairwise_distance": (lambda x, v: F.pairwise_distance(x, x * 0, p=v),
                          ember.randn(3, 2), T(1.0), T(3.0)),
    "margin_ranking_loss": (lambda x, v: F.margin_ranking_loss(x, x * 0, ember.ones(3),
                                                                margin=v),
                            ember.randn(3), T(0.5), T(2.0)),
    "linspace": (lambda x, v: ember.linspace(0, v, 3) + x, ember.randn(3), T(2.0), T(3.0)),
}


@pytest.mark.parametrize("name", sorted(_NUMBER_ARGS))
def test_zero_dim_tensor_as_a_number_follows_each_call(name):
    """A 0-d tensor given as a dim, size, order or margin becomes a Python number inside
    ember (``__index__``/``__float__``): the graph replayed the first call's number."""
    fn, x, first, second = _NUMBER_ARGS[name]
    _same_as_eager(fn, (x, first), (x, second))


def test_value_read_in_ember_code_is_a_named_graph_break():
    compiled = ember.compile(lambda x, v: x.select(0, v), fullgraph=True)
    with pytest.raises(Unsupported, match=r"select\(\) read the values of the traced "
                                          r"tensor .* \(index\)"):
        compiled(ember.randn(4), T(1))


# ----- checks PyTorch makes at run time -------------------------------------------------
def test_binary_cross_entropy_checks_every_compiled_call():
    """The range check ran at the capture only: a replay at 2.0 returned NaN."""
    compiled = ember.compile(lambda x, t: F.binary_cross_entropy(x, t))
    t = ember.rand(3)
    compiled(ember.rand(3), t)
    compiled(ember.rand(3), t)
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        compiled(T([0.5, 2.0, 0.1]), t)
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        compiled(T([0.5, float("nan"), 0.1]), t)


def test_binary_cross_entropy_checks_every_traced_call():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its TorchScript text has no BCE row: not used here
        traced = ember.jit.trace(lambda x, t: F.binary_cross_entropy(x, t),
                                 (ember.rand(3), ember.rand(3)))
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        traced(T([0.5, 2.0, 0.1]), ember.rand(3))


def test_gaussian_nll_loss_checks_every_compiled_call():
    """``var < 0`` was checked at the capture only: a replay clamped the negative entry
    at ``eps`` and returned a loss."""
    compiled = ember.compile(lambda x, t, v: F.gaussian_nll_loss(x, t, v))
    x, t = ember.randn(3), ember.randn(3)
    compiled(x, t, ember.rand(3))
    compiled(x, t, ember.rand(3))
    with pytest.raises(ValueError, match="var has negative"):
        compiled(x, t, T([1.0, -1.0, 1.0]))


def test_multi_margin_loss_checks_every_compiled_call():
    """Its target range check ran at the capture only (a replay raised NumPy's
    IndexError, or read a wrapped column for a negative class)."""
    compiled = ember.compile(lambda x, t: F.multi_margin_loss(x, t), fullgraph=True)
    x = ember.randn(3, 4)
    compiled(x, T([0, 1, 2]))
    compiled(x, T([0, 1, 2]))
    for bad in ([0, 1, 7], [0, -1, 2]):
        with pytest.raises(RuntimeError, match="target out of range"):
            compiled(x, T(bad))


_SINGULAR = [[1.0, 2.0], [2.0, 4.0]]


@pytest.mark.parametrize("name", ["lu_factor", "lu_factor_ex", "lu"])
def test_lu_singular_check_runs_every_compiled_call(name):
    """The zero-pivot check read ``info``'s values at the capture only: a replay at a
    singular matrix returned its factors where eager raises."""
    fn = {"lu_factor": lambda a: ember.linalg.lu_factor(a)[0],
          "lu_factor_ex": lambda a: ember.linalg.lu_factor_ex(a, check_errors=True)[0],
          "lu": lambda a: ember.lu(a)[0]}[name]
    compiled = ember.compile(fn, fullgraph=True)
    a = ember.randn(2, 2, dtype=ember.float64)
    compiled(a)
    assert ember.equal(compiled(a), fn(a))
    with pytest.raises(RuntimeError, match="lu_factor"):
        compiled(T(_SINGULAR, dtype=ember.float64))


def test_lu_factor_compiled_gradient_is_eager():
    a = ember.randn(3, 3, dtype=ember.float64, requires_grad=True)
    compiled = ember.compile(lambda a: ember.linalg.lu_factor(a)[0].sum(), fullgraph=True)
    compiled(a).backward()
    g, a.grad = a.grad, None
    ember.linalg.lu_factor(a)[0].sum().backward()
    assert ember.allclose(g, a.grad)


# ----- the benchmark workloads keep whole graphs ----------------------------------------
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))


@pytest.mark.parametrize("workload", ["mlp", "cnn", "lstm", "rnncell", "transformer"])
def test_benchmark_training_steps_stay_one_graph(workload):
    import compile_step
    model, opt, x, loss_of = getattr(compile_step, workload)(ember)

    def step():
        opt.zero_grad()
        loss = loss_of(model(x))
        loss.backward()
        opt.step()
        return loss
    compiled = ember.compile(step, fullgraph=True)  # a graph break raises
    compiled()
    compiled()
