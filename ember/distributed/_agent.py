"""The supervisor that ``ember.distributed.run`` starts for each rank under ``mpiexec``.

It sets torchrun's environment variables from MPI's, starts the worker (which inherits
MPI's connection to the launcher) and waits for it. When the worker is killed, the
supervisor says which rank died and stays alive for a few seconds: mpiexec would
otherwise stop every other rank at once, before they could report which peer they lost.
Under a bare ``mpiexec``, ``init_process_group`` forks the same supervisor itself
(``ember.distributed._departures.supervise``).
"""
import argparse
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
from datetime import timedelta

STAY_S = 5.0  # how long a dead rank's supervisor waits for the others to report it


def _env(ns):
    env = dict(os.environ)
    get = env.get
    rank = get("PMI_RANK") or get("OMPI_COMM_WORLD_RANK") or "0"
    size = get("PMI_SIZE") or get("OMPI_COMM_WORLD_SIZE") or "1"
    local = get("MPI_LOCALRANKID") or get("OMPI_COMM_WORLD_LOCAL_RANK") or "0"
    local_size = get("MPI_LOCALNRANKS") or get("OMPI_COMM_WORLD_LOCAL_SIZE") or size
    env.update(RANK=rank, WORLD_SIZE=size, LOCAL_RANK=local, LOCAL_WORLD_SIZE=local_size,
               GROUP_RANK=str(int(rank) // max(int(local_size), 1)),
               GROUP_WORLD_SIZE=str(ns.nnodes), ROLE_RANK=rank, ROLE_WORLD_SIZE=size,
               ROLE_NAME="default", MASTER_ADDR=ns.master_addr,
               MASTER_PORT=str(ns.master_port), TORCHELASTIC_RUN_ID=ns.run_id,
               TORCHELASTIC_RESTART_COUNT="0", TORCHELASTIC_MAX_RESTARTS="0",
               # this agent is the rank's supervisor: init_process_group need not fork one
               EMBER_DIST_SUPERVISED="1")
    return env


def _wait(child, read, rank):
    """Wait for the worker; its exit status and what it wrote on the pipe. Starting MPI
    waits for every process of the job and cannot time out: the worker writes
    ``T<seconds>;`` (its init_process_group timeout) before, and ``M`` once MPI has
    started; past that timeout without ``M`` it is stopped with an error."""
    told = b""
    deadline = None
    while b"M" not in told:
        rc = child.poll()
        if rc is not None:
            break
        found = re.search(rb"T([0-9.]+);", told)
        if deadline is None and found:
            timeout = float(found.group(1))
            deadline = time.monotonic() + timeout
        if deadline is not None and time.monotonic() >= deadline:
            sys.stderr.write(f"ember.distributed.run: init_process_group timed out after "
                             f"{timedelta(seconds=timeout)} on rank {rank} (pid "
                             f"{child.pid}): MPI did not start, because not every process "
                             "of the job started it (one exited, or has not called "
                             "init_process_group)\n")
            sys.stderr.flush()
            child.kill()
            child.wait()
            return 1, told + b"L"
        if select.select([read], [], [], 0.2)[0]:
            more = os.read(read, 64)
            if not more:
                break  # the worker closed the pipe: it is exiting
            told += more
    rc = child.wait()
    os.set_blocking(read, False)
    try:
        told += os.read(read, 64)
    except OSError:
        pass
    return rc, told


def main(argv=None):
    p = argparse.ArgumentParser(prog="ember.distributed._agent")
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--master-addr", default="127.0.0.1")
    p.add_argument("--master-port", type=int, default=29500)
    p.add_argument("--run-id", default="none")
    p.add_argument("command", nargs=argparse.REMAINDER)
    ns = p.parse_args(argv)
    cmd = ns.command[1:] if ns.command[:1] == ["--"] else ns.command
    env = _env(ns)
    # the worker writes "J" here when it joins a process group and "L" when it leaves
    # through ember's exit (the other ranks then know); one that joined and vanished
    # without "L" has died
    read, write = os.pipe()
    os.set_inheritable(write, True)
    env["EMBER_DIST_EXIT_FD"] = str(write)
    # close_fds=False: the worker needs the file descriptor of MPI's launcher (PMI_FD)
    child = subprocess.Popen(cmd, env=env, close_fds=False)
    os.close(write)

    def forward(signum, frame):
        child.send_signal(signum)
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(s, forward)
    rc, told = _wait(child, read, env["RANK"])
    if b"J" not in told or b"L" in told:
        return rc  # it never joined a process group, or it left through ember's exit
    how = (f"was killed by {signal.Signals(-rc).name}" if rc < 0 else
           f"exited with status {rc} without leaving its process group")
    sys.stderr.write(f"ember.distributed.run: rank {env['RANK']} (pid {child.pid} on "
                     f"{socket.gethostname()}) {how}\n")
    sys.stderr.flush()
    time.sleep(STAY_S)  # the other ranks see the process gone and report it themselves
    return 128 - rc if rc < 0 else rc


if __name__ == "__main__":
    sys.exit(main())
