"""Run under mpiexec: every collective on every dtype against torch's results computed
here from all ranks' inputs, p2p, object collectives, groups, async Work, loud errors,
DDP details and checkpoints. Rank 0 prints ``OK <name>`` per check; failures raise."""
import os
import sys
import tempfile
from datetime import timedelta

import numpy as np
import torch

import ember
import ember.distributed as dist

DTYPES = ["float32", "float64", "float16", "int8", "int16", "int32", "int64", "uint8", "bool"]


def value(dt, r, shape=(2, 3)):
    """Rank ``r``'s input: an ember tensor and its torch twin."""
    base = np.arange(int(np.prod(shape))).reshape(shape) % 5 + r + 1
    if dt == "bool":
        base = (base + r) % 2 == 0
    a = base.astype(np.dtype(dt))
    return ember.tensor(a), torch.tensor(a)


def same(got, want, what):
    g = got.numpy() if hasattr(got, "numpy") else np.asarray(got)
    w = want.numpy() if hasattr(want, "numpy") else np.asarray(want)
    assert g.dtype == w.dtype and g.shape == w.shape, f"{what}: {g.dtype}{g.shape} vs " \
                                                      f"{w.dtype}{w.shape}"
    assert np.array_equal(g, w) or np.allclose(g.astype(np.float64), w.astype(np.float64),
                                               rtol=1e-3), f"{what}: {g} vs {w}"


def torch_reduce(ts, op):
    out = ts[0].clone()
    for t in ts[1:]:
        if op == "SUM":
            out = (out | t) if out.dtype == torch.bool else out + t
        elif op == "PRODUCT":
            out = (out & t) if out.dtype == torch.bool else out * t
        elif op == "MIN":
            out = torch.minimum(out, t)
        elif op == "MAX":
            out = torch.maximum(out, t)
        elif op == "BAND":
            out = out & t
        elif op == "BOR":
            out = out | t
        elif op == "BXOR":
            out = out ^ t
        elif op == "AVG":
            out = out + t
    return out / len(ts) if op == "AVG" else out.to(ts[0].dtype)


def ok(name):
    if dist.get_rank() == 0:
        print("OK", name, flush=True)


def check_reductions(r, n):
    for dt in DTYPES:
        ops = ["SUM", "PRODUCT", "MIN", "MAX"]
        if dt not in ("float32", "float64", "float16"):
            ops += ["BAND", "BOR", "BXOR"]
        elif dt != "float16":
            ops += ["AVG"]
        for op in ops:
            want = torch_reduce([value(dt, q)[1] for q in range(n)], op)
            t, _ = value(dt, r)
            dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
            same(t, want, f"all_reduce {dt} {op}")
            t, _ = value(dt, r)
            dist.reduce(t, dst=n - 1, op=getattr(dist.ReduceOp, op))
            same(t, want if r == n - 1 else value(dt, r)[1], f"reduce {dt} {op}")
        # reduce_scatter: rank q's input_list[j] = value(dt, q + j)
        want = torch_reduce([value(dt, q + r)[1] for q in range(n)], "SUM")
        out = ember.zeros((2, 3), dtype=getattr(ember, dt))
        dist.reduce_scatter(out, [value(dt, r + j)[0] for j in range(n)])
        same(out, want, f"reduce_scatter {dt}")
        out = ember.zeros((2, 3), dtype=getattr(ember, dt))
        dist.reduce_scatter_tensor(out, ember.cat([value(dt, r + j)[0] for j in range(n)]))
        same(out, want, f"reduce_scatter_tensor {dt}")
    ok("reductions")


def check_movement(r, n):
    for dt in DTYPES:
        t, _ = value(dt, r)
        dist.broadcast(t, src=n - 1)
        same(t, value(dt, n - 1)[1], f"broadcast {dt}")
        outs = [ember.zeros((2, 3), dtype=getattr(ember, dt)) for _ in range(n)]
        dist.all_gather(outs, value(dt, r)[0])
        for q in range(n):
            same(outs[q], value(dt, q)[1], f"all_gather {dt}")
        big = ember.zeros((2 * n, 3), dtype=getattr(ember, dt))
        dist.all_gather_into_tensor(big, value(dt, r)[0])
        same(big, torch.cat([value(dt, q)[1] for q in range(n)]), f"all_gather_into {dt}")
        gl = [ember.zeros((2, 3), dtype=getattr(ember, dt)) for _ in range(n)] \
            if r == 0 else None
        dist.gather(value(dt, r)[0], gl, dst=0)
        if r == 0:
            for q in range(n):
                same(gl[q], value(dt, q)[1], f"gather {dt}")
        t = ember.zeros((2, 3), dtype=getattr(ember, dt))
        dist.scatter(t, [value(dt, q)[0] for q in range(n)] if r == 1 else None, src=1)
        same(t, value(dt, r)[1], f"scatter {dt}")
    # all_to_all with uneven sizes: rank i sends j+1 copies of 10*i+j to rank j
    outs = [ember.zeros(r + 1, dtype=ember.int64) for _ in range(n)]
    dist.all_to_all(outs, [ember.full((j + 1,), 10 * r + j, dtype=ember.int64)
                           for j in range(n)])
    for q in range(n):
        same(outs[q], torch.full((r + 1,), 10 * q + r), "all_to_all")
    out = ember.zeros(n, 2)
    dist.all_to_all_single(out, ember.arange(2.0 * n).reshape(n, 2) + 100 * r)
    same(out, torch.stack([torch.arange(2.0 * r, 2.0 * r + 2) + 100 * q for q in range(n)]),
         "all_to_all_single")
    # a non-contiguous tensor is written through
    base = ember.zeros(3, 4)
    view = base[:, 1]
    view.add_(r + 1)
    dist.all_reduce(view)
    same(base[:, 1], torch.full((3,), float(n * (n + 1) // 2)), "all_reduce on a view")
    same(base[:, 0], torch.zeros(3), "all_reduce on a view leaves the rest")
    ok("movement")


def check_async_p2p_objects(r, n):
    t = ember.ones(1000) * (r + 1)
    w = dist.all_reduce(t, async_op=True)
    assert isinstance(w, dist.Work)
    assert w.wait() is True and w.is_completed()
    same(t, torch.ones(1000) * (n * (n + 1) // 2), "async all_reduce")
    assert dist.barrier() is None
    assert dist.barrier(async_op=True).wait()
    # several async collectives in flight at once, waited in reverse order
    b = ember.full((3,), float(r))
    outs = [ember.zeros(2, dtype=ember.int32) for _ in range(n)]
    rs = ember.zeros(2)
    works = [dist.broadcast(b, src=1, async_op=True),
             dist.all_gather(outs, ember.full((2,), r, dtype=ember.int32), async_op=True),
             dist.reduce_scatter_tensor(rs, ember.ones(2 * n), async_op=True)]
    for w in reversed(works):
        w.wait()
    same(b, torch.ones(3), "async broadcast")
    same(torch.stack([torch.tensor(o.numpy()) for o in outs]),
         torch.arange(n, dtype=torch.int32)[:, None].expand(n, 2), "async all_gather")
    same(rs, torch.full((2,), float(n)), "async reduce_scatter_tensor")
    assert works[1].result() is outs
    nxt, prv = (r + 1) % n, (r - 1) % n
    recv = ember.zeros(4, dtype=ember.float16)
    works = dist.batch_isend_irecv([dist.P2POp(dist.isend, ember.ones(4, dtype=ember.float16)
                                               * r, nxt),
                                    dist.P2POp(dist.irecv, recv, prv)])
    for w in works:
        w.wait()
    same(recv, torch.ones(4, dtype=torch.float16) * prv, "batch_isend_irecv")
    if r == 0:
        dist.send(ember.arange(5), dst=1, tag=3)
    elif r == 1:
        got = ember.zeros(5, dtype=ember.int64)
        assert dist.recv(got, tag=3) == 0
        same(got, torch.arange(5), "send/recv")
    objs = [None] * n
    dist.all_gather_object(objs, {"rank": r, "t": ember.ones(2) * r})
    assert [o["rank"] for o in objs] == list(range(n))
    assert objs[1]["t"].tolist() == [1.0, 1.0]
    lst = [r, "x", None]
    dist.broadcast_object_list(lst, src=1)
    assert lst == [1, "x", None]
    gl = [None] * n if r == 0 else None
    dist.gather_object(("g", r), gl, dst=0)
    assert r != 0 or gl == [("g", q) for q in range(n)]
    out = [None]
    dist.scatter_object_list(out, [[q] * q for q in range(n)] if r == 0 else None, src=0)
    assert out == [[r] * r]
    ok("async_p2p_objects")


def check_groups(r, n):
    g = dist.new_group([0, n - 1])
    if r in (0, n - 1):
        assert dist.get_world_size(g) == 2 and dist.get_rank(g) == (0 if r == 0 else 1)
        t = ember.ones(2) * r
        dist.all_reduce(t, group=g)
        same(t, torch.ones(2) * (n - 1), "all_reduce in a group")
        t = ember.ones(2) * r
        dist.broadcast(t, src=n - 1, group=g)
        same(t, torch.ones(2) * (n - 1), "broadcast in a group (global src)")
        assert dist.get_process_group_ranks(g) == [0, n - 1]
    else:
        assert g is dist.GroupMember.NON_GROUP_MEMBER and dist.get_rank(g) == -1
    assert dist.get_backend() == "gloo"
    ok("groups")


def expect_error(fn, *needles, exc=RuntimeError):
    try:
        fn()
    except exc as e:
        for s in needles:
            assert s in str(e), f"{s!r} not in {e}"
        return
    raise AssertionError(f"no error; wanted {needles}")


def check_mismatch(r, n):
    expect_error(lambda: dist.all_reduce(ember.ones(3 + r)), "disagree", "shape [3]",
                 "shape [4]")
    expect_error(lambda: dist.all_reduce(ember.ones(3, dtype=ember.float32 if r else
                                                    ember.float64)), "Float64", "Float32")
    expect_error(lambda: (dist.all_reduce if r else dist.broadcast)(ember.ones(3), *(
        () if r else (0,))), "rank 0: broadcast", "rank 1: all_reduce")
    expect_error(lambda: dist.broadcast(ember.ones(2), src=r), "root")
    outs = [ember.zeros(1) for _ in range(n)]
    expect_error(lambda: dist.all_to_all(outs, [ember.zeros(1 + (r == 0)) for _ in range(n)]),
                 "split sizes disagree")
    expect_error(lambda: dist.all_reduce(ember.ones(2), op=dist.ReduceOp.BAND),
                 "Cannot use ReduceOp.BAND with Float")
    expect_error(lambda: dist.new_group([0, 1] if r == 0 else [1]),
                 "rank 0: new_group(ranks=[0, 1])", "rank 1: new_group(ranks=[1])")
    # the group still works after these errors
    t = ember.ones(1)
    dist.all_reduce(t)
    same(t, torch.ones(1) * n, "all_reduce after mismatch errors")
    ok("mismatch")


def check_ddp_details(r, n):
    from ember import nn
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.00001)
    assert list(ddp.state_dict())[:2] == ["module.0.weight", "module.0.bias"]
    assert ddp.module is model
    ddp(ember.ones(3, 4) * r).sum().backward()
    assert len(ddp._buckets) == 3 and ddp._launched_before_end == 3, \
        "buckets are all-reduced during backward"
    # a parameter that gets no gradient: PyTorch's error at the next forward
    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(2, 2)
            self.b = nn.Linear(2, 2)

        def forward(self, x):
            return self.a(x)
    m = nn.parallel.DistributedDataParallel(Two())
    m(ember.ones(1, 2)).sum().backward()
    expect_error(lambda: m(ember.ones(1, 2)), "find_unused_parameters=True",
                 "b.weight")
    m = nn.parallel.DistributedDataParallel(Two(), find_unused_parameters=True)
    for _ in range(2):
        m(ember.ones(1, 2) * (r + 1)).sum().backward()
    assert m.module.b.weight.grad is None
    same(m.module.a.bias.grad, torch.full((2,), 2.0), "unused: bias grads")
    same(m.module.a.weight.grad, torch.full((2, 2), float(n + 1)), "unused: weight grads")
    # checkpoint from rank 0, load on every rank
    path = os.path.join(tempfile.gettempdir(), f"ember_ddp_ckpt_{os.environ.get('CKPT_ID')}")
    if r == 0:
        ember.save(ddp.module.state_dict(), path)
    dist.barrier()
    fresh = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
    fresh.load_state_dict(ember.load(path))
    for a, b in zip(fresh.parameters(), ddp.module.parameters()):
        same(a.detach(), torch.tensor(b.detach().numpy()), "checkpoint")
    dist.barrier()
    if r == 0:
        os.remove(path)
    # a parameter also used outside forward: its hook runs once, on the summed gradient
    # (PyTorch's AccumulateGrad), so DDP all-reduces that sum, as PyTorch's does
    for p in ddp.parameters():
        p.grad = None
    (ddp(ember.ones(1, 4)).sum() + model[1].weight.sum()).backward()
    g = model[1].weight.grad.numpy().copy()
    for p in ddp.parameters():
        p.grad = None
    with ddp.no_sync():
        (model(ember.ones(1, 4)).sum() + model[1].weight.sum()).backward()
    same(ember.tensor(g), torch.tensor(model[1].weight.grad.numpy()), "outside use: summed")
    # DistributedSampler takes rank and world size from the group
    from ember.utils.data import DistributedSampler
    sampler = DistributedSampler(range(10), shuffle=True, seed=3)
    sampler.set_epoch(1)
    shards = [None] * n
    dist.all_gather_object(shards, list(sampler))
    assert sampler.rank == r and sampler.num_replicas == n
    assert set(sum(shards, [])) == set(range(10)) and len(shards[0]) == 10 // n, shards
    ok("ddp_details")


def main():
    expect_error(lambda: dist.all_reduce(ember.ones(1)), "init_process_group",
                 exc=ValueError)
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    r, n = dist.get_rank(), dist.get_world_size()
    for name in sys.argv[1:]:
        globals()[f"check_{name}"](r, n)
    dist.destroy_process_group()
    assert not dist.is_initialized()


if __name__ == "__main__":
    main()
