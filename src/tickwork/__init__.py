"""tickwork: a distributed job scheduler for Python."""

from tickwork.errors import Cancel, Fail, Success, TickworkError

__all__ = ["Cancel", "Fail", "Success", "TickworkError"]
__version__ = "0.1.0"
