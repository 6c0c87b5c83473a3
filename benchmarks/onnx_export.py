"""ONNX export time of a model zoo, ember beside torch, and onnxruntime's inference time
on the files each wrote (they should be equal: ember's graphs should be as lean).

    python benchmarks/onnx_export.py [--batch 64] [--repeat 5]

torch's TorchScript-based exporter (dynamo=False) is always measured; its default
exporter (dynamo=True) needs the onnxscript package and is measured when present.
"""
import argparse
import io
import logging
import os
import time
import warnings

import numpy as np


def build(lib):
    """The zoo in either library (``lib`` is ember or torch)."""
    nn = lib.nn

    class LM(nn.Module):
        def __init__(self, kind):
            super().__init__()
            self.emb = nn.Embedding(1000, 128)
            self.rnn = getattr(nn, kind)(128, 256, num_layers=2, batch_first=True)
            self.head = nn.Linear(256, 1000)

        def forward(self, tokens):
            return self.head(self.rnn(self.emb(tokens))[0])

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(64, 64, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.conv2 = nn.Conv2d(64, 64, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(64)

        def forward(self, x):
            y = lib.relu(self.bn1(self.conv1(x)))
            return lib.relu(self.bn2(self.conv2(y)) + x)

    lib.manual_seed(0)
    layer = nn.TransformerEncoderLayer(128, 4, 256, dropout=0.0, batch_first=True)
    return {
        "mlp": (nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                              nn.Linear(128, 10)), lambda b: (lib.randn(b, 784),)),
        "cnn": (nn.Sequential(nn.Conv2d(1, 32, 3), nn.BatchNorm2d(32), nn.ReLU(),
                              nn.MaxPool2d(2), nn.Conv2d(32, 64, 3), nn.ReLU(),
                              nn.MaxPool2d(2), nn.Flatten(), nn.Linear(1600, 10)),
                lambda b: (lib.randn(b, 1, 28, 28),)),
        "resblock": (Block(), lambda b: (lib.randn(b, 64, 16, 16),)),
        "lstm_lm": (LM("LSTM"), lambda b: (lib.randint(0, 1000, (b, 32)),)),
        "gru_lm": (LM("GRU"), lambda b: (lib.randint(0, 1000, (b, 32)),)),
        "transformer": (nn.TransformerEncoder(layer, 2, enable_nested_tensor=False),
                        lambda b: (lib.randn(b, 32, 128),)),
    }


def best(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    import onnxruntime as ort
    import torch

    import ember
    import ember.onnx
    ort.set_default_logger_severity(3)
    warnings.simplefilter("ignore")
    logging.getLogger("torch").setLevel(logging.ERROR)
    try:
        import onnxscript  # noqa: F401
        dynamo = True
    except ImportError:
        dynamo = False
    print(f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'model':<12}{'ember ms':>10}{'torch ms':>10}{'ratio':>7}"
          f"{'dynamo ms':>11}{'ratio':>7}{'ort ember':>11}{'ort torch':>11}{'ratio':>7}")
    ez, tz = build(ember), build(torch)
    for name in ez:
        print(_row(name, ez[name], tz[name], args, dynamo, ember, torch, ort))


def _row(name, ember_entry, torch_entry, args, dynamo, ember, torch, ort):
    """One model: export times, onnxruntime times on both files, and their difference."""
    em, emake = ember_entry
    tm = torch_entry[0]
    tm.load_state_dict({k: torch.from_numpy(v.numpy().copy())
                        for k, v in em.state_dict().items()})
    em.eval()
    tm.eval()
    ex = emake(2)
    tx = tuple(torch.from_numpy(a.numpy()) for a in ex)
    dyn = {"x": {0: "batch"}}
    e_buf, t_buf = io.BytesIO(), io.BytesIO()

    def e_export(buf=None):
        ember.onnx.export(em, ex, buf or io.BytesIO(), input_names=["x"], dynamic_axes=dyn)

    def t_export(buf=None):
        torch.onnx.export(tm, tx, buf or io.BytesIO(), dynamo=False, input_names=["x"],
                          dynamic_axes=dyn)
    e_export(e_buf)
    t_export(t_buf)
    te = best(e_export, args.repeat)
    tt = best(t_export, args.repeat)
    td, rd = "n/a", ""
    if dynamo:
        try:
            td_ms = best(lambda: torch.onnx.export(tm, tx, dynamo=True, verbose=False),
                         max(1, args.repeat // 2))
            td, rd = f"{td_ms:.1f}", f"{te / td_ms:.2f}"
        except Exception as e:  # noqa: BLE001 - reported, not hidden
            td = type(e).__name__
    feeds = {"x": emake(args.batch)[0].numpy()}
    se = ort.InferenceSession(e_buf.getvalue(), providers=["CPUExecutionProvider"])
    st = ort.InferenceSession(t_buf.getvalue(), providers=["CPUExecutionProvider"])
    ie = best(lambda: se.run(None, feeds), args.repeat * 4)
    it = best(lambda: st.run(None, feeds), args.repeat * 4)
    diff = float(np.abs(se.run(None, feeds)[0] - st.run(None, feeds)[0]).max())
    return (f"{name:<12}{te:>10.1f}{tt:>10.1f}{te / tt:>7.2f}{td:>11}{rd:>7}"
            f"{ie:>11.2f}{it:>11.2f}{ie / it:>7.2f}   max |ember - torch| {diff:.1e}")

if __name__ == "__main__":
    main()
