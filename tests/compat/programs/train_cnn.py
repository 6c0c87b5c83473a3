"""A small CNN on synthetic 12x12 images: Conv2d, BatchNorm2d, MaxPool2d,
AdaptiveAvgPool2d, SGD with Nesterov momentum, gradient clipping, a cosine schedule,
kaiming init through ``model.apply``. Prints its losses."""
import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_data(n):
    """Class k: a bright bar at orientation k (4 classes) on noise."""
    y = torch.randint(0, 4, (n,))
    img = 0.3 * torch.randn(n, 1, 12, 12)
    idx = torch.arange(12)
    for i in range(n):
        k = int(y[i])
        r = int(torch.randint(2, 10, ()))
        if k == 0:
            img[i, 0, r, :] += 1.0
        elif k == 1:
            img[i, 0, :, r] += 1.0
        elif k == 2:
            img[i, 0, idx, idx] += 1.0
        else:
            img[i, 0, idx, 11 - idx] += 1.0
    return img, y


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(8),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d((2, 2)),
        )
        self.head = nn.Linear(16 * 4, 4)

    def forward(self, x):
        return self.head(torch.flatten(self.features(x), 1))


def init_weights(m):
    if isinstance(m, nn.Conv2d):
        nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        if m.bias is not None:
            nn.init.zeros_(m.bias)
    elif isinstance(m, nn.Linear):
        nn.init.xavier_uniform_(m.weight)
        m.bias.data.fill_(0.01)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=3)
    args = p.parse_args()
    torch.manual_seed(1)
    x, y = make_data(192)
    loader = DataLoader(TensorDataset(x, y), batch_size=24, shuffle=True, drop_last=True)
    model = Net()
    model.apply(init_weights)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                          weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.epochs * len(loader))
    loss_fn = nn.CrossEntropyLoss()
    step = 0
    for epoch in range(args.epochs):
        model.train()
        for xb, yb in loader:
            out = model(xb)
            loss = loss_fn(out, yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            norm = nn.utils.clip_grad_norm_(model.parameters(), max_norm=2.0)
            opt.step()
            sched.step()
            if step % 4 == 0:
                print(f"step {step} loss {loss.item():.6f} grad_norm {norm.item():.6f}")
            step += 1
        model.eval()
        with torch.no_grad():
            acc = (model(x).argmax(1) == y).float().mean().item()
        bn = model.features[1]
        print(f"epoch {epoch} acc {acc:.4f} running_mean {bn.running_mean.sum().item():.6f} "
              f"running_var {bn.running_var.sum().item():.6f}")


if __name__ == "__main__":
    main()
