"""Exceptions of the Python API. ModelLoadError comes from the native loader."""
from kazeia._native import ModelLoadError  # noqa: F401  (re-exported)


class ConversionError(ValueError):
    """A checkpoint folder that cannot be converted: missing file, unknown or missing tensor, bad shape."""
