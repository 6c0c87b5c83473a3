"""``torch.testing``: ``assert_close`` with PyTorch's default tolerances and mismatch
report, and ``make_tensor`` (seeded like PyTorch, so the same seed gives the same values).
"""
from ember.testing._comparison import assert_allclose, assert_close
from ember.testing._creation import make_tensor

__all__ = ["assert_close", "assert_allclose", "make_tensor"]
from ember.testing._filecheck import FileCheck  # noqa: E402

__all__ += ["FileCheck"]
