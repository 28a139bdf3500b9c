"""The one error family labkit raises.

Every message says what happened, why, and how to fix it, naming the argument, path or port involved.
Subclasses also derive from the matching built-in (``ValueError``, ``OSError``…) so callers that already
catch those keep working.
"""

from __future__ import annotations

__all__ = ["LabkitError", "BadInputError", "ResultsError", "ServiceError", "ProbeUnavailable", "ResultsWarning",
           "NotebookError", "BaselineError"]


class LabkitError(Exception):
    """Base class: something labkit cannot do, with what to do about it in the message."""


class BadInputError(LabkitError, ValueError):
    """An argument is of the wrong type or out of range."""


class ResultsError(LabkitError, OSError):
    """A results file or folder cannot be read or written."""


class ServiceError(LabkitError, RuntimeError):
    """A toyshop process failed to start, answer, or stop."""


class ProbeUnavailable(LabkitError):
    """A measurement cannot be taken on this machine (missing feature, permission, or package)."""


class ResultsWarning(UserWarning):
    """A saved result that could not be read was skipped (the message names the file and why); the rest loaded."""


class NotebookError(LabkitError, RuntimeError):
    """A notebook failed while running (a cell raised, the kernel died), or cannot be turned into a report."""


class BaselineError(BadInputError):
    """A report's ``--baseline`` cannot stand for this run (another notebook, a failed run, other parameters)."""
