"""Where to find ``mpiexec`` and how to call it, shared by the launcher and the tests."""
import os
import shutil
import subprocess
import sys

from ember.distributed._mpi import INSTALL_HINT


def mpiexec_path():
    """``$EMBER_MPIEXEC``, else the ``mpiexec`` next to this Python (the mpich wheel puts it
    there), else the one on ``PATH``."""
    env = os.environ.get("EMBER_MPIEXEC")
    if env:
        return env
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.path.exists(here):
        return here
    found = shutil.which("mpiexec")
    if found:
        return found
    raise FileNotFoundError(f"mpiexec was not found next to {sys.executable} nor on PATH: "
                            f"{INSTALL_HINT} installs MPICH's (or set EMBER_MPIEXEC)")


def flavor(mpiexec):
    """``"hydra"`` (MPICH), ``"openmpi"`` or ``"unknown"``."""
    try:
        out = subprocess.run([mpiexec, "--version"], capture_output=True, text=True,
                             timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    if "HYDRA" in out or "MPICH" in out:
        return "hydra"
    if "Open MPI" in out or "OpenRTE" in out or "PRRTE" in out:
        return "openmpi"
    return "unknown"


def mpiexec_command(nprocs, nproc_per_node=None, hostfile=None, mpiexec=None):
    """The ``mpiexec ...`` prefix that starts ``nprocs`` processes, ``nproc_per_node`` per
    host from ``hostfile`` (or all on this host). On one host, MPICH's launcher is told to
    fork the processes itself (no ssh, which sandboxes and containers often lack)."""
    mpiexec = mpiexec or mpiexec_path()
    kind = flavor(mpiexec)
    cmd = [mpiexec]
    if kind == "openmpi":
        if hostfile:
            cmd += ["--hostfile", hostfile]
        else:
            cmd += ["--oversubscribe"]
        if nproc_per_node:
            cmd += ["--map-by", f"ppr:{nproc_per_node}:node"]
        return cmd + ["-n", str(nprocs)]
    if hostfile:
        cmd += ["-f", hostfile]
    else:
        cmd += ["-launcher", "fork"]
    if nproc_per_node:
        cmd += ["-ppn", str(nproc_per_node)]
    return cmd + ["-n", str(nprocs)]
