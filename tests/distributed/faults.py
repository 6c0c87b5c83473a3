"""Run under mpiexec or ember.distributed.run: a rank that dies, is late, or a launcher
environment check. ``faults.py MODE TIMEOUT_S``."""
import os
import signal
import sys
import time
from datetime import timedelta

import ember
import ember.distributed as dist


def main():
    mode, timeout = sys.argv[1], float(sys.argv[2])
    dist.init_process_group("nccl", timeout=timedelta(seconds=timeout))
    r = dist.get_rank()
    t = ember.ones(3)
    dist.all_reduce(t)
    if mode == "env":
        keys = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                "MASTER_PORT", "TORCHELASTIC_RUN_ID"]
        assert os.environ["RANK"] == str(r) and os.environ["LOCAL_RANK"] == str(r)
        assert os.environ["WORLD_SIZE"] == os.environ["LOCAL_WORLD_SIZE"] == \
            str(dist.get_world_size())
        assert dist.is_torchelastic_launched()
        print(f"ENV rank {r}: " + " ".join(f"{k}={os.environ[k]}" for k in keys), flush=True)
    elif mode == "kill" and r == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    elif mode == "late" and r == 1:
        time.sleep(timeout + 30)  # never arrives in time
    start = time.monotonic()
    dist.all_reduce(t)
    print(f"rank {r} finished in {time.monotonic() - start:.1f}s", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
