"""``torch._logging``'s switches for ember.compile: which compile events are logged.

``set_logs(recompiles=True)`` (or ``TORCH_LOGS=recompiles`` in the environment, read
at import) logs why a compiled function captured its graph again; ``graph_breaks``
logs each graph break with its reason and the user's line; ``perf_hints`` logs where a
compiled graph runs slower than its plan (no array plan, ``create_graph`` run eagerly,
an optimizer step done eagerly). Messages go to the
``ember._dynamo`` logger, which writes to stderr when a switch is on.
"""
import logging
import os
import sys

__all__ = ["set_logs"]

_log = logging.getLogger("ember._dynamo")
_enabled = {"recompiles": False, "graph_breaks": False, "perf_hints": False}
_handler = None


def _ensure_handler():
    global _handler
    if _handler is None:
        _handler = logging.StreamHandler(sys.stderr)
        _handler.setFormatter(logging.Formatter("[ember._dynamo] %(message)s"))
        _log.addHandler(_handler)
        _log.setLevel(logging.DEBUG)
        _log.propagate = False


def set_logs(*, recompiles=None, graph_breaks=None, perf_hints=None, **others):
    """Turn compile logging on or off (``torch._logging.set_logs``'s shape). Other
    torch switches are accepted and ignored (ember has no such component)."""
    if recompiles is not None:
        _enabled["recompiles"] = bool(recompiles)
    if graph_breaks is not None:
        _enabled["graph_breaks"] = bool(graph_breaks)
    if perf_hints is not None:
        _enabled["perf_hints"] = bool(perf_hints)
    if any(_enabled.values()):
        _ensure_handler()


def enabled(name):
    """True when the ``name`` switch is on."""
    return _enabled.get(name, False)


def log(name, msg):
    """Log ``msg`` under switch ``name`` when it is on."""
    if _enabled.get(name):
        _ensure_handler()
        _log.info(msg)


def _from_env():
    spec = os.environ.get("TORCH_LOGS", "")
    names = {s.strip().lstrip("+-") for s in spec.split(",") if s.strip()}
    set_logs(recompiles=True if "recompiles" in names else None,
             graph_breaks=True if "graph_breaks" in names else None,
             perf_hints=True if "perf_hints" in names else None)


_from_env()
