"""A rank that leaves (sys.exit, returning early, an exception, SIGKILL, os._exit) or
stops calling collectives makes the other ranks raise within seconds, naming it and the
collective, under a real ``mpiexec`` (2 and 3 processes), ``ember.distributed.run`` and
``mp.spawn`` under it. tests/distributed/departures.py prints when its victim leaves
and when each other rank raises; these tests print the time between the two.

Every run has a subprocess timeout: a hang (PyTorch's gloo raises in under a second;
ember used to wait out the 30 minute process-group timeout) fails the test.
"""
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from ember.distributed._launch_env import mpiexec_path

ROOT = Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "distributed"

LIMIT_S = 10.0  # the others must raise this soon after the victim left


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env["OMP_NUM_THREADS"] = "1"
    return env


def _run(cmd):
    """The exit status, the output, and the report lines of every process."""
    with tempfile.TemporaryDirectory() as folder:
        env = _env()
        env["DEPARTURES_REPORT"] = folder
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=90, env=env,
                           cwd=str(ROOT))
        report = "".join(Path(folder, name).read_text() for name in sorted(os.listdir(folder)))
    return p.returncode, p.stdout + p.stderr + "\n-- reports:\n" + report


def _mpiexec(n, how, victim):
    return _run([mpiexec_path(), "-n", str(n), sys.executable,
                 str(PROGS / "departures.py"), how, str(victim)])


def _launcher(n, how, victim, *extra):
    return _run([sys.executable, "-m", "ember.distributed.run", "--nproc-per-node", str(n),
                 str(PROGS / "departures.py"), how, str(victim), *extra])


def _check(label, n, victim, rc, out, expect):
    """Every rank but the victim raised ``expect`` (a format with {r}, the raising rank)
    soon after the victim left, and named no other rank."""
    assert rc != 0 and "FINISHED" not in out, out
    reports = out.split("\n-- reports:\n")[1]
    left = re.findall(rf"^LEFT {victim} ([\d.]+)$", reports, re.M)
    assert len(left) == 1, out
    raised = {int(r): (float(t), msg) for r, t, msg in
              re.findall(r"^RAISED (\d+) ([\d.]+) (.*)$", reports, re.M)}
    assert sorted(raised) == [r for r in range(n) if r != victim], out
    for r, (t, msg) in raised.items():
        assert expect.format(r=r) in msg, msg
        # "on rank R (pid P)" is the rank that raises; any other rank named is blamed
        blamed = set(re.findall(r"(?<!on )rank (\d+) \(pid", msg)) | set(
            re.findall(r"missing ranks? \[(\d+)\]", msg))
        assert blamed == {str(victim)}, msg
        took = t - float(left[0])
        print(f"{label}: rank {r} raised {took:.2f} s after rank {victim} left")
        assert 0 <= took <= LIMIT_S, (took, out)


def _check_left(label, n, victim, rc, out, why):
    # the victim's pid differs per run: the parts around it
    _check(label, n, victim, rc, out,
           "DistError: all_reduce (collective #4 of the default group) cannot complete on "
           f"rank {{r}}: rank {victim} (pid ")
    _check(label + " (reason)", n, victim, rc, out,
           f"left after collective #3 and will never join it: it {why}")


def test_rank_that_calls_sys_exit():
    rc, out = _mpiexec(2, "exit", 1)
    _check_left("mpiexec -n 2, sys.exit(1)", 2, 1, rc, out,
                "exited (sys.exit, or the end of its program)")


def test_rank_that_returns_early():
    rc, out = _mpiexec(2, "return", 0)
    _check_left("mpiexec -n 2, return", 2, 0, rc, out,
                "exited (sys.exit, or the end of its program)")


def test_rank_that_raises_three_ranks():
    rc, out = _mpiexec(3, "raise", 1)
    assert "ValueError: boom on the victim" in out, out
    _check_left("mpiexec -n 3, raise", 3, 1, rc, out,
                "raised ValueError: boom on the victim")


def test_rank_killed_by_sigkill_three_ranks():
    rc, out = _mpiexec(3, "kill", 2)
    assert re.search(r"ember.distributed: rank 2 \(pid \d+ on .*\) was killed by SIGKILL",
                     out), out
    _check("mpiexec -n 3, SIGKILL", 3, 2, rc, out,
           "DistError: all_reduce (collective #4 of the default group) cannot complete on "
           "rank {r}: rank 2 (pid ")
    _check("mpiexec -n 3, SIGKILL (reason)", 3, 2, rc, out,
           "died (process gone) while this rank waited for it")


def test_rank_that_stops_calling_collectives_times_out_three_ranks():
    rc, out = _mpiexec(3, "stall", 2)
    _check("mpiexec -n 3, stall (timeout 3 s)", 3, 2, rc, out,
           "DistTimeoutError: all_reduce timed out after 0:00:03 on rank {r}")
    _check("mpiexec -n 3, stall (timeout 3 s) (reason)", 3, 2, rc, out,
           "missing rank [2] never reached it (collective #4 of this group)")


def test_launcher_rank_that_calls_os_exit():
    rc, out = _launcher(2, "os_exit", 1)
    assert re.search(r"ember.distributed.run: rank 1 \(pid \d+ on .*\) exited with status "
                     r"3 without leaving its process group", out), out
    _check("ember.distributed.run, os._exit(3)", 2, 1, rc, out,
           "DistError: all_reduce (collective #4 of the default group) cannot complete on "
           "rank {r}: rank 1 (pid ")


def test_spawn_under_the_launcher_rank_that_raises():
    rc, out = _launcher(2, "raise", 0, "spawn")
    _check_left("mp.spawn under ember.distributed.run, raise", 2, 0, rc, out,
                "raised ValueError: boom on the victim")
    # the supervisor of a rank that left through ember's exit does not call it dead
    assert "without leaving" not in out and "killed" not in out, out


def test_rank_that_exits_before_init_process_group():
    # starting MPI waits for every process and cannot time out: the rank's supervisor
    # stops it after the group's timeout (3 s) with an error
    for rc, out in (_mpiexec(2, "before_init", 1), _launcher(2, "before_init", 1)):
        assert rc != 0, out
        assert re.search(r"init_process_group timed out after 0:00:03 on rank 0 \(pid \d+\): "
                         r"MPI did not start, because not every process of the job started "
                         r"it", out), out


def _spawn_without_mpi(which):
    rc, out = _run([sys.executable, str(PROGS / "departures.py"), "plain_spawn", which])
    assert rc == 0, out
    reports = out.split("\n-- reports:\n")[1]
    left = float(re.search(r"^LEFT 1 ([\d.]+)$", reports, re.M).group(1))
    kind, t, rest = re.search(r"^SPAWN (\w+) ([\d.]+) (.*)$", reports, re.M).groups()
    return kind, float(t) - left, rest


def test_spawn_without_mpi_stops_the_others_when_one_raises():
    # the other process would run for a minute: spawn stops it and raises at once
    kind, took, rest = _spawn_without_mpi("ember")
    print(f"mp.spawn without MPI, raise: spawn raised {took:.2f} s after process 1 left")
    assert (kind, rest) == _spawn_without_mpi("torch")[::2], (kind, rest)
    assert took <= LIMIT_S, took
