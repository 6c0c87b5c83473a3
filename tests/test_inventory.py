"""tools/inventory.py: the coverage of torch's public names must not fall."""
import importlib.util
import pathlib

import pytest

_PATH = pathlib.Path(__file__).resolve().parents[1] / "tools" / "inventory.py"

# the level reached on this branch; a change that loses torch names fails here
MIN_OVERALL = 0.9888  # 2048 / 2071


@pytest.fixture(scope="module")
def inventory():
    spec = importlib.util.spec_from_file_location("ember_inventory", _PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def rows(inventory):
    return inventory.coverage()


def test_overall_coverage_does_not_fall(inventory, rows):
    have, total = inventory.overall(rows)
    assert total > 1500  # the namespaces were found and counted
    assert have / total >= MIN_OVERALL, f"coverage {have}/{total} = {have / total:.3f}"


def test_every_exclusion_has_a_reason(rows):
    for r in rows:
        for name, why in r["excluded"].items():
            assert why and len(why) > 20, (r["namespace"], name)
        assert not set(r["excluded"]) & set(r["counted"])


def test_known_names_are_classified(inventory):
    assert inventory.excluded_reason("torch", "cudnn_convolution")
    assert inventory.excluded_reason("torch", "quantize_per_tensor")
    assert inventory.excluded_reason("torch", "sparse_csc_tensor")
    assert inventory.excluded_reason("torch", "sparse_csr_tensor") is None  # ember has CSR
    assert inventory.excluded_reason("torch", "uint8") is None  # real dtypes count
    assert inventory.excluded_reason("torch", "add") is None


def test_not_applicable_names_raise(inventory):
    import ember
    for (path, name), why in inventory.NOT_APPLICABLE.items():
        assert why
        ns = inventory._resolve(ember, path)
        assert hasattr(ns, name), (path, name)
        fn = getattr(ember.ones(1), name) if path == "torch.Tensor" else getattr(ns, name)
        with pytest.raises(NotImplementedError, match=name):
            fn()


def test_main_prints_the_table(inventory, capsys):
    inventory.main(["--missing"])
    out = capsys.readouterr().out
    assert "primitives (forward + derivative):" in out
    assert "overall" in out and "torch.nn.functional" in out
