"""``out=`` across dtypes as torch (the sweep in ``out_casting.py``): every OpInfo op
that takes ``out=``, with ``out`` of each of 8 dtypes and of a wrong nonzero shape,
accepts where torch accepts (torch's values, the resize warning where torch gives it)
and refuses where torch refuses (the same exception type; torch's "can't be cast"
wording for a cast to a lower category).

``NO_OUT`` lists the ops ember gives no ``out=`` parameter (they raise ``TypeError``
naming it); ``KNOWN`` the remaining differences with their reason. Both are exact: an op
that starts to agree must leave them.
"""
import pytest
from out_casting import OPS, cases, differs
from test_opinfo import SIGN_FREE, _key

NO_OUT = set()
KNOWN = {
    "all": "torch also takes a uint8 out (its legacy byte-mask result); ember wants bool",
    "any": "torch also takes a uint8 out (its legacy byte-mask result); ember wants bool",
    "nanmean": "torch's nansum kernel has no complex out; ember casts the real result",
    "nansum": "torch's nansum kernel has no complex out; ember casts the real result",
}


@pytest.mark.parametrize("op", OPS, ids=_key)
def test_out_dtypes_and_shapes_as_torch(op):
    key = _key(op)
    found = []
    for label, ref, mine in cases(op):
        d = differs(mine, ref, op.name not in SIGN_FREE)
        if d:
            found.append(f"{label}: {d}")
    if key in NO_OUT:
        assert found and all("unexpected keyword argument 'out'" in f for f in found), found
    elif key in KNOWN:
        assert found, f"{key} agrees with torch now: drop it from KNOWN"
    else:
        assert not found, "\n".join(found)


def test_lists_name_live_ops():
    keys = {_key(op) for op in OPS}
    assert NO_OUT <= keys and set(KNOWN) <= keys and not NO_OUT & set(KNOWN)
