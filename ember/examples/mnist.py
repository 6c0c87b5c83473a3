"""Train a handwritten-digit classifier with ember, the way one does with PyTorch.

    python examples/mnist/train.py               # or: python -m ember.examples.mnist
    python examples/mnist/train.py --model cnn
    python examples/mnist/train.py --download    # fetch MNIST (11 MB) and train on it

It trains on MNIST when the IDX files are under ``--data-root`` (or ``--download``
fetches them); otherwise on the real 8x8 handwritten digits that scikit-learn ships,
so it runs offline. The loop is the classic one: zero_grad, forward, cross-entropy,
backward, Adam step; evaluation under ``no_grad``. At the end it prints the test
accuracy and the wall time, and writes a checkpoint (``ember.save`` of the model and
optimizer state_dicts and the epoch) and a PNG of the loss and accuracy curves.

tqdm and matplotlib are optional (``pip install -e '.[demo]'``): without tqdm each
epoch prints one line, without matplotlib there is no plot.
"""
import argparse
import os
import sys
import time

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember import transforms
from ember.datasets import MNIST, Digits
from ember.utils.data import DataLoader, Subset

# epochs / learning rate / batch size per dataset, tuned for the 2-core reference machine:
# the 8x8 digits reach >= 97% test accuracy in well under a minute with either model
DEFAULTS = {"digits": {"epochs": 20, "lr": 3e-3, "batch_size": 32},
            "mnist": {"epochs": 3, "lr": 1e-3, "batch_size": 64}}
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="train.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", choices=["mlp", "cnn"], default="mlp", help="the network")
    p.add_argument("--dataset", choices=["auto", "mnist", "digits"], default="auto",
                   help="auto: MNIST if its files are there (or --download), else digits")
    p.add_argument("--epochs", type=int, default=None,
                   help=f"default: {DEFAULTS['digits']['epochs']} on digits, "
                        f"{DEFAULTS['mnist']['epochs']} on MNIST")
    p.add_argument("--batch-size", type=int, default=None,
                   help=f"default: {DEFAULTS['digits']['batch_size']} on digits, "
                        f"{DEFAULTS['mnist']['batch_size']} on MNIST")
    p.add_argument("--lr", type=float, default=None,
                   help=f"Adam's learning rate; default: {DEFAULTS['digits']['lr']} on "
                        f"digits, {DEFAULTS['mnist']['lr']} on MNIST")
    p.add_argument("--data-root", default="data", help="where MNIST/raw/ is (or goes)")
    p.add_argument("--download", action="store_true", help="download MNIST if it is missing")
    p.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
    p.add_argument("--seed", type=int, default=0, help="seeds the weights and the shuffling")
    p.add_argument("--out", default="checkpoints", help="directory for the checkpoint and plot")
    p.add_argument("--threads", type=int, default=1,
                   help="NumPy's BLAS threads (via threadpoolctl); 1 is fastest for these small "
                        "matrices, and far faster on a busy machine")
    p.add_argument("--logdir", default=None,
                   help="TensorBoard runs directory; default: runs/ beside --out")
    p.add_argument("--device", default="cpu",
                   help="where the model and the batches live: cpu, or cuda (needs CuPy)")
    p.add_argument("--limit", type=int, default=None,
                   help="train on only the first N training images (quick tries)")
    return p.parse_args(argv)


def build_model(kind, height, width, classes=10):
    """The MLP or the small CNN, sized for ``height x width`` one-channel images."""
    if kind == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(height * width, 256), nn.ReLU(),
                             nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, classes))
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * (height // 4) * (width // 4), 128), nn.ReLU(),
        nn.Linear(128, classes))


def load_data(args, log=print):
    """(train set, test set, dataset name); falls back from MNIST to digits when allowed."""
    if args.dataset in ("auto", "mnist"):
        try:
            mnist = MNIST(args.data_root, train=True, download=args.download)
        except RuntimeError:
            if args.dataset == "mnist" or args.download:
                raise
            log(f"MNIST not found in {os.path.join(args.data_root, 'MNIST', 'raw')}/: "
                f"training on scikit-learn's bundled 8x8 handwritten digits instead "
                f"(--download fetches MNIST, 11 MB)")
        else:
            tf = transforms.Compose([transforms.ToTensor(),
                                     transforms.Normalize((MNIST_MEAN,), (MNIST_STD,))])
            mnist.transform = tf
            return mnist, MNIST(args.data_root, train=False, transform=tf), "mnist"
    train = Digits(train=True, seed=0)
    pixels = train.data.float() / 255
    tf = transforms.Compose([transforms.ToTensor(),
                             transforms.Normalize((pixels.mean().item(),),
                                                  (pixels.std().item(),))])
    train.transform = tf
    return train, Digits(train=False, seed=0, transform=tf), "digits"


class _PlainBar:
    """What the loop needs of tqdm, for when tqdm is not installed."""

    def __init__(self, iterable, desc):
        self.iterable, self.desc = iterable, desc

    def __iter__(self):
        return iter(self.iterable)

    def set_postfix(self, **kw):
        self.postfix = kw

    def close(self):
        pass


def _progress(iterable, desc):
    """A tqdm bar (shown on a terminal only) or, without tqdm, a silent stand-in."""
    try:
        from tqdm import tqdm
    except ImportError:
        return _PlainBar(iterable, desc)
    return tqdm(iterable, desc=desc, unit="batch", leave=False, dynamic_ncols=True, disable=None)


def _write(line):
    """Print a line without breaking a tqdm bar that may be on screen."""
    try:
        from tqdm import tqdm
    except ImportError:
        print(line, flush=True)
    else:
        tqdm.write(line)


def _limit_blas_threads(n):
    """Cap NumPy's BLAS threads; OpenBLAS's spinning threads are 10-40x slower on a busy
    2-core machine. Needs threadpoolctl (it comes with scikit-learn); None without it."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return None
    return threadpool_limits(n)


def train_one_epoch(model, loader, optimizer, desc, device=None):
    """One pass over ``loader``; returns (mean training loss, samples per second). The
    batches are moved to ``device`` when given."""
    model.train()
    bar = _progress(loader, desc)
    total, seen, start = 0.0, 0, time.perf_counter()
    for x, y in bar:
        if device is not None:
            x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        n = int(y.shape[0])
        total += loss.item() * n
        seen += n
        rate = seen / max(time.perf_counter() - start, 1e-9)
        bar.set_postfix(loss=f"{loss.item():.4f}", **{"samples/s": f"{rate:.0f}"})
    bar.close()
    return total / max(seen, 1), seen / max(time.perf_counter() - start, 1e-9)


def evaluate(model, loader, device=None):
    """Fraction of ``loader``'s samples classified correctly (batches moved to
    ``device`` when given)."""
    model.eval()
    correct = seen = 0
    with ember.no_grad():
        for x, y in loader:
            if device is not None:
                x, y = x.to(device), y.to(device)
            correct += int((model(x).argmax(1) == y).sum().item())
            seen += int(y.shape[0])
    return correct / max(seen, 1)


def save_plot(history, path, title):
    """Training loss and test accuracy per epoch, as a PNG (needs matplotlib)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    epochs = range(1, len(history["train_loss"]) + 1)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.5))
    ax1.plot(epochs, history["train_loss"], marker="o")
    ax1.set(xlabel="epoch", ylabel="training loss (cross-entropy)", yscale="log")
    ax2.plot(epochs, [100 * a for a in history["test_acc"]], marker="o", color="tab:green")
    ax2.set(xlabel="epoch", ylabel="test accuracy (%)")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _open_writer(logdir):
    """A SummaryWriter, or None with a note when TensorBoard is not installed."""
    try:
        from ember.utils.tensorboard import SummaryWriter
    except ImportError:
        print("tensorboard: skipped (pip install -e '.[tensorboard]')")
        return None
    return SummaryWriter(logdir)


def save_graph_picture(model, example, stem):
    """The model's forward graph as a PNG (needs Graphviz); returns the path or None."""
    import shutil
    try:
        from ember.viz import draw_module
    except ImportError:
        return None
    if shutil.which("dot") is None:
        return None
    return draw_module(model, example).render(stem, format="png", cleanup=True)


def main(argv=None):
    """Run the training job; returns a dict of the results (accuracy, paths, timings)."""
    args = parse_args(argv)
    limits = _limit_blas_threads(args.threads) if args.threads > 0 else None
    try:
        return _run(args)
    finally:
        if limits is not None:
            limits.restore_original_limits()


def _run(args):
    wall = time.perf_counter()
    ember.manual_seed(args.seed)
    train_set, test_set, name = load_data(args)
    for key, value in DEFAULTS[name].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.limit is not None:
        train_set = Subset(train_set, range(min(args.limit, len(train_set))))
    height, width = test_set.data.shape[1:]
    model = build_model(args.model, height, width, len(test_set.classes)).to(args.device)
    optimizer = ember.optim.Adam(model.parameters(), lr=args.lr)
    # the learning rate decays along a cosine to zero over the run: a steady final model
    scheduler = ember.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
    gen = ember.Generator().manual_seed(args.seed)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True,
                              num_workers=args.workers, generator=gen)
    test_loader = DataLoader(test_set, batch_size=500, num_workers=args.workers)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"{name}: {len(train_set)} training / {len(test_set)} test images of {height}x{width}"
          f"; {args.model} with {n_params:,} parameters; {args.epochs} epochs, batch "
          f"{args.batch_size}, Adam lr {args.lr} (cosine decay)")

    logdir = args.logdir or os.path.join(os.path.dirname(os.path.normpath(args.out)), "runs")
    run_dir = os.path.join(logdir, f"{name}-{args.model}")
    writer = _open_writer(run_dir)
    example = test_set[0][0].unsqueeze(0).to(args.device)
    if writer is not None:
        writer.add_graph(model, example)
    history = {"train_loss": [], "test_acc": [], "samples_per_s": []}
    for epoch in range(1, args.epochs + 1):
        loss, rate = train_one_epoch(model, train_loader, optimizer,
                                     f"epoch {epoch}/{args.epochs}", args.device)
        scheduler.step()
        acc = evaluate(model, test_loader, args.device)
        history["train_loss"].append(loss)
        history["test_acc"].append(acc)
        history["samples_per_s"].append(rate)
        if writer is not None:
            writer.add_scalar("loss/train", loss, epoch)
            writer.add_scalar("accuracy/test", acc, epoch)
            writer.add_scalar("learning_rate", optimizer.param_groups[0]["lr"], epoch)
            for pname, param in model.named_parameters():
                writer.add_histogram(f"weights/{pname}", param, epoch)
        _write(f"epoch {epoch:>2}/{args.epochs}  loss {loss:.4f}  "
               f"test accuracy {100 * acc:.2f}%  {rate:,.0f} samples/s")
    elapsed = time.perf_counter() - wall

    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, f"{name}-{args.model}")
    ember.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "epoch": args.epochs, "dataset": name,
                "arch": args.model, "history": history}, stem + ".pt")
    title = (f"ember {args.model.upper()} on {'MNIST' if name == 'mnist' else '8x8 digits'}: "
             f"{100 * history['test_acc'][-1]:.2f}% test accuracy")
    plot = stem + ".png"
    try:
        save_plot(history, plot, title)
    except ImportError:
        plot = None
    if writer is not None:
        writer.close()
    graph = save_graph_picture(model, example, stem + "-graph")
    print(f"test accuracy {100 * history['test_acc'][-1]:.2f}% after {args.epochs} epochs; "
          f"wall time {elapsed:.1f} s")
    print(f"checkpoint: {stem}.pt")
    print(f"plot: {plot}" if plot else
          "plot: skipped (matplotlib is not installed: pip install -e '.[demo]')")
    print(f"graph picture: {graph}" if graph else
          "graph picture: skipped (needs Graphviz: apt-get install graphviz, and "
          "pip install -e '.[viz]')")
    if writer is not None:
        print(f"TensorBoard: tensorboard --logdir {logdir}")
    return {"graph": graph, "logdir": run_dir if writer is not None else None,
            "dataset": name, "test_acc": history["test_acc"][-1], "wall_s": elapsed,
            "history": history, "checkpoint": stem + ".pt", "plot": plot, "args": vars(args)}


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
