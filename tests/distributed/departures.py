"""Run under mpiexec, ember.distributed.run, or through mp.spawn under the launcher: one
rank leaves while the others keep calling all_reduce. ``departures.py HOW VICTIM
[spawn]``; HOW is exit (sys.exit(1)), return, raise, kill (SIGKILL), os_exit
(os._exit(3)) or stall (stops calling collectives; the group's timeout is 3 s).

The victim prints ``LEFT <rank> <time>`` just before it leaves, each other rank
``RAISED <rank> <time> <error>`` when its all_reduce raises."""
import os
import signal
import sys
import time
from datetime import timedelta

import ember
import ember.distributed as dist


def main(rank_from_spawn=None, how=None, victim=None):
    dist.init_process_group("gloo", timeout=timedelta(seconds=3))
    r = dist.get_rank()
    assert rank_from_spawn in (None, r)
    t = ember.ones(4)
    try:
        for step in range(6):
            if step == 3 and r == victim:
                print(f"LEFT {r} {time.time():.3f}", flush=True)
                if how == "exit":
                    sys.exit(1)
                if how == "return":
                    return
                if how == "raise":
                    raise ValueError("boom on the victim")
                if how == "kill":
                    os.kill(os.getpid(), signal.SIGKILL)
                if how == "os_exit":
                    os._exit(3)
                if how == "stall":
                    time.sleep(60)
            dist.all_reduce(t)
            time.sleep(0.05)
    except dist.DistError as e:
        print(f"RAISED {r} {time.time():.3f} {type(e).__name__}: {e}", flush=True)
        raise
    print(f"FINISHED {r}", flush=True)


if __name__ == "__main__":
    how, victim = sys.argv[1], int(sys.argv[2])
    if sys.argv[3:] == ["spawn"]:
        import ember.multiprocessing as mp
        mp.spawn(main, args=(how, victim), nprocs=int(os.environ["WORLD_SIZE"]))
    else:
        main(None, how, victim)
