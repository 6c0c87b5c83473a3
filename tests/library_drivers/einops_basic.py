"""einops' documented basic use: rearrange/reduce/repeat/einsum/pack forward and
backward, and a model of its layers (Rearrange, EinMix, Reduce) trained for a few Adam
steps; the numbers go to the .npz file named on the command line."""
import sys

import einops
import numpy as np
import torch
from einops import einsum, pack, rearrange, reduce, repeat, unpack
from einops.layers.torch import EinMix, Rearrange, Reduce

rng = np.random.default_rng(0)
out = {}
x = torch.tensor(rng.standard_normal((2, 3, 4, 6)), requires_grad=True)
y = rearrange(x, "b c (h h2) (w w2) -> b (c h2 w2) h w", h2=2, w2=3)
r = reduce(x, "b c (h h2) w -> b c h w", "max", h2=2)
m = reduce(x, "b c h w -> b c", "mean")
p = repeat(x[:, 0], "b h w -> b h w k", k=2)
e = einsum(x, x, "b c h w, b d h w -> b c d")
packed, ps = pack([x[:, 0], x[:, :2].mean(1, keepdim=True).squeeze(1)], "b * w")
a, b = unpack(packed, ps, "b * w")
loss = (y ** 2).sum() + r.sum() + (m * 3).sum() + p.sum() + e.sum() * 0.1 + a.sum() - b.sum()
loss.backward()
for k, v in dict(y=y, r=r, m=m, p=p, e=e, packed=packed, grad=x.grad).items():
    out[k] = v.detach().numpy()
out["ps"] = np.array([list(s) for s in ps])

model = torch.nn.Sequential(
    Rearrange("b (h p1) (w p2) c -> b (h w) (p1 p2 c)", p1=2, p2=2),
    EinMix("b t c -> b t d", weight_shape="c d", bias_shape="d", c=12, d=8),
    torch.nn.GELU(),
    Reduce("b t d -> b d", "mean"),
    torch.nn.Linear(8, 3))
with torch.no_grad():  # the same starting weights on both sides
    for q in model.parameters():
        q.copy_(torch.tensor(rng.standard_normal(tuple(q.shape)) * 0.3, dtype=q.dtype))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
xin = torch.tensor(rng.standard_normal((4, 4, 6, 3)), dtype=torch.float32)
tgt = torch.tensor(rng.integers(0, 3, 4))
for step in range(3):
    step_loss = torch.nn.functional.cross_entropy(model(xin), tgt)
    opt.zero_grad()
    step_loss.backward()
    opt.step()
    out[f"loss{step}"] = step_loss.detach().numpy()
for k, v in model.state_dict().items():
    out["sd_" + k] = v.numpy()
out["repr"] = np.array(repr(model[0]) + repr(model[3]))
np.savez(sys.argv[1], **out)
print("done", einops.__version__, torch.__version__)
