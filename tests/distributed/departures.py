"""Run under mpiexec, ember.distributed.run, or through mp.spawn under the launcher: one
rank leaves while the others keep calling all_reduce. ``departures.py HOW VICTIM
[spawn]``; HOW is exit (sys.exit(1)), return, raise, kill (SIGKILL), os_exit
(os._exit(3)), stall (stops calling collectives; the group's timeout is 3 s) or
before_init (exits before init_process_group; the timeout is 3 s). The other cases
keep the default 30-minute timeout.

The victim reports ``LEFT <rank> <time>`` just before it leaves, each other rank
``RAISED <rank> <time> <error>`` when its all_reduce raises: on stdout, and as a line of
its own file in ``$DEPARTURES_REPORT`` (a folder), since mpiexec may interleave the
lines of ranks that print at the same moment."""
import os
import signal
import sys
import time
from datetime import timedelta

import ember
import ember.distributed as dist


def report(line):
    print(line, flush=True)
    folder = os.environ.get("DEPARTURES_REPORT")
    if folder:
        with open(os.path.join(folder, f"{os.getpid()}.txt"), "a") as f:
            f.write(line + "\n")


def main(rank_from_spawn=None, how=None, victim=None):
    if how == "before_init" and int(os.environ["PMI_RANK"]) == victim:
        report(f"LEFT {victim} {time.time():.3f}")
        sys.exit(1)
    # the default timeout (30 minutes) unless the case is about the timeout: a rank that
    # left must be noticed without it
    timeout = timedelta(seconds=3) if how in ("stall", "before_init") else None
    dist.init_process_group("gloo", timeout=timeout)
    r = dist.get_rank()
    assert rank_from_spawn in (None, r)
    t = ember.ones(4)
    try:
        for step in range(6):
            if step == 3 and r == victim:
                report(f"LEFT {r} {time.time():.3f}")
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
        report(f"RAISED {r} {time.time():.3f} {type(e).__name__}: {e}")
        raise
    report(f"FINISHED {r}")


def spawned_victim(i, started):
    # mp.spawn without MPI: process 1 raises, process 0 would run for a minute
    if i == 1:
        time.sleep(0.5)
        report(f"LEFT 1 {time.time():.3f}")
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
        report(f"SPAWN {type(e).__name__} {time.time():.3f} index={e.error_index} {first}")


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
