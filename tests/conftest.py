import compileall
import re
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))


def _compile_sources():
    """Write the bytecode of ember and of the tests' helper modules before anything
    imports them.

    Where PYTHONDONTWRITEBYTECODE is set (as on the two-core test machine), no process
    writes a ``.pyc``, and every process that imports ember (each xdist worker and every
    child the tests start: programs, launchers, MPI ranks, import checks) compiled its
    4.8 MB of source again: 0.8 s of CPU of the 1.25 s an ``import ember`` took. Python
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
