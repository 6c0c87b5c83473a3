"""``ember.utils.tensorboard`` (``torch.utils.tensorboard``): ``SummaryWriter`` writing
TensorBoard event files. Needs the optional ``tensorboard`` package
(``pip install -e '.[tensorboard]'``); ``import ember`` alone never imports it."""
try:
    import tensorboard  # noqa: F401
except ImportError:
    raise ImportError("ember.utils.tensorboard needs the tensorboard package: "
                      "pip install -e '.[tensorboard]'") from None

from ember.utils.tensorboard.writer import FileWriter, SummaryWriter

__all__ = ["FileWriter", "SummaryWriter"]
