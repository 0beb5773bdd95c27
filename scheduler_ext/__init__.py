"""scheduler-ext: a nova scheduler extension with a same-host resize strategy."""

__all__ = ["__version__"]

__version__ = "0.1.0"
