"""A PyTorch program in the shape of the DDP tutorials (``import torch``), run by
``python -m ember run -m torch.distributed.run``. ``MODE`` is ``torchrun`` (DDP,
DistributedSampler with set_epoch, a snapshot saved by rank 0 and loaded by every
rank on the next run) or ``spawn`` (``mp.spawn`` with ``init_process_group(rank=,
world_size=)``)."""
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def train(snapshot, epochs):
    rank = int(os.environ["RANK"])
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(64, 6), torch.randint(0, 3, (64,)))
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    start = 0
    if os.path.exists(snapshot):
        state = torch.load(snapshot)
        model.load_state_dict(state["MODEL_STATE"])
        start = state["EPOCHS_RUN"]
        print(f"[rank {rank}] resumed at epoch {start}", flush=True)
    model = DDP(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sampler = DistributedSampler(data, shuffle=True)
    loader = DataLoader(data, batch_size=8, sampler=sampler)
    for epoch in range(start, epochs):
        sampler.set_epoch(epoch)
        seen = []
        for x, y in loader:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            seen.append(len(x))
        assert sum(seen) == 32, seen
        if rank == 0:
            torch.save({"MODEL_STATE": model.module.state_dict(), "EPOCHS_RUN": epoch + 1},
                       snapshot)
        dist.barrier()  # the snapshot is complete before anyone reads it
    params = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, params)
    assert all(torch.equal(e, params) for e in everyone), "ranks differ"
    print(f"[rank {rank}] done epochs {start}..{epochs} sum={float(params.sum()):.6f}",
          flush=True)


def spawned(rank, world_size, tag):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = "12355"
    init_process_group(backend="gloo", rank=rank, world_size=world_size)
    t = torch.ones(2) * rank
    dist.all_reduce(t)
    print(f"{tag} rank {rank}: {t.tolist()}", flush=True)
    destroy_process_group()


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "torchrun":
        init_process_group(backend="nccl")
        train(sys.argv[2], int(sys.argv[3]))
        destroy_process_group()
    else:
        mp.spawn(spawned, args=(2, "spawned"), nprocs=2)
