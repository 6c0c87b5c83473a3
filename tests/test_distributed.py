"""ember.distributed and DistributedDataParallel under a real ``mpiexec`` (MPICH from
the ``mpich`` wheel): the programs in tests/distributed/ run on 2 (and 4) processes and
check themselves against torch; these tests start them and read what they report.

MPI must be installed (it is part of the test extra): these tests fail, never skip,
without it. Every run has a timeout, so a hang fails instead of blocking the suite.
"""
import os
import subprocess
import sys
import uuid
from pathlib import Path

import ember
from ember.distributed._launch_env import mpiexec_command, mpiexec_path

ROOT = Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "distributed"


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env["OMP_NUM_THREADS"] = "1"
    env["CKPT_ID"] = uuid.uuid4().hex
    return env


def _run(cmd, timeout=240):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_env(),
                       cwd=str(ROOT))
    return p.returncode, p.stdout + p.stderr, None


def _mpi(n, prog, *args, plain=False, timeout=240):
    # plain: exactly ``mpiexec -n N python prog.py`` (what users type)
    prefix = [mpiexec_path(), "-n", str(n)] if plain else mpiexec_command(n)
    return _run(prefix + [sys.executable, str(PROGS / prog), *args], timeout)


def _launch(n, prog, *args, timeout=240):
    return _run([sys.executable, "-m", "ember.distributed.run", "--nproc-per-node", str(n),
                 str(PROGS / prog), *args], timeout)


def test_collectives_p2p_objects_groups_errors_ddp_on_two_ranks():
    rc, out, _ = _mpi(2, "collectives.py", "reductions", "movement", "async_p2p_objects",
                      "groups", "mismatch", "ddp_details")
    assert rc == 0, out
    for name in ("reductions", "movement", "async_p2p_objects", "groups", "mismatch",
                 "ddp_details"):
        assert f"OK {name}" in out, out
    # the backend substitution is said once, by rank 0
    assert out.count("backend 'gloo' runs on MPI") == 1, out


def test_ddp_equals_one_process_and_torch_two_ranks():
    # plain ``mpiexec -n 2 python prog.py``: no launcher options needed
    rc, out, _ = _mpi(2, "ddp_equality.py", plain=True)
    assert rc == 0, out
    for name in ("mlp_world2", "mlp_no_sync_world2", "cnn_world2", "cnn_no_sync_world2"):
        assert f"OK {name} " in out, out


def test_ddp_equals_one_process_four_ranks():
    rc, out, _ = _mpi(4, "ddp_equality.py", "mlp", "cnn", "--no-torch")
    assert rc == 0, out
    for name in ("mlp_world4", "mlp_no_sync_world4", "cnn_world4", "cnn_no_sync_world4"):
        assert f"OK {name} " in out, out
    assert "OK subgroup_world4" in out, out


def test_launcher_sets_torchrun_environment():
    rc, out, _ = _launch(2, "faults.py", "env", "60")
    assert rc == 0, out
    for r in (0, 1):
        assert f"ENV rank {r}: RANK={r} LOCAL_RANK={r} WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 " \
               "MASTER_ADDR=127.0.0.1 MASTER_PORT=29500" in out, out


def test_killed_rank_stops_the_others_with_an_error_naming_it():
    rc, out, _ = _launch(2, "faults.py", "kill", "30")
    assert rc != 0, out
    assert "rank 1 (pid" in out and "was killed by SIGKILL" in out, out
    # rank 0 notices the dead peer itself (its 30 s timeout would say "timed out")
    assert "DistError: all_reduce (collective #2 of the default group) cannot complete on " \
           "rank 0: rank 1 (pid" in out and "died" in out, out
    assert "finished" not in out, out


def test_killed_rank_under_plain_mpiexec_does_not_hang():
    # init_process_group leaves a supervisor behind as mpiexec's child, which reports
    # the death and keeps the job up while rank 0 reports it too; the subprocess
    # timeout would catch a hang
    rc, out, _ = _mpi(2, "faults.py", "kill", "30", plain=True)
    assert rc != 0 and "finished" not in out, out
    assert "ember.distributed: rank 1 (pid" in out and "was killed by SIGKILL" in out, out
    assert "DistError: all_reduce (collective #2 of the default group) cannot complete on " \
           "rank 0: rank 1 (pid" in out and "died" in out, out


def test_missing_rank_times_out_naming_collective_and_rank():
    rc, out, _ = _mpi(2, "faults.py", "late", "2")
    assert rc != 0, out
    assert "DistTimeoutError: all_reduce timed out after 0:00:02 on rank 0" in out, out
    assert "missing rank [1] never reached it" in out, out


def test_rank_missing_at_init_times_out():
    rc, out, _ = _mpi(2, "faults.py", "late_init", "2")
    assert rc != 0, out
    assert "DistTimeoutError: init_process_group timed out after 0:00:02 on rank 0: not " \
           "all of the 2 ranks called it" in out, out


def test_without_mpi_a_clear_error(monkeypatch):
    import ember.distributed._mpi as m
    monkeypatch.setattr(m, "_MPI", None)
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    try:
        m.mpi()
    except ImportError as e:
        assert "pip install -e '.[distributed]'" in str(e)
    else:
        raise AssertionError("no ImportError")


def test_import_does_not_start_mpi():
    code = "import ember, ember.distributed as d, sys; print(d.is_available(), " \
           "'mpi4py.MPI' in sys.modules, d.is_initialized())"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=_env(), timeout=120)
    assert p.stdout.split() == ["True", "False", "False"], p.stdout + p.stderr


def test_collective_before_init_is_loud():
    import pytest
    with pytest.raises(ValueError, match="init_process_group"):
        ember.distributed.all_reduce(ember.ones(2))
    with pytest.raises(ValueError, match="init_process_group"):
        ember.distributed.get_world_size()


def _ember_torchrun(n, *args, timeout=240):
    return _run([sys.executable, "-m", "ember", "run", "-m", "torch.distributed.run",
                 "--nproc-per-node", str(n), str(PROGS / "torchrun_program.py"), *args],
                timeout)


def test_torch_program_under_ember_run_with_snapshot_resume(tmp_path):
    snap = str(tmp_path / "snapshot.pt")
    rc, out, _ = _ember_torchrun(2, "torchrun", snap, "2")
    assert rc == 0, out
    assert "[rank 0] done epochs 0..2" in out and "[rank 1] done epochs 0..2" in out, out
    rc, out, _ = _ember_torchrun(2, "torchrun", snap, "3")
    assert rc == 0, out
    for r in (0, 1):
        assert f"[rank {r}] resumed at epoch 2" in out and f"[rank {r}] done epochs 2..3" \
            in out, out


def test_spawn_tutorial_pattern_under_the_launcher():
    rc, out, _ = _ember_torchrun(2, "spawn")
    assert rc == 0, out
    assert "spawned rank 0: [1.0, 1.0]" in out and "spawned rank 1: [1.0, 1.0]" in out, out


def test_spawn_without_the_launcher_names_the_launcher_command():
    rc, out, _ = _run([sys.executable, "-m", "ember", "run",
                       str(PROGS / "torchrun_program.py"), "spawn"], timeout=240)
    assert rc != 0, out
    assert "python -m ember run -m torch.distributed.run --nproc-per-node 2 " \
           "torchrun_program.py" in out, out


def test_launcher_command_for_several_hosts(tmp_path):
    from ember.distributed import run
    hosts = tmp_path / "hosts"
    hosts.write_text("node1:4\nnode2:4\n")
    cmd = run.build_command(run.parse_args(["--nnodes", "2", "--nproc-per-node", "4",
                                            "--hostfile", str(hosts), "train.py", "--lr",
                                            "0.1"]))
    assert cmd[:7] == [mpiexec_path(), "-f", str(hosts), "-ppn", "4", "-n", "8"], cmd
    assert cmd[-3:] == ["train.py", "--lr", "0.1"] and "_agent.py" in cmd[8], cmd
    one = run.build_command(run.parse_args(["--nproc-per-node", "2", "t.py"]))
    assert one[:5] == [mpiexec_path(), "-launcher", "fork", "-n", "2"], one
    import pytest
    with pytest.raises(SystemExit, match="needs --hostfile"):
        run.build_command(run.parse_args(["--nnodes", "2", "t.py"]))
