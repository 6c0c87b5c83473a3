"""``python -m ember.distributed.run``: torchrun's interface, on ``mpiexec``.

    python -m ember.distributed.run --nproc-per-node 4 train.py --epochs 3
    python -m ember.distributed.run --nnodes 2 --nproc-per-node 4 --hostfile hosts train.py

starts ``nnodes * nproc_per_node`` processes through ``mpiexec`` (MPICH's, or Open
MPI's) and sets ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``,
``GROUP_RANK``, ``MASTER_ADDR``, ``MASTER_PORT`` and ``TORCHELASTIC_RUN_ID`` in each, as
torchrun does. Each process runs under a small supervisor (``ember.distributed._agent``)
that reports a rank that dies, and keeps the job alive for a moment so that the other
ranks notice it and stop with an error naming it. Under ``python -m ember run``,
``torch.distributed.run`` is this module, and the workers run under ember too.
"""
import argparse
import os
import subprocess
import sys
import uuid

from ember.distributed._launch_env import mpiexec_command

__all__ = ["main", "get_args_parser", "parse_args", "run"]


def get_args_parser():
    """The argument parser (torchrun's options; the elastic ones are accepted and
    ignored where MPI has no counterpart)."""
    p = argparse.ArgumentParser(prog="python -m ember.distributed.run",
                                description="Start a distributed ember program on MPI.")
    p.add_argument("--nnodes", type=str, default="1",
                   help="number of hosts (MIN:MAX is read as MAX)")
    p.add_argument("--nproc-per-node", "--nproc_per_node", type=str, default="1",
                   help="processes per host (an integer, or 'cpu'/'auto' for one per core)")
    p.add_argument("--hostfile", "--host-file", type=str, default=None,
                   help="MPI host file: one host per line (MPICH's 'host:slots')")
    p.add_argument("--node-rank", "--node_rank", type=int, default=0)
    p.add_argument("--master-addr", "--master_addr", type=str, default="127.0.0.1")
    p.add_argument("--master-port", "--master_port", type=int, default=29500)
    p.add_argument("--standalone", action="store_true")
    for name in ("--rdzv-backend", "--rdzv-endpoint", "--rdzv-id", "--rdzv-conf",
                 "--max-restarts", "--monitor-interval", "--start-method", "--role",
                 "--log-dir", "--redirects", "--tee", "--local-addr"):
        p.add_argument(name, name.replace("-", "_").replace("__", "--"), type=str,
                       default=None, help=argparse.SUPPRESS)
    p.add_argument("-m", "--module", action="store_true",
                   help="run the script as a module (python -m)")
    p.add_argument("--no-python", "--no_python", action="store_true",
                   help="run the script as an executable, without python")
    p.add_argument("--mpiexec-arg", action="append", default=[],
                   help="one more argument for mpiexec (repeatable)")
    p.add_argument("training_script")
    p.add_argument("training_script_args", nargs=argparse.REMAINDER)
    return p


def parse_args(args=None):
    return get_args_parser().parse_args(args)


def _under_ember_alias():
    """Whether ``python -m ember run`` serves ``import torch`` in this process."""
    from ember.compat import TorchAliasFinder
    return any(isinstance(f, TorchAliasFinder) for f in sys.meta_path)


def _nproc(value):
    if value in ("cpu", "auto", "gpu"):
        return os.cpu_count() or 1
    return int(value)


def build_command(ns):
    """The full ``mpiexec ...`` command line for the parsed arguments."""
    nnodes = int(str(ns.nnodes).split(":")[-1])
    per_node = _nproc(ns.nproc_per_node)
    if nnodes > 1 and not ns.hostfile:
        raise SystemExit("ember.distributed.run: --nnodes > 1 needs --hostfile (MPI starts "
                         "the processes on every host from one command)")
    cmd = mpiexec_command(nnodes * per_node, per_node if nnodes > 1 or ns.hostfile else None,
                          ns.hostfile)
    cmd += list(ns.mpiexec_arg)
    # the supervisor runs as a plain script: importing the ember package would cost every
    # rank a second of start-up for nothing
    agent = [sys.executable, os.path.join(os.path.dirname(__file__), "_agent.py"),
             "--nnodes", str(nnodes),
             "--master-addr", ns.master_addr, "--master-port", str(ns.master_port),
             "--run-id", str(ns.rdzv_id or uuid.uuid4().hex[:12]), "--"]
    if ns.no_python:
        prog = [ns.training_script]
    else:
        prog = [sys.executable]
        if _under_ember_alias():
            prog += ["-m", "ember", "run"]
        prog += (["-m"] if ns.module else []) + [ns.training_script]
    return cmd + agent + prog + list(ns.training_script_args)


def run(ns):
    """Start the job and wait for it; mpiexec's exit status."""
    cmd = build_command(ns)
    try:
        return subprocess.call(cmd)
    except KeyboardInterrupt:
        return 130


def main(args=None):
    """The command line entry point."""
    ns = parse_args(args)
    rc = run(ns)
    if rc:
        sys.stderr.write(f"ember.distributed.run: the job failed (exit status {rc})\n")
    sys.exit(rc)


if __name__ == "__main__":
    main()
