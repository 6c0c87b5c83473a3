"""Files of TensorBoard's embedding projector: ``tensors.tsv``, ``metadata.tsv``,
``sprite.png`` per embedding, and ``projector_config.pbtxt`` listing them all."""
import io
import math
import os

import numpy as np

from ember.utils._atomic import atomic_write
from ember.utils.tensorboard.summary import _pil, make_grid, make_np


def _write(path, data):
    with atomic_write(path, "wb") as f:
        f.write(data)


def write_tsv(metadata, save_path, metadata_header=None):
    """One label per line, or a header line and tab-separated columns."""
    if not metadata_header:
        lines = [str(x) for x in metadata]
    else:
        if len(metadata_header) != len(metadata[0]):
            raise AssertionError("len of header must be equal to the number of columns in "
                                 "metadata")
        lines = ["\t".join(str(e) for e in row) for row in [metadata_header] + list(metadata)]
    _write(os.path.join(save_path, "metadata.tsv"), ("\n".join(lines) + "\n").encode())


def write_sprite(label_img, save_path):
    """All label images tiled into one square PNG, as the projector expects."""
    imgs = make_np(label_img)
    nrow = math.ceil(imgs.shape[0] ** 0.5)
    chw = make_grid(imgs, ncols=nrow)
    square = np.zeros((chw.shape[2], chw.shape[2], 3))
    square[:chw.shape[1]] = chw.transpose(1, 2, 0)
    buf = io.BytesIO()
    _pil().fromarray(np.uint8((square * 255).clip(0, 255))).save(buf, format="PNG")
    _write(os.path.join(save_path, "sprite.png"), buf.getvalue())


def write_mat(mat, save_path):
    """The embedding matrix, one tab-separated row per point."""
    text = "".join("\t".join(str(v) for v in row) + "\n" for row in mat.tolist())
    _write(os.path.join(save_path, "tensors.tsv"), text.encode())


def embedding_info(metadata, label_img, subdir, global_step, tag):
    """The ``EmbeddingInfo`` entry of ``projector_config.pbtxt`` for one embedding."""
    from tensorboard.plugins.projector.projector_config_pb2 import EmbeddingInfo
    info = EmbeddingInfo()
    info.tensor_name = f"{tag}:{str(global_step).zfill(5)}"
    info.tensor_path = os.path.join(subdir, "tensors.tsv")
    if metadata is not None:
        info.metadata_path = os.path.join(subdir, "metadata.tsv")
    if label_img is not None:
        shape = make_np(label_img).shape
        info.sprite.image_path = os.path.join(subdir, "sprite.png")
        info.sprite.single_image_dim.extend([shape[3], shape[2]])
    return info


def write_config(logdir, config):
    """``projector_config.pbtxt`` (rewritten whole: the projector reads it as one file)."""
    from google.protobuf import text_format
    _write(os.path.join(logdir, "projector_config.pbtxt"),
           text_format.MessageToString(config).encode())
