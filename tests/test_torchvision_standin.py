"""ember's torchvision stand-in under ``alias_torch()``: the names libraries import from
torchvision exist; FrozenBatchNorm2d computes what BatchNorm2d in eval mode computes (in
torch); the rest raises, naming what is missing."""
import subprocess
import sys

import numpy as np
import pytest
import torch

CHECK = r"""
import numpy as np
import ember.compat
ember.compat.alias_torch()
import torch
import torchvision
from torchvision.transforms.functional import InterpolationMode
from torchvision.datasets import CIFAR10, MNIST, ImageFolder
from torchvision.ops.misc import FrozenBatchNorm2d
import torchvision.transforms as T
import torchvision.models
import torchvision.ops
assert torchvision.__version__.endswith("+ember")
assert T.Compose is ember.transforms.Compose and MNIST is ember.datasets.MNIST
assert InterpolationMode.BOX.value == "box"
for fail, kind in ((lambda: CIFAR10("."), NotImplementedError),
                   (lambda: ImageFolder("."), NotImplementedError),
                   (lambda: T.RandomResizedCrop, AttributeError),
                   (lambda: T.Resize(8, interpolation=InterpolationMode.BICUBIC),
                    NotImplementedError),
                   (lambda: __import__("torchvision.models.feature_extraction"),
                    ModuleNotFoundError),
                   (lambda: torchvision.models.resnet50(), NotImplementedError),
                   (lambda: torchvision.ops.box_iou(None, None), NotImplementedError),
                   (lambda: torchvision.io, AttributeError)):
    try:
        fail()
    except kind as e:
        assert "torchvision" in str(e) or "bicubic" in str(e), e
    else:
        raise AssertionError(kind)
import torchvision.transforms.functional as F
img = np.arange(2 * 5 * 3, dtype=np.uint8).reshape(5, 2, 3)
assert F.get_dimensions(img) == [3, 5, 2] and F.get_image_size(img) == [2, 5]
assert (F.hflip(img) == img[:, ::-1]).all() and (F.crop(img, 1, 0, 2, 2) == img[1:3]).all()
t = F.to_tensor(img)
assert tuple(t.shape) == (3, 5, 2) and F.get_dimensions(t) == [3, 5, 2]
bn = torch.nn.BatchNorm2d(3)
np.savez(OUT, **{k: v.numpy() for k, v in bn.state_dict().items()})
frozen = FrozenBatchNorm2d(3)
state = {k: torch.tensor(v) for k, v in np.load(IN).items()}
frozen.load_state_dict(state)   # num_batches_tracked is dropped, as torchvision does
x = torch.tensor(np.load(X))
np.save(Y, frozen.train()(x).numpy())
print(repr(frozen))
"""


def test_torchvision_standin_names_and_frozen_batchnorm(tmp_path):
    rng = np.random.default_rng(0)
    bn = torch.nn.BatchNorm2d(3).eval()
    with torch.no_grad():
        for t in (bn.weight, bn.bias, bn.running_mean):
            t.copy_(torch.tensor(rng.standard_normal(3)))
        bn.running_var.copy_(torch.tensor(rng.random(3) + 0.5))
    np.savez(tmp_path / "in.npz", **{k: v.numpy() for k, v in bn.state_dict().items()})
    x = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    names = {"OUT": tmp_path / "out.npz", "IN": tmp_path / "in.npz",
             "X": tmp_path / "x.npy", "Y": tmp_path / "y.npy"}
    code = "".join(f"{k} = {str(v)!r}\n" for k, v in names.items()) + CHECK
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "FrozenBatchNorm2d(3, eps=1e-05)"
    with torch.no_grad():
        want = bn(torch.tensor(x)).numpy()
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), want, rtol=1e-6, atol=1e-6)
    assert sorted(np.load(tmp_path / "out.npz")) == sorted(bn.state_dict())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_hardsigmoid_gradient_is_torchs_bit_for_bit(dtype):
    # torch multiplies by 1/6 rounded to float32 in every dtype (timm's MobileNetV3 gates)
    import ember
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(500) * 4).astype(str(dtype).split(".")[1])
    x[:4] = [-3, 3, 0, np.nan]
    g = rng.standard_normal(500).astype(x.dtype)
    got = []
    for m in (torch, ember):
        t = m.tensor(x, requires_grad=True)
        y = m.nn.functional.hardsigmoid(t)
        y.backward(m.tensor(g))
        got.append((y.detach().numpy(), t.grad.numpy()))
    for a, b in zip(*got):
        np.testing.assert_array_equal(b, a)
