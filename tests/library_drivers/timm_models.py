"""timm's documented basic use: models built with ``timm.create_model(...,
pretrained=False)`` at small sizes (a ResNet, a ViT, a ConvNeXt, an EfficientNet, a
MobileNetV3), each seeded and initialised by timm itself, then forward, backward,
two optimizer steps from timm's optimizer factory, evaluation, a ``state_dict`` round
trip and ``freeze_batch_norm_2d``; the numbers go to the .npz file named on the command
line.

timm imports names from torchvision at import time; on torch this driver puts in
placeholders for them (torchvision_placeholders.py); under ``python -m ember run``,
``import torchvision`` is ember's stand-in."""
import io
import sys
import time

import numpy as np
import torch
import torchvision_placeholders

torchvision_placeholders.install()
import timm  # noqa: E402
from timm.optim import create_optimizer_v2  # noqa: E402
from timm.utils.model import freeze_batch_norm_2d  # noqa: E402

MODELS = {
    "resnet": ("resnet18", dict(channels=(8, 16, 24, 32), stem_width=8), 32),
    "vit": ("vit_tiny_patch16_224", dict(img_size=32, patch_size=8, embed_dim=32, depth=2,
                                         num_heads=2), 32),
    "convnext": ("convnext_atto", dict(dims=(8, 16, 24, 32), depths=(1, 1, 1, 1)), 32),
    "efficientnet": ("test_efficientnet", dict(), 32),
    "mobilenet": ("mobilenetv3_small_050", dict(), 32),
}


def flat(tensors):
    return np.concatenate([np.zeros(0)]
                          + [t.detach().numpy().ravel() for t in tensors])


# float64: with a batch of 4, batch norm over 1x1 feature maps amplifies float32 rounding
# (1 ulp) to 1e-3 within two steps, so float32 runs part by rounding alone; in float64
# every number agrees with torch's to 1e-12
torch.set_default_dtype(torch.float64)
rng = np.random.default_rng(0)
out = {}
times = {}
for key, (arch, kwargs, size) in MODELS.items():
    start = time.perf_counter()
    torch.manual_seed(0)
    model = timm.create_model(arch, pretrained=False, num_classes=5, **kwargs)
    names = [n for n, _ in model.named_parameters()]
    out[f"{key}_param_names"] = np.array(names)
    out[f"{key}_init"] = flat(model.parameters())
    x = torch.tensor(rng.standard_normal((4, 3, size, size)), dtype=torch.float64)
    y = torch.tensor(rng.integers(0, 5, 4))
    opt = create_optimizer_v2(model, opt="adamw" if key in ("vit", "convnext") else "sgd",
                              lr=0.01, weight_decay=0.05, momentum=0.9)
    model.train()
    for step in range(2):
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        out[f"{key}_logits{step}"] = logits.detach().numpy()
        out[f"{key}_loss{step}"] = loss.detach().numpy()
        out[f"{key}_grad{step}"] = flat(p.grad for p in model.parameters())
        opt.step()
    out[f"{key}_trained"] = flat(model.parameters())
    out[f"{key}_buffers"] = flat(b for b in model.buffers() if b.is_floating_point())
    model.eval()
    with torch.no_grad():
        out[f"{key}_eval"] = model(x).numpy()
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    torch.manual_seed(1)
    restored = timm.create_model(arch, pretrained=False, num_classes=5, **kwargs).eval()
    restored.load_state_dict(torch.load(buffer))
    with torch.no_grad():
        out[f"{key}_restored_eval"] = restored(x).numpy()
    out[f"{key}_features"] = model.forward_features(x).detach().numpy()
    times[key] = time.perf_counter() - start

# BatchNorm2d layers swapped for torchvision's FrozenBatchNorm2d keep the eval output
frozen = freeze_batch_norm_2d(restored)
out["frozen_types"] = np.array(sorted({type(m).__name__ for m in frozen.modules()}))
with torch.no_grad():
    out["frozen_eval"] = frozen(x).numpy()
    out["frozen_train"] = frozen.train()(x).numpy()  # frozen: the same in training mode
np.savez(sys.argv[1], **out)
print("done", torch.__version__, {k: round(v, 2) for k, v in times.items()})
