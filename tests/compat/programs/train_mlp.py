"""A seeded MLP classifier trained the usual PyTorch way: Dataset + DataLoader
(shuffled), Dropout, Adam with weight decay, StepLR, train/eval modes, a checkpoint
round trip. Prints its losses."""
import argparse
import io

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, TensorDataset, random_split


class Spirals(Dataset):
    """Three interleaved spirals in 2-D, with noise."""

    def __init__(self, n_per_class=128):
        t = torch.linspace(0.0, 1.0, n_per_class)
        xs, ys = [], []
        for k in range(3):
            angle = 4.0 * t + 2.0943951 * k + 0.2 * torch.randn(n_per_class)
            pts = torch.stack([t * torch.sin(angle), t * torch.cos(angle)], dim=1)
            xs.append(pts)
            ys.append(torch.full((n_per_class,), k, dtype=torch.long))
        self.x = torch.cat(xs)
        self.y = torch.cat(ys)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class MLP(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(2, hidden), nn.ReLU(),
            nn.Dropout(0.1),
            nn.Linear(hidden, hidden), nn.Tanh(),
            nn.Linear(hidden, 3),
        )

    def forward(self, x):
        return self.net(x)


def evaluate(model, loader):
    model.eval()
    total, correct, loss = 0, 0, 0.0
    with torch.no_grad():
        for x, y in loader:
            out = model(x)
            loss += F.cross_entropy(out, y, reduction="sum").item()
            correct += (out.argmax(dim=1) == y).sum().item()
            total += y.numel()
    return loss / total, correct / total


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    torch.manual_seed(args.seed)
    data = Spirals()
    train_set, test_set = random_split(data, [288, 96])
    train_loader = DataLoader(train_set, batch_size=32, shuffle=True)
    test_loader = DataLoader(TensorDataset(data.x[test_set.indices], data.y[test_set.indices]),
                             batch_size=64)
    model = MLP()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.05)
    step = 0
    for epoch in range(args.epochs):
        model.train()
        for x, y in train_loader:
            opt.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            opt.step()
            if step % 9 == 0:
                print(f"step {step} loss {loss.item():.6f}")
            step += 1
        sched.step()
        test_loss, acc = evaluate(model, test_loader)
        print(f"epoch {epoch} lr {sched.get_last_lr()[0]:.5f} test_loss {test_loss:.6f} "
              f"acc {acc:.4f}")
    buf = io.BytesIO()
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, buf)
    buf.seek(0)
    state = torch.load(buf)
    clone = MLP()
    clone.load_state_dict(state["model"])
    print(f"reloaded test_loss {evaluate(clone, test_loader)[0]:.6f}")


if __name__ == "__main__":
    main()
