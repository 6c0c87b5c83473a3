"""torchmetrics' documented basic use: classification and regression metrics
updated over batches and computed, a MetricCollection, state_dict save/load, reset, and
a metric inside an nn.Module trained for a few steps; the numbers go to the .npz file
named on the command line."""
import sys

import numpy as np
import torch
from torchmetrics import MeanMetric, MetricCollection
from torchmetrics.classification import (
    BinaryAccuracy,
    BinaryAUROC,
    MulticlassAccuracy,
    MulticlassAUROC,
    MulticlassConfusionMatrix,
    MulticlassF1Score,
)
from torchmetrics.regression import MeanAbsoluteError, MeanSquaredError, PearsonCorrCoef, R2Score

rng = np.random.default_rng(0)
out = {}
acc = MulticlassAccuracy(num_classes=4)
metrics = {"f1": MulticlassF1Score(num_classes=4, average="macro"),
           "auroc": MulticlassAUROC(num_classes=4),
           "cm": MulticlassConfusionMatrix(num_classes=4)}
binary = {"bauroc": BinaryAUROC(), "bacc": BinaryAccuracy()}
regression = {"mse": MeanSquaredError(), "mae": MeanAbsoluteError(), "r2": R2Score(),
              "pear": PearsonCorrCoef()}
mean = MeanMetric()
coll = MetricCollection({"acc": MulticlassAccuracy(num_classes=4, average="micro"),
                         "f1w": MulticlassF1Score(num_classes=4, average="weighted")})
for step in range(3):
    logits = torch.tensor(rng.standard_normal((16, 4)), dtype=torch.float32)
    target = torch.tensor(rng.integers(0, 4, 16))
    probs = logits.softmax(-1)
    out[f"batch_acc{step}"] = acc(probs, target).numpy()  # forward: this batch's value
    for metric in [*metrics.values(), coll]:
        metric.update(probs, target)
    bp = torch.tensor(rng.random(16), dtype=torch.float32)
    bt = torch.tensor(rng.integers(0, 2, 16))
    for metric in binary.values():
        metric.update(bp, bt)
    p = torch.tensor(rng.standard_normal(16), dtype=torch.float32)
    t = p * 0.5 + torch.tensor(rng.standard_normal(16), dtype=torch.float32)
    for metric in regression.values():
        metric.update(p, t)
    mean.update(t)
for name, metric in {"acc": acc, **metrics, **binary, **regression, "mean": mean}.items():
    out[name] = metric.compute().numpy()
for k, v in coll.compute().items():
    out["coll_" + k] = v.numpy()
mse = regression["mse"]
mse.persistent(True)
restored = MeanSquaredError()
restored.persistent(True)
restored.load_state_dict(mse.state_dict())
restored.update(torch.tensor([1.0, 2.0]), torch.tensor([1.5, 2.0]))
out["mse_restored"] = restored.compute().numpy()
acc.reset()
out["acc_after_reset"] = acc(torch.tensor([0, 1, 2, 3]), torch.tensor([0, 1, 1, 3])).numpy()


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(5, 3)
        self.metric = MulticlassAccuracy(num_classes=3)

    def forward(self, x, y):
        logits = self.lin(x)
        self.metric.update(logits, y)
        return torch.nn.functional.cross_entropy(logits, y)


net = Net()
with torch.no_grad():
    net.lin.weight.copy_(torch.tensor(rng.standard_normal((3, 5)), dtype=torch.float32))
    net.lin.bias.zero_()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for step in range(3):
    x = torch.tensor(rng.standard_normal((8, 5)), dtype=torch.float32)
    y = torch.tensor(rng.integers(0, 3, 8))
    loss = net(x, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    out[f"net_loss{step}"] = loss.detach().numpy()
out["net_acc"] = net.metric.compute().numpy()
out["net_state_keys"] = np.array(sorted(net.state_dict().keys()))
np.savez(sys.argv[1], **out)
print("done", torch.__version__)
