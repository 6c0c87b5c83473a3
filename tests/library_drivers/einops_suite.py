"""einops' own test suite, torch backend, run as a program: ``python einops_suite.py
ember`` serves ``torch`` with ember first (as ``python -m ember run`` does). einops'
tests compare each torch result with NumPy's."""
import os
import sys

if sys.argv[1] == "ember":
    import ember.compat
    ember.compat.alias_torch()
import einops
import pytest

os.environ["EINOPS_TEST_BACKENDS"] = "torch"
tests = os.path.join(os.path.dirname(einops.__file__), "tests")
sys.exit(pytest.main([tests, "-q", "-p", "no:cacheprovider", "--rootdir", tests,
                      "-W", "ignore", *sys.argv[2:]]))
