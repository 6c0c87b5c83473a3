import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

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
