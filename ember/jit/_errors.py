"""Errors of ember's TorchScript loader and interpreter."""

__all__ = ["ScriptSafetyError", "ScriptError", "ArchiveError"]


class ScriptSafetyError(RuntimeError):
    """TorchScript code or pickle uses something outside ember's allowlist; nothing ran."""


class ScriptError(RuntimeError):
    """TorchScript code is malformed or uses an unsupported construct."""


class ArchiveError(RuntimeError):
    """A TorchScript archive is damaged; the message names the damaged part."""
