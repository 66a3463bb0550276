"""Exceptions of the Python API. ModelLoadError comes from the native loader."""
from kazeia._native import ModelLoadError  # noqa: F401  (re-exported)


class ConversionError(ValueError):
    """A checkpoint folder that cannot be converted: missing file, unknown or missing tensor, bad shape."""


class PullError(ValueError):
    """`kazeia pull` could not fetch, verify, convert or register a model: one line that says why."""


class PullCancelled(Exception):
    """A pull stopped because its caller set the cancel event; nothing was registered."""
