"""Run under mpiexec: DDP on N ranks == one process on the whole batch (and == torch).

Prints one ``OK <name> <figure>`` line per check from rank 0; any failure raises."""
import sys

import numpy as np

import ember
import ember.distributed as dist
from ember import nn

STEPS = 20
RTOL = 1e-6


def mlp():
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 16), nn.ReLU(),
                         nn.Linear(16, 3))


def cnn(sync):
    bn = nn.SyncBatchNorm(4) if sync else nn.BatchNorm2d(4)
    return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), bn, nn.ReLU(), nn.Flatten(),
                         nn.Linear(4 * 5 * 5, 3))


def data(kind, n):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((n, 8) if kind == "mlp" else (n, 2, 5, 5)).astype(np.float32)
    y = rng.integers(0, 3, n)
    return x, y


def train(model, batches, steps, accumulate):
    """SGD with momentum; each step: ``accumulate`` micro-batches, grads summed."""
    opt = ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    for s in range(steps):
        opt.zero_grad()
        for m, (x, y) in enumerate(batches(s)):
            last = m == accumulate - 1
            ctx = model.no_sync() if (not last and hasattr(model, "no_sync")) else _null()
            with ctx:
                loss_fn(model(ember.tensor(x)), ember.tensor(y)).backward()
        opt.step()
    return model


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def torch_train(state, kind, batches, steps):
    import torch
    if kind == "mlp":
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(),
                                    torch.nn.Linear(16, 16), torch.nn.ReLU(),
                                    torch.nn.Linear(16, 3))
    else:
        model = torch.nn.Sequential(torch.nn.Conv2d(2, 4, 3, padding=1),
                                    torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                                    torch.nn.Flatten(), torch.nn.Linear(100, 3))
    model.load_state_dict({k: torch.tensor(v.numpy()) for k, v in state.items()})
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    for s in range(steps):
        opt.zero_grad()
        for x, y in batches(s):
            loss_fn(model(torch.tensor(x)), torch.tensor(y)).backward()
        opt.step()
    return {k: v.detach().numpy() for k, v in model.state_dict().items()}


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-12))


def check(kind, accumulate, world, rank):
    micro = 4 * world  # per micro-batch, over all ranks
    x, y = data(kind, micro * accumulate * 2)
    per = micro // world

    def global_batches(s):
        off = (s % 2) * micro * accumulate
        return [(x[off + m * micro: off + (m + 1) * micro],
                 y[off + m * micro: off + (m + 1) * micro]) for m in range(accumulate)]

    def local_batches(s):
        return [(bx[rank * per:(rank + 1) * per], by[rank * per:(rank + 1) * per])
                for bx, by in global_batches(s)]

    ember.manual_seed(0)
    ref = mlp() if kind == "mlp" else cnn(False)
    init = {k: v.clone() for k, v in ref.state_dict().items()}
    ember.manual_seed(100 + rank)  # different on every rank: DDP broadcasts rank 0's
    local = mlp() if kind == "mlp" else cnn(True)
    if rank == 0:
        local.load_state_dict(init)
    ddp = nn.parallel.DistributedDataParallel(local, bucket_cap_mb=0.001)
    train(ddp, local_batches, STEPS, accumulate)
    train(ref, global_batches, STEPS, accumulate)
    theirs = torch_train(init, kind, global_batches, STEPS) if WITH_TORCH else {}
    got = {k[len("module."):]: v for k, v in ddp.state_dict().items()}
    worst_ref = max(rel(got[k].numpy(), v.numpy()) for k, v in ref.state_dict().items()
                    if v.dtype == ember.float32)
    worst_torch = max([rel(got[k].numpy(), theirs[k]) for k in theirs
                       if theirs[k].dtype == np.float32], default=0.0)
    # every rank holds the same parameters
    flat = np.concatenate([p.detach().numpy().reshape(-1) for p in ddp.parameters()])
    everyone = [None] * world
    dist.all_gather_object(everyone, flat)
    spread = max(rel(e, flat) for e in everyone)
    name = f"{kind}{'_no_sync' if accumulate > 1 else ''}_world{world}"
    assert worst_ref <= RTOL, f"{name}: DDP vs one process: rel {worst_ref:.3g}"
    assert worst_torch <= 1e-5, f"{name}: DDP vs torch: rel {worst_torch:.3g}"
    assert spread == 0.0, f"{name}: ranks differ by {spread}"
    if rank == 0:
        print(f"OK {name} vs_one_process={worst_ref:.2e}"
              + (f" vs_torch={worst_torch:.2e}" if WITH_TORCH else ""), flush=True)


def check_subgroup(rank, world):
    """A group of the first and last rank; the ranks between are not members."""
    g = dist.new_group([0, world - 1])
    t = ember.ones(2) * rank
    if rank in (0, world - 1):
        dist.all_reduce(t, group=g)
        assert t.tolist() == [world - 1.0] * 2 and dist.get_rank(g) == (rank > 0)
    else:
        assert g is dist.GroupMember.NON_GROUP_MEMBER and dist.get_rank(g) == -1
        assert dist.all_reduce(t, group=g) is None and t.tolist() == [rank] * 2
    if rank == 0:
        print(f"OK subgroup_world{world}", flush=True)


WITH_TORCH = "--no-torch" not in sys.argv


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    kinds = [a for a in sys.argv[1:] if not a.startswith("--")] or ["mlp", "cnn"]
    check_subgroup(rank, world)
    for kind in kinds:
        for accumulate in (1, 2):
            check(kind, accumulate, world, rank)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
