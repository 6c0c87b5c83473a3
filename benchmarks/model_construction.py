"""Building models, ember beside torch in one process (CPU time, interleaved rounds), and
checking that the same seed builds the same weights:

    python benchmarks/model_construction.py [--only gpt2,vit] [--threads 1] [--rounds 3]

- ``gpt2``: a GPT-2-small-sized model from plain nn layers (124M parameters; the layers
  of ``real_models.py``'s ``gpt2_build``) with GPT-2's init, ``normal_(0, 0.02)`` on every
  Linear and Embedding weight and zero biases. Printed in three rows: the whole build,
  the layers alone (their default init: ``kaiming_uniform_`` for Linear, ``normal_(0, 1)``
  for Embedding), and the re-initialisation alone.
- ``vit``: a ViT-S-sized model with timm's ``trunc_normal_(std=0.02)`` init (``uniform_``,
  ``erfinv_``, scale, clamp), as ``real_models.py``'s ``vit_build``.

Each build runs after ``manual_seed(0)`` in both libraries; the script then compares
every parameter: ``normal_``, ``uniform_`` and the init functions reproduce torch's CPU
stream, so the GPT-2 weights are bit-equal (printed as ``same weights``). timm's init
goes through ``erfinv``, whose float32 results are not promised to be torch's bit for
bit, so for the ViT the largest difference is printed instead.
"""
import argparse
import os
import sys
import time

if __name__ == "__main__" and "--threads" in sys.argv:
    os.environ["OPENBLAS_NUM_THREADS"] = sys.argv[sys.argv.index("--threads") + 1]

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from real_models import gpt2_build, vit_build  # noqa: E402


def gpt2_layers(m):
    """GPT-2-small's layers with their default init (no re-initialisation)."""
    nn = m.nn

    def build():
        blocks = nn.ModuleList(
            nn.ModuleList([nn.LayerNorm(768), nn.Linear(768, 2304), nn.Linear(768, 768),
                           nn.LayerNorm(768), nn.Linear(768, 3072), nn.Linear(3072, 768)])
            for _ in range(12))
        return nn.ModuleDict({"wte": nn.Embedding(50257, 768), "wpe": nn.Embedding(1024, 768),
                              "h": blocks, "ln_f": nn.LayerNorm(768)})
    return build


def gpt2_reinit(m):
    """GPT-2's ``_init_weights`` on an already built model (timed alone)."""
    nn = m.nn
    model = gpt2_layers(m)()

    def init():
        for mod in model.modules():
            if isinstance(mod, (nn.Linear, nn.Embedding)):
                mod.weight.data.normal_(mean=0.0, std=0.02)
            if isinstance(mod, nn.Linear):
                mod.bias.data.zero_()
    return init


def seeded(m, build):
    def run():
        m.manual_seed(0)
        return build()
    return run


def compare(model_e, model_t):
    """(bit-equal?, largest absolute difference) over every parameter, in order."""
    equal, worst = True, 0.0
    pe, pt = list(model_e.parameters()), list(model_t.parameters())
    assert len(pe) == len(pt)
    for a, b in zip(pe, pt):
        a, b = a.detach().numpy(), b.detach().numpy()
        assert a.shape == b.shape and a.dtype == b.dtype
        equal = equal and np.array_equal(a.view(np.uint32), b.view(np.uint32))
        worst = max(worst, float(np.max(np.abs(a.astype(np.float64) - b))))
    return equal, worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="gpt2,vit")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    import torch

    import ember
    torch.set_num_threads(args.threads)
    ember.set_num_threads(args.threads)
    only = args.only.split(",")
    cases, checked = {}, set()  # name: (ember build, torch build); checked: compare weights
    if "gpt2" in only:
        cases["GPT-2 small (124M), GPT-2 init"] = (gpt2_build(ember), gpt2_build(torch))
        checked.add("GPT-2 small (124M), GPT-2 init")
        cases["  layers with their default init"] = (gpt2_layers(ember), gpt2_layers(torch))
        cases["  GPT-2 re-init (normal_ 0.02)"] = (gpt2_reinit(ember), gpt2_reinit(torch))
    if "vit" in only:
        cases["ViT-S (22M), timm trunc_normal_ init"] = (vit_build(ember), vit_build(torch))
        checked.add("ViT-S (22M), timm trunc_normal_ init")
    times = {name: ([], []) for name in cases}
    checks = {}
    for _ in range(args.rounds):
        for name, (fe, ft) in cases.items():
            models = []
            for k, (lib, f) in enumerate(((ember, fe), (torch, ft))):
                lib.manual_seed(0)
                c = time.process_time()
                models.append(f())
                times[name][k].append((time.process_time() - c) * 1e3)
            if name in checked:
                checks[name] = compare(*models)
            del models
    print(f"CPU ms, median of {args.rounds} interleaved rounds, {args.threads} thread(s); "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'case':<40}{'ember':>10}{'torch':>10}{'ratio':>8}  weights (seed 0)")
    for name, (e, t) in times.items():
        e, t = float(np.median(e)), float(np.median(t))
        note = ""
        if name in checks:
            same, worst = checks[name]
            note = "same weights" if same else f"differ, max |diff| {worst:.3g}"
        print(f"{name:<40}{e:>10.1f}{t:>10.1f}{e / t:>8.2f}  {note}")


if __name__ == "__main__":
    main()
