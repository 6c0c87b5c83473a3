"""Small namespaces programs touch at import, legacy types, channel_shuffle, hub."""
import numpy as np
import pytest
import torch

import ember


def test_backends_cudnn_flags_and_distributed_sampler():
    for m in (ember, torch):
        cudnn = m.backends.cudnn
        assert cudnn.enabled is True and cudnn.is_available() is False
        assert hasattr(cudnn, "benchmark") and hasattr(cudnn, "deterministic")
    # (torch refuses to set the flags once its own test helpers are imported, so only
    # ember's are set here)
    cudnn = ember.backends.cudnn
    cudnn.benchmark = cudnn.deterministic = True
    assert cudnn.benchmark and cudnn.deterministic
    cudnn.benchmark = cudnn.deterministic = False
    from ember.utils.data.distributed import DistributedSampler
    e = list(DistributedSampler(range(10), num_replicas=3, rank=1, shuffle=False))
    t = list(torch.utils.data.distributed.DistributedSampler(range(10), num_replicas=3, rank=1,
                                                             shuffle=False))
    assert e == t


@pytest.mark.parametrize("target", ["FloatTensor", "LongTensor", "DoubleTensor", "ByteTensor",
                                    "Tensor"])
def test_tensor_type_with_legacy_class(target):
    res = []
    for m in (ember, torch):
        x = m.tensor([1.7, -2.2, 3.0])
        y = x.type(getattr(m, target))
        res.append((y.type(), y.tolist()))
    assert res[0] == res[1]


def test_cuda_legacy_type_names():
    for m in (ember, torch):
        assert not isinstance(m.ones(2), m.cuda.FloatTensor)
        assert isinstance(m.ones(2), m.FloatTensor)
        assert m.cuda.LongTensor.__name__ == "LongTensor"


@pytest.mark.parametrize("shape,groups", [((2, 6, 3), 3), ((1, 4, 2, 2), 2), ((2, 4, 1, 1, 2), 4)])
def test_channel_shuffle_matches_torch(shape, groups):
    a = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    res = []
    for m in (ember, torch):
        x = m.tensor(a, requires_grad=True)
        y = m.nn.ChannelShuffle(groups)(x)
        y.backward(m.tensor(a * 2))
        res.append((y.detach().numpy(), x.grad.numpy(), repr(m.nn.ChannelShuffle(groups))))
    np.testing.assert_array_equal(res[0][0], res[1][0])
    np.testing.assert_array_equal(res[0][1], res[1][1])
    assert res[0][2] == res[1][2]
    for m in (ember, torch):
        with pytest.raises(RuntimeError, match="Number of channels must be divisible by groups"):
            m.nn.functional.channel_shuffle(m.zeros(1, 5, 2), 2)


def test_hub_is_offline_but_reads_its_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    assert ember.hub.get_dir() == torch.hub.get_dir() == str(tmp_path / "hub")
    with pytest.raises(RuntimeError, match="does not download"):
        ember.hub.load("pytorch/vision", "resnet18")
    url = "https://example.com/weights/lin-1234.pth"
    with pytest.raises(RuntimeError, match="not in the hub cache"):
        ember.hub.load_state_dict_from_url(url)
    (tmp_path / "hub" / "checkpoints").mkdir(parents=True)
    torch.save({"w": torch.ones(2)}, tmp_path / "hub" / "checkpoints" / "lin-1234.pth")
    sd = ember.hub.load_state_dict_from_url(url)
    assert sd["w"].tolist() == [1.0, 1.0]
