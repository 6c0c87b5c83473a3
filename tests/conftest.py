import compileall
import re
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))


def _compile_sources():
    """Write the bytecode of ember and of the tests' helper modules before anything
    imports them.

    Where PYTHONDONTWRITEBYTECODE is set (as on the two-core test machine), no process
    writes a ``.pyc``, and every process that imports ember (each xdist worker and every
    child the tests start: programs, launchers, MPI ranks, import checks) compiled its
    4.8 MB of source again (until a child started without the variable happened to
    write them): 0.8 s of CPU of the 1.25 s an ``import ember`` took. Python
    reads a ``.pyc`` whatever that variable says, so writing them once here (to the
    ``__pycache__`` folders Python itself uses, ignored by git; up-to-date files are only
    checked) saves that in every process. A read-only tree is left as it is.
    """
    quiet = 2  # a folder that cannot be written is not an error
    compileall.compile_dir(HERE.parent / "ember", quiet=quiet)
    # test modules are compiled by pytest's assertion rewriting, not from these files
    compileall.compile_dir(HERE, quiet=quiet, rx=re.compile(r"[/\\]test_[^/\\]*\.py$"))


_compile_sources()

import oracle  # noqa: E402

from ember.backend import threads as _threads  # noqa: E402

# The tests choose their arrays' sizes by the pool's nominal bounds for a split; a new
# pool would scale them to the machine's dispatch time (threads.scale_bounds), which
# tests/test_threads_dispatch.py checks itself.
_threads.scale_bounds(1.0)
# And they assert the splits ember makes: each kernel that may split takes the fixed
# rules' route (the pool's split wherever it may), not the route measured fastest on
# this machine at that moment (thread_routes); tests/test_thread_routes.py measures.
_threads._state["routes"] = "static"
# (and every block of a split on the thread it was given to: a caller done first does
# not take back its worker's block, tests/test_pool_take_back.py checks that it does)
_threads.Pool.steal = False



def _running_test_case_fn():
    """The test function of the ``unittest.TestCase`` running up the stack, or None: what
    torch's ``extract_test_fn`` answers, found by following ``f_back`` instead of
    ``inspect.stack()``, which reads every frame's source lines. OpInfo's sample
    iterators ask it for every ``op.sample_inputs``/``reference_inputs`` call (to seed
    the stream and to record the sample being tried); under pytest's deep stack each
    answer took about 40 ms of CPU, as long as the op's comparison itself."""
    try:
        frame = sys._getframe(1)
        while frame is not None:
            owner = frame.f_locals.get("self")
            if isinstance(owner, unittest.TestCase):
                *_, cls_name, test_name = owner.id().rsplit(".", 2)
                if cls_name == type(owner).__name__ and test_name.startswith("test"):
                    return getattr(owner, test_name).__func__
            frame = frame.f_back
    except Exception:  # noqa: BLE001 - as torch's: no answer is None
        pass
    return None


def pytest_collection_finish(session):
    # only where the test modules imported OpInfo (importing it here would run its
    # import-time settings in runs that never use it)
    for name in ("torch.testing._internal.common_utils",
                 "torch.testing._internal.opinfo.core"):
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "extract_test_fn"):
            module.extract_test_fn = _running_test_case_fn


# Report how many values the suite compared with torch (summed over xdist workers).


def pytest_sessionfinish(session):
    out = getattr(session.config, "workeroutput", None)
    if out is not None:
        out["oracle_comparisons"] = oracle.COMPARISONS[0]


try:
    import xdist  # noqa: F401

    def pytest_testnodedown(node, error):
        out = getattr(node, "workeroutput", {}) or {}
        node.config._oracle_total = getattr(node.config, "_oracle_total", 0) + \
            out.get("oracle_comparisons", 0)
except ImportError:
    pass


def pytest_terminal_summary(terminalreporter, config):
    total = getattr(config, "_oracle_total", 0) + oracle.COMPARISONS[0]
    terminalreporter.write_line(f"oracle: {total} comparisons of ember's results with torch's")
