"""torch.testing.FileCheck: the same checks pass and fail as with torch's."""
import pytest
import torch.testing

import ember.testing

TEXT = """graph(%x):
  %1 = aten::mul(%x, %x)
  %2 = aten::add(%1, %x)
  %3 = aten::add(%2, %1)
  return (%3)
"""

CASES = [
    lambda F: F().check("aten::mul").check("aten::add"),
    lambda F: F().check("aten::add").check("aten::mul"),
    lambda F: F().check("aten::mul").check_next("aten::add"),
    lambda F: F().check("aten::mul").check_next("return"),
    lambda F: F().check("%1 = ").check_same("aten::mul"),
    lambda F: F().check("%1 = ").check_same("aten::add"),
    lambda F: F().check("graph").check_not("aten::sub").check("return"),
    lambda F: F().check("graph").check_not("aten::add").check("return"),
    lambda F: F().check_count("aten::add", 2),
    lambda F: F().check_count("aten::add", 3),
    lambda F: F().check_count("aten::add", 1, exactly=True),
    lambda F: F().check_count("aten::add", 2, exactly=True),
    lambda F: F().check_count("aten::sub", 0),
    lambda F: F().check_count("aten::sub", 0, exactly=True),
    lambda F: F().check_count("aten::mul", 0, exactly=True),
    lambda F: F().check_dag("aten::add").check_dag("aten::mul").check("return"),
    lambda F: F().check_dag("aten::sub").check("return"),
    lambda F: F().check_regex(r"%\d = aten::mul").check("return"),
    lambda F: F().check_regex(r"aten::div"),
    lambda F: F().check("return").check_not("aten"),
    lambda F: F().check("aten::mul").check_not("aten::add"),
]


@pytest.mark.parametrize("i", range(len(CASES)))
def test_filecheck_like_torch(i):
    def outcome(F):
        try:
            CASES[i](F).run(TEXT)
            return "pass"
        except RuntimeError:
            return "fail"
    assert outcome(ember.testing.FileCheck) == outcome(torch.testing.FileCheck)
