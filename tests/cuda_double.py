"""The CuPy test double (tests/fake_cupy) as a pytest fixture for ember's ``cuda`` device."""
import os
import sys

import pytest

from ember import backend

FAKE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_cupy")


@pytest.fixture
def cupy(monkeypatch):
    """The CuPy double as ``cupy``, loaded afresh; ember's backend forgets it afterwards."""
    for k in [k for k in sys.modules if k == "cupy" or k.startswith("cupy.")]:
        monkeypatch.delitem(sys.modules, k)
    monkeypatch.syspath_prepend(FAKE)
    monkeypatch.setattr(backend, "_cupy", [None])
    import cupy as cp
    assert cp.FAKE
    yield cp
    for k in [k for k in sys.modules if k == "cupy" or k.startswith("cupy.")]:
        del sys.modules[k]
