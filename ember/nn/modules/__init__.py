"""ember.nn.modules: the layer classes (PyTorch's ``torch.nn.modules``)."""

from ember.nn.modules import activation, container, distance, dropout, flatten, linear, loss, sparse
from ember.nn.modules.activation import *  # noqa: F403
from ember.nn.modules.container import *  # noqa: F403
from ember.nn.modules.distance import *  # noqa: F403
from ember.nn.modules.dropout import *  # noqa: F403
from ember.nn.modules.flatten import *  # noqa: F403
from ember.nn.modules.linear import *  # noqa: F403
from ember.nn.modules.loss import *  # noqa: F403
from ember.nn.modules.module import Module
from ember.nn.modules.sparse import *  # noqa: F403

__all__ = (["Module"] + activation.__all__ + container.__all__ + distance.__all__
           + dropout.__all__ + flatten.__all__ + linear.__all__ + loss.__all__ + sparse.__all__)

# ---------------------------------------------------------------------------
# Convolution / pooling / normalization / upsampling modules (owned by the
# conv/pool/norm engineer): add `from ember.nn.modules.<file> import ...` lines
# and extend __all__ below this line.
# ---------------------------------------------------------------------------
