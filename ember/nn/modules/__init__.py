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

# Convolution, pooling, normalization, padding and upsampling modules
from ember.nn.modules import conv, normalization, padding, pixelshuffle, pooling, upsampling  # noqa: E402,E501
from ember.nn.modules.conv import *  # noqa: E402,F403
from ember.nn.modules.normalization import *  # noqa: E402,F403
from ember.nn.modules.padding import *  # noqa: E402,F403
from ember.nn.modules.pixelshuffle import *  # noqa: E402,F403
from ember.nn.modules.pooling import *  # noqa: E402,F403
from ember.nn.modules.upsampling import *  # noqa: E402,F403

__all__ += (conv.__all__ + normalization.__all__ + padding.__all__ + pixelshuffle.__all__
            + pooling.__all__ + upsampling.__all__)

# Recurrent layers
from ember.nn.modules import rnn  # noqa: E402
from ember.nn.modules.rnn import *  # noqa: E402,F403

__all__ += rnn.__all__

# Attention and transformer layers
from ember.nn.modules import attention, transformer  # noqa: E402
from ember.nn.modules.attention import *  # noqa: E402,F403
from ember.nn.modules.transformer import *  # noqa: E402,F403

__all__ += attention.__all__ + transformer.__all__

# SyncBatchNorm (batch statistics across processes)
from ember.nn.modules import sync_batchnorm  # noqa: E402
from ember.nn.modules.sync_batchnorm import *  # noqa: E402,F403

__all__ += sync_batchnorm.__all__

# Lazy layers (shapes from the first input)
from ember.nn.modules import lazy  # noqa: E402
from ember.nn.modules.lazy import *  # noqa: E402,F403

__all__ += lazy.__all__

# Fractional max pooling
from ember.nn.modules import fractional_pooling  # noqa: E402
from ember.nn.modules.fractional_pooling import *  # noqa: E402,F403

__all__ += fractional_pooling.__all__

# Adaptive softmax and legacy modules
from ember.nn.modules import adaptive, legacy  # noqa: E402
from ember.nn.modules.adaptive import *  # noqa: E402,F403
from ember.nn.modules.legacy import *  # noqa: E402,F403

__all__ += adaptive.__all__ + legacy.__all__

# torch's module path for the batch norms, reached as an attribute after `import torch`
# (timm checks isinstance against torch.nn.modules.batchnorm.BatchNorm2d)
from ember.nn.modules import batchnorm  # noqa: E402,F401
