"""Kernels that real models hit outside the six training workloads, ember beside torch in
one process (CPU time, interleaved rounds):

    python benchmarks/real_models.py [--only bert,gpt2_build,vit_build,kernels]
                                     [--threads 1] [--layers 2] [--rounds 3] [--no-numba]

``--no-numba`` hides numba from ember (as an install without the ``ember[fast]`` extra).

- ``kernels``: erf, erfc, erfinv, exact GELU (forward; forward and backward) and
  ``normal_`` on 2**20 float32 values; erf and erfinv also in float64.
- ``bert``: a BERT-base-like encoder forward under ``no_grad``: token and position
  embeddings, LayerNorm, ``--layers`` post-norm ``TransformerEncoderLayer(768, 12,
  3072, activation="gelu")`` (exact GELU), batch 8, sequence 128.
- ``gpt2_build``: building a GPT-2-small-sized model from plain nn layers (token
  embedding 50257x768, positions 1024x768, 12 blocks of LayerNorm, Linear 768->2304,
  Linear 768->768, LayerNorm, Linear 768->3072, Linear 3072->768; final LayerNorm), then
  GPT-2's init: ``normal_(0, 0.02)`` on every Linear and Embedding weight, zero biases.
- ``vit_build``: a ViT-S-sized model (Conv2d 3->384 patch embedding 16x16, class token,
  197x384 positions, 12 blocks of LayerNorm, Linear 384->1152, Linear 384->384,
  LayerNorm, Linear 384->1536, Linear 1536->384; head 384->1000) with timm's init:
  its ``trunc_normal_(std=0.02)`` (``uniform_``, ``erfinv_``, scale, clamp).

Each figure is the median CPU time of ``--rounds`` interleaved rounds; the ratio is
ember/torch. The load average is printed with the figures (other processes on the
machine slow both libraries alike in CPU time, not exactly).
"""
import argparse
import math
import os
import sys
import time

if __name__ == "__main__" and "--threads" in sys.argv:
    os.environ["OPENBLAS_NUM_THREADS"] = sys.argv[sys.argv.index("--threads") + 1]

import numpy as np  # noqa: E402


def cpu_ms(fn):
    c = time.process_time()
    fn()
    return (time.process_time() - c) * 1e3


def interleaved(pairs, rounds):
    """{name: (ember ms, torch ms)}: the median CPU time of each over interleaved rounds."""
    times = {name: ([], []) for name in pairs}
    for _ in range(rounds):
        for name, (fe, ft) in pairs.items():
            times[name][0].append(cpu_ms(fe))
            times[name][1].append(cpu_ms(ft))
    return {k: (float(np.median(a)), float(np.median(b))) for k, (a, b) in times.items()}


def kernels(ember, torch):
    x = np.random.default_rng(0).standard_normal(1 << 20).astype(np.float32)
    u = (np.random.default_rng(1).random(1 << 20) * 2 - 1).astype(np.float32)
    xe, xt, ue, ut = ember.from_numpy(x), torch.from_numpy(x), ember.from_numpy(u), \
        torch.from_numpy(u)
    be, bt = ember.empty(1 << 20), torch.empty(1 << 20)
    xd, ud = x.astype(np.float64), u.astype(np.float64)
    xde, xdt, ude, udt = ember.from_numpy(xd), torch.from_numpy(xd), ember.from_numpy(ud), \
        torch.from_numpy(ud)
    ge, gt = ember.from_numpy(x).requires_grad_(), torch.from_numpy(x.copy()).requires_grad_()
    gye, gyt = ember.ones_like(ge), torch.ones_like(gt)

    def gelu_step(m, xg, gy, approximate="none"):
        def step():
            m.nn.functional.gelu(xg, approximate=approximate).backward(gy)
            xg.grad = None
        return step
    return {
        "erf 2^20 f32": (lambda: ember.erf(xe), lambda: torch.erf(xt)),
        "erf 2^20 f64": (lambda: ember.erf(xde), lambda: torch.erf(xdt)),
        "erfinv 2^20 f64": (lambda: ember.erfinv(ude), lambda: torch.erfinv(udt)),
        "gelu fwd+bwd 2^20 f32": (gelu_step(ember, ge, gye), gelu_step(torch, gt, gyt)),
        "erfc 2^20 f32": (lambda: ember.erfc(xe), lambda: torch.erfc(xt)),
        "erfinv 2^20 f32": (lambda: ember.erfinv(ue), lambda: torch.erfinv(ut)),
        "gelu 2^20 f32": (lambda: ember.nn.functional.gelu(xe),
                          lambda: torch.nn.functional.gelu(xt)),
        "gelu tanh 2^20 f32": (lambda: ember.nn.functional.gelu(xe, approximate="tanh"),
                               lambda: torch.nn.functional.gelu(xt, approximate="tanh")),
        "gelu tanh fwd+bwd 2^20 f32": (gelu_step(ember, ge, gye, "tanh"),
                                       gelu_step(torch, gt, gyt, "tanh")),
        "normal_(0, .02) 2^20 f32": (lambda: be.normal_(0, 0.02), lambda: bt.normal_(0, 0.02)),
    }


def bert(m, layers):
    nn = m.nn

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(30522, 768)
            self.pos = nn.Embedding(512, 768)
            self.norm = nn.LayerNorm(768)
            self.layers = nn.ModuleList(
                nn.TransformerEncoderLayer(768, 12, 3072, dropout=0.0, activation="gelu",
                                           batch_first=True) for _ in range(layers))

        def forward(self, ids):
            h = self.norm(self.tok(ids) + self.pos(m.arange(ids.shape[1])))
            for layer in self.layers:
                h = layer(h)
            return h
    m.manual_seed(0)
    model = Encoder().eval()
    ids = m.tensor(np.random.default_rng(0).integers(0, 30522, (8, 128)))

    def forward():
        with m.no_grad():
            return model(ids)
    return forward


def gpt2_build(m):
    nn = m.nn

    def build():
        blocks = nn.ModuleList()
        for _ in range(12):
            blocks.append(nn.ModuleList([nn.LayerNorm(768), nn.Linear(768, 2304),
                                         nn.Linear(768, 768), nn.LayerNorm(768),
                                         nn.Linear(768, 3072), nn.Linear(3072, 768)]))
        model = nn.ModuleDict({"wte": nn.Embedding(50257, 768), "wpe": nn.Embedding(1024, 768),
                               "h": blocks, "ln_f": nn.LayerNorm(768)})
        for mod in model.modules():  # GPT-2's _init_weights
            if isinstance(mod, (nn.Linear, nn.Embedding)):
                mod.weight.data.normal_(mean=0.0, std=0.02)
            if isinstance(mod, nn.Linear):
                mod.bias.data.zero_()
        return model
    return build


def _timm_trunc_normal_(t, std=0.02, a=-2.0, b=2.0):
    # timm.layers.weight_init.trunc_normal_: inverse-CDF sampling through erfinv
    def cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0
    lo, hi = cdf(a / std), cdf(b / std)
    t.uniform_(2 * lo - 1, 2 * hi - 1)
    t.erfinv_()
    t.mul_(std * math.sqrt(2.0))
    t.clamp_(min=a, max=b)
    return t


def vit_build(m):
    nn = m.nn

    def build():
        blocks = nn.ModuleList()
        for _ in range(12):
            blocks.append(nn.ModuleList([nn.LayerNorm(384), nn.Linear(384, 1152),
                                         nn.Linear(384, 384), nn.LayerNorm(384),
                                         nn.Linear(384, 1536), nn.Linear(1536, 384)]))
        model = nn.ModuleDict({"patch": nn.Conv2d(3, 384, 16, 16), "blocks": blocks,
                               "norm": nn.LayerNorm(384), "head": nn.Linear(384, 1000)})
        cls = nn.Parameter(m.zeros(1, 1, 384))
        pos = nn.Parameter(m.zeros(1, 197, 384))
        with m.no_grad():
            _timm_trunc_normal_(pos)
            nn.init.normal_(cls, std=1e-6)
            for mod in model.modules():  # timm's init_weights_vit_timm
                if isinstance(mod, nn.Linear):
                    _timm_trunc_normal_(mod.weight)
                    nn.init.zeros_(mod.bias)
        return model
    return build


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="kernels,bert,gpt2_build,vit_build")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-numba", action="store_true")
    args = ap.parse_args()
    if args.no_numba:
        sys.modules["numba"] = None  # `import numba` raises ImportError: the NumPy paths
    import torch

    import ember
    torch.set_num_threads(args.threads)
    ember.set_num_threads(args.threads)
    only = args.only.split(",")
    pairs = {}
    if "kernels" in only:
        pairs.update(kernels(ember, torch))
    if "bert" in only:
        pairs[f"BERT-like forward ({args.layers} layers, 8x128)"] = (
            bert(ember, args.layers), bert(torch, args.layers))
    if "gpt2_build" in only:
        pairs["GPT-2-small-sized build + init"] = (gpt2_build(ember), gpt2_build(torch))
    if "vit_build" in only:
        pairs["ViT-S-sized build + timm init"] = (vit_build(ember), vit_build(torch))
    for fe, ft in pairs.values():  # warm-up (first calls, caches)
        if "build" not in repr(fe):
            fe(), ft()
    res = interleaved(pairs, args.rounds)
    print(f"CPU ms, median of {args.rounds} interleaved rounds, {args.threads} thread(s)"
          f"{', numba hidden' if args.no_numba else ''}; ember from "
          f"{os.path.dirname(os.path.dirname(ember.__file__))}; "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'case':<44}{'ember':>11}{'torch':>11}{'ratio':>8}")
    for name, (e, t) in res.items():
        print(f"{name:<44}{e:>11.1f}{t:>11.1f}{e / t:>8.2f}")


if __name__ == "__main__":
    main()
