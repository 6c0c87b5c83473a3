"""Train, stop, save everything, resume in a new process, and end where an
uninterrupted run ends — to the last bit.

    python examples/resume.py --epochs 6 --stop-after 3 --ckpt /tmp/run.pt   # part 1
    python examples/resume.py --epochs 6 --resume /tmp/run.pt               # part 2
    python examples/resume.py --epochs 6                                    # in one go

Each run prints the loss of every epoch; parts 1 and 2 together print exactly the
lines of the run in one go. What makes that work: the checkpoint holds the model,
the optimizer, the LR scheduler, the epoch, and the random number generator's state
(dropout and shuffling draw from it).
"""
import argparse

import ember as torch
from ember import nn, optim
from ember.utils.data import DataLoader, TensorDataset


def make_data():
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(256, 10, generator=g)
    w = torch.randn(10, 3, generator=g)
    y = (x @ w).argmax(1)
    return TensorDataset(x, y)


def build():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 3))
    opt = optim.Adam(model.parameters(), lr=1e-2)
    sched = optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    return model, opt, sched


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--stop-after", type=int, default=None)
    ap.add_argument("--ckpt", default=None)
    ap.add_argument("--resume", default=None)
    args = ap.parse_args(argv)

    model, opt, sched = build()
    start = 0
    if args.resume:
        ckpt = torch.load(args.resume)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        sched.load_state_dict(ckpt["scheduler"])
        torch.set_rng_state(ckpt["rng"])
        start = ckpt["epoch"]
    data = make_data()
    loader = DataLoader(data, batch_size=32, shuffle=True)
    loss_fn = nn.CrossEntropyLoss()
    lines = []
    for epoch in range(start, args.epochs):
        model.train()
        total = 0.0
        for x, y in loader:
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            total += loss.item()
        sched.step()
        line = f"epoch {epoch + 1} loss {total:.10f} lr {sched.get_last_lr()[0]:.6f}"
        print(line)
        lines.append(line)
        if args.stop_after is not None and epoch + 1 == args.stop_after:
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                        "scheduler": sched.state_dict(), "epoch": epoch + 1,
                        "rng": torch.get_rng_state()}, args.ckpt)
            print(f"saved {args.ckpt}")
            break
    return lines


if __name__ == "__main__":
    main()
