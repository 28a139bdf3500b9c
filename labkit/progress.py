"""When a progress bar shows — one rule for every long-running helper — and the bar over a helper's steps.

Every helper that can take long takes ``progress: bool | None = None``: ``True`` or ``False`` is obeyed;
``None`` (the default) shows a bar only inside a Jupyter kernel (a script or a test stays quiet) and, when the
helper can tell how long the work should take, only if that is over :data:`QUICK_S` seconds (a bar that
flashes by is noise). The bars are ``tqdm.auto``: a widget in Jupyter, text on stderr in a terminal — and text
on the kernel's own stderr inside a ``labkit report`` run (``PERFLAB_PROGRESS_TO=stderr``), whose terminal shows
it where nobody would see the widget.
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["QUICK_S", "in_notebook", "show_progress", "steps_bar"]

#: work expected to take less than this many seconds shows no bar by default
QUICK_S = 2.0


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (ipykernel is loaded)."""
    return "ipykernel" in sys.modules


def show_progress(progress: bool | None, *, expected_s: float | None = None) -> bool:
    """Apply the progress rule: ``progress`` when given, else inside a notebook and not expected to be quick.

    Args:
        progress: the caller's ``progress=`` argument (True, False or None).
        expected_s: how long the work should take, when the helper can tell (e.g. rounds × a round's time).
    """
    if progress is not None:
        return bool(progress)
    return in_notebook() and (expected_s is None or expected_s >= QUICK_S)


def steps_bar(progress: bool | None, total: int, desc: str, unit: str, *,
              expected_s: float | None = None) -> Any:
    """A tqdm bar over ``total`` steps when :func:`show_progress` says so, else None.

    Call ``bar.update()`` after each step and ``bar.close()`` at the end (both only when it is not None).
    """
    if os.environ.get("PERFLAB_PROGRESS_TO") == "stderr" and progress is not False:
        from tqdm import tqdm as text_bar

        return text_bar(total=total, desc=desc, unit=unit, leave=False, file=sys.__stderr__, mininterval=1.0)
    if not show_progress(progress, expected_s=expected_s):
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, leave=False)
