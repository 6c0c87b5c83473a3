"""``torch.utils.model_zoo``: ``load_url``, torch's older name for
``hub.load_state_dict_from_url`` (offline in ember: see ``ember.hub``)."""
from ember.hub import load_state_dict_from_url as load_url  # noqa: F401

__all__ = ["load_url"]
