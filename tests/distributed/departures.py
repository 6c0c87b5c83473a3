"""Run under mpiexec, ember.distributed.run, or through mp.spawn under the launcher: one
rank leaves while the others keep calling all_reduce. ``departures.py HOW VICTIM
[spawn]``; HOW is exit (sys.exit(1)), return, raise, kill (SIGKILL), os_exit
(os._exit(3)), stall (stops calling collectives; the group's timeout is 3 s) or
before_init (exits before init_process_group).

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
    if how == "before_init" and int(os.environ["PMI_RANK"]) == victim:
        print(f"LEFT {victim} {time.time():.3f}", flush=True)
        sys.exit(1)
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


def spawned_victim(i, started):
    # mp.spawn without MPI: process 1 raises, process 0 would run for a minute
    if i == 1:
        time.sleep(0.5)
        print(f"LEFT 1 {time.time():.3f}", flush=True)
        raise ValueError("boom in spawned process 1")
    time.sleep(60)


def plain_spawn(which):
    mp = __import__(f"{which}.multiprocessing", fromlist=["spawn"])
    try:
        # what mp.spawn does, with fork (a fresh interpreter per process is slow here)
        mp.start_processes(spawned_victim, args=(time.time(),), nprocs=2,
                           start_method="fork")
    except Exception as e:  # noqa: BLE001 - reported for the test to compare
        first = str(e).strip().splitlines()[0]
        print(f"SPAWN {type(e).__name__} {time.time():.3f} index={e.error_index} "
              f"{first}", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "plain_spawn":
        plain_spawn(sys.argv[2])
        sys.exit(0)
    how, victim = sys.argv[1], int(sys.argv[2])
    if sys.argv[3:] == ["spawn"]:
        import ember.multiprocessing as mp
        mp.spawn(main, args=(how, victim), nprocs=int(os.environ["WORLD_SIZE"]))
    else:
        main(None, how, victim)
