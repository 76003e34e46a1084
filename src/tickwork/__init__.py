"""tickwork: a distributed job scheduler for Python."""

from tickwork.errors import TickworkError
from tickwork.outcomes import Cancel, Fail, Success
from tickwork.registry import job

__all__ = ["Cancel", "Fail", "Success", "TickworkError", "job"]
__version__ = "0.1.0"
