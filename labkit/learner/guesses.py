"""The learner's guesses: noted where they are written, shown beside the measurement, counted at the end.

Every lab asks for a guess before it measures (``my_guess_ms = None`` — a number the learner writes). Run
cell by cell, the learner fills it in, then runs the measurement. Run top to bottom (*Run All*, papermill),
every guess cell runs before anyone could write in it, and the whole point of the lab is lost without a word.
This module makes that visible, the same way in every lab:

    from labkit.learner import guesses
    my_guess_ms = None               # the learner's cell
    guesses.noted(my_guess_ms=my_guess_ms)

    print(guesses.beside(my_guess_ms, measured_ms, "ms"))   # "your guess 4 ms · measured 11.2 ms (2.8× your guess)"

    guesses.summary()                # the lab's last cell: how many predictions were written, how many skipped

    frame = guesses.against({"my_guess_ms": measured_ms}, units={"my_guess_ms": "ms"}, experiments=[my_exp])
    charts.guesses_chart(frame)      # each guess (and plan) beside what was measured: rendering lives in charts

How "run top to bottom" is told apart from "left empty on purpose": in a notebook, the time between the end
of the previous cell and the start of the guess cell. Nobody reads a cell, types a number and presses
Shift-Enter in under :data:`UNATTENDED_S`; Run All and papermill start the next cell within milliseconds. The
first skipped guess of an unattended run shows a loud banner (once per kernel); ``summary()`` repeats it with
the count. Outside IPython (a script), every guess counts as attended: nothing is there to measure the gap.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from labkit.errors import BadInputError
from labkit.progress import ipython

__all__ = ["UNATTENDED_S", "Guess", "Summary", "noted", "expects", "recorded", "beside", "against", "summary",
           "forget"]

#: a guess cell that starts less than this many seconds after the previous cell ended ran unattended
UNATTENDED_S = 1.0


@dataclass(frozen=True)
class Guess:
    """One guess as the lab saw it: its name, its value (None: skipped) and whether anyone was there to write it."""

    name: str
    value: Any
    attended: bool

    @property
    def skipped(self) -> bool:
        """True when the guess was left as ``None``."""
        return self.value is None


class _Book:
    """The guesses of this kernel and the cell timing that tells an unattended run (IPython's cell events)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.guesses: dict[str, Guess] = {}
        self.last_end: float | None = None      # when the previous cell finished
        self.cell_start: float | None = None    # when the running cell started
        self.bannered = False
        self.hooked = False

    def pre_run_cell(self, *_: Any) -> None:
        self.cell_start = self.clock()

    def post_run_cell(self, *_: Any) -> None:
        self.last_end = self.clock()

    def attended(self) -> bool:
        if not self.hooked or self.last_end is None or self.cell_start is None:
            return True  # no notebook, or the first cell run in this kernel: no gap to judge
        return self.cell_start - self.last_end >= UNATTENDED_S


_BOOK = _Book()


def _hook(book: _Book) -> None:
    """Listen to IPython's cell events, once per kernel (a re-import must not register twice)."""
    if book.hooked:
        return
    try:
        from IPython import get_ipython
    except ImportError:  # no IPython at all: a script
        return
    ip = get_ipython()
    if ip is None:
        return
    ip.events.register("pre_run_cell", book.pre_run_cell)
    ip.events.register("post_run_cell", book.post_run_cell)
    book.hooked = True
    book.cell_start = book.clock()  # the cell importing this module is running now


_BANNER = ("⚠ PREDICTIONS SKIPPED: this lab is running top to bottom (Run All, or papermill), so its guess cells "
           "ran before you could write in them. Every guess and hypothesis below will show as skipped, and the "
           "measurements will have nothing to prove or refute. To learn from the lab: Kernel → Restart, then run "
           "one cell at a time (Shift-Enter) and write each my_guess_… before running the cell after it.")


# (border and text, background) of a notice: an alarm (Run All skipped every prediction), or a reminder
_TONES = {"alarm": ("#cf222e", "#fff0f0"), "todo": ("#9a6700", "#fff8c5")}


def _html(text: str, tone: str = "alarm") -> str:
    from html import escape

    line, fill = _TONES[tone]
    return (f"<div style='border:3px solid {line};background:{fill};padding:8px;font-weight:bold;color:{line}'>"
            f"{escape(text)}</div>")


def notice(text: str, *, tone: str = "alarm") -> None:
    """Show *text* in a box in a notebook's output (``tone``: ``"alarm"`` red, ``"todo"`` amber), with the text
    form beside it for papermill logs and text exports; outside IPython, print it.

    A notice rather than a warning: JupyterLab draws anything on stderr red, as an error."""
    if ipython() is None:
        print(text)
        return
    from IPython.display import display

    display({"text/plain": text, "text/html": _html(text, tone)}, raw=True)


def _show(text: str, loud: bool) -> None:
    """Loud: a red box in a notebook; otherwise plain text."""
    if loud:
        notice(text)
    else:
        print(text)


class Summary(str):
    """The count of predictions, as text that a notebook shows once: a red box when the run was unattended."""

    loud: bool = False

    def __new__(cls, text: str, loud: bool = False) -> Summary:
        out = super().__new__(cls, text)
        out.loud = loud
        return out

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        from html import escape

        return _html(self) if self.loud else f"<p>{escape(self)}</p>"


# what a guess's name says it holds, by its ending (the labs' convention: my_guess_join_x, my_naive_ms …):
# (kind, words for the message). A name with none of these endings (a codec's name, a ranking) is not checked.
_ENDINGS: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (("_ratio",), "ratio", "a ratio (candidate time ÷ baseline time) is a number > 0: 0.5 is twice as fast, 1 no change"),
    (("_x", "_speedup"), "ratio", "a speed-up is a number > 0: 5 means five times faster, 0.8 a little slower"),
    (("_pct", "_percent"), "pct", "a percentage is a number from 0 to 100"),
    (("_share", "_fraction"), "share", "a share is a fraction from 0 to 1: 0.05 for 5 %"),
    (("_ns", "_us", "_ms", "_s"), "time", "a time is a number > 0 in the unit the name ends with"),
    (("_rps", "_hz"), "time", "a rate is a number > 0 (requests per second)"),
    (("_queries", "_calls", "_trips", "_resizes", "_holds", "_lines", "_count", "_overlapped", "_in_flight", "_pool"),
     "count", "a count is a number ≥ 0"),
    (("_exponent",), "number", "an exponent is a number: 1 linear, 2 quadratic"),
)


def expects(name: str) -> tuple[str, str] | None:
    """What the guess called ``name`` must be, read from its name's ending — ``("ratio", why)`` for
    ``my_guess_join_x``, ``_ratio`` or a name with ``_over_`` (a ratio of two times), ``pct`` for ``_pct``,
    ``share`` (0–1) for ``_share``, ``time`` for ``_ms``/``_us``/``_ns``/``_s``/``_rps``, ``count`` for
    ``_queries``, ``_trips`` …, ``number`` for ``_exponent`` — or None when the name does not say (a codec's
    name, a ranking: anything goes)."""
    low = name.lower()
    for endings, kind, why in _ENDINGS:
        if low.endswith(endings):
            return kind, why
    if "_over_" in low:
        return "ratio", "a ratio of two times is a number > 0: 0.5 is half the time, 2 twice the time"
    return None


def _refusal(name: str, value: Any) -> str | None:
    """Why ``value`` cannot be the guess called ``name`` (None when it can, or when the name does not say)."""
    import math
    import numbers

    want = expects(name)
    if value is None or want is None:
        return None
    kind, why = want
    unit = next((u for end, u in (("_ns", "ns"), ("_us", "µs"), ("_ms", "ms"), ("_s", "s")) if name.endswith(end)), None)
    if kind == "time" and unit:
        why = f"a time in {unit} is a number > 0"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        typed = repr(value)
        digits = "".join(ch for ch in str(value) if ch.isdigit() or ch in ".-")
        example = f" (write {digits}, not {typed})" if isinstance(value, str) and digits.strip(".-") else ""
        return f"{name} = {typed} is not a number: {why}{example}"
    v = float(value)
    if not math.isfinite(v):
        return f"{name} = {value!r} is not a finite number: {why}"
    bad = {"ratio": v <= 0, "time": v <= 0, "pct": not 0 <= v <= 100, "share": not 0 <= v <= 1,
           "count": v < 0}.get(kind, False)
    if not bad:
        return None
    hint = f" ({v:g} % is {v / 100:g})" if kind == "share" and 1 < v <= 100 else ""
    return f"{name} = {value!r} cannot be right: {why}{hint}"


def noted(**named: Any) -> None:
    """Note the guesses just written (``noted(my_guess_ms=my_guess_ms)``): each is recorded with its value and
    whether the cell ran attended. The first skipped guess of an unattended run shows the banner (once per
    kernel); a skipped guess in an attended run gets one quiet line. A guess noted again (the cell run a second
    time, now filled in) replaces the earlier note.

    A guess is checked here, where it is typed, against what its name says it is (:func:`expects`): a
    non-number where a number is asked (``"5x"``), a ratio or a time ≤ 0, a percentage outside 0–100, a share
    outside 0–1, a negative count — refused with a :class:`~labkit.errors.BadInputError` naming the variable,
    and nothing of the cell is noted, so the lab never fails on it cells later.
    """
    if not named:
        raise BadInputError("noted() takes the guesses by name: guesses.noted(my_guess_ms=my_guess_ms)")
    refused = [why for why in (_refusal(n, v) for n, v in named.items()) if why]
    if refused:
        raise BadInputError("; ".join(refused) + ". Fix the value in this cell and run it again.")
    book = _BOOK
    attended = book.attended()
    out = tuple(Guess(name, value, attended) for name, value in named.items())
    for g in out:
        book.guesses[g.name] = g
    skipped = [g.name for g in out if g.skipped]
    if skipped and not attended and not book.bannered:
        book.bannered = True
        _show(_BANNER, loud=True)
    elif skipped:
        _show(f"{', '.join(skipped)} left as None: the lab goes on and shows the measurement without your guess "
              "(fill it in and run this cell again to have it judged)", loud=False)


def recorded() -> tuple[Guess, ...]:
    """Every guess noted in this kernel so far, in the order first noted."""
    return tuple(_BOOK.guesses.values())


def _fmt(value: float, unit: str) -> str:
    return f"{value:,.3g}{' ' + unit if unit else ''}"


def beside(guess: float | None, measured: float, unit: str = "") -> str:
    """One line: the learner's guess beside the measurement, and the measurement as a multiple of the guess
    (``"your guess 4 ms · measured 11.2 ms (2.8× your guess)"``); a skipped guess says so."""
    if guess is None:
        return f"your guess: skipped · measured {_fmt(measured, unit)}"
    if not isinstance(guess, int | float) or isinstance(guess, bool):
        return f"your guess {guess!r} · measured {_fmt(measured, unit)} (a guess is a number: write one)"
    if guess == 0:
        return f"your guess 0 · measured {_fmt(measured, unit)}"
    return f"your guess {_fmt(guess, unit)} · measured {_fmt(measured, unit)} ({measured / guess:.2g}× your guess)"


def against(measured: Mapping[str, float], *, units: Mapping[str, str] | None = None,
            experiments: Sequence[Any] = ()) -> Any:
    """The noted guesses named in ``measured`` beside their measurements, and each experiment's predicted ratio
    beside its measured one — a DataFrame for :func:`labkit.charts.guesses_chart` (or to read as a table).

    Args:
        measured: guess name (as given to :func:`noted`) → the value measured for it, in the guess's unit.
        units: guess name → its unit, for the labels ("ms", "×"); ratios of experiments need none.
        experiments: concluded :class:`labkit.learner.record.Experiment` records (``predicted_ratio`` beside
            ``measured_ratio``); one not measured yet is left out.

    Returns:
        One row per guess, then per experiment: ``name``, ``kind`` ("guess" or "plan"), ``predicted`` (NaN when
        skipped), ``measured``, ``unit``, ``skipped``, ``factor`` (measured ÷ predicted; NaN when skipped),
        ``measured_lo`` and ``measured_hi`` (a plan's measured interval, the one its outcome was judged by;
        NaN for a guess).

    Raises:
        BadInputError: a name that was never noted, or a measurement that is not a finite number.
    """
    import math

    import pandas as pd

    units = dict(units or {})
    rows = []
    for name, value in measured.items():
        guess = _BOOK.guesses.get(name)
        if guess is None:
            noted_names = ", ".join(_BOOK.guesses) or "none yet"
            raise BadInputError(f"no guess named {name!r} was noted in this kernel (noted: {noted_names}): run its "
                                f"cell, which calls guesses.noted({name}=...), before this one")
        rows.append(_row(name, "guess", guess.value, value, units.get(name, "")))
    for exp in experiments:
        if getattr(exp, "measured_ratio", None) is None:
            continue
        row = _row(exp.title, "plan", exp.predicted_ratio, exp.measured_ratio, "ratio")
        ci = getattr(exp, "measured_ci", None)
        if ci is not None:
            row["measured_lo"], row["measured_hi"] = float(ci[0]), float(ci[1])
        rows.append(row)
    frame = pd.DataFrame(rows, columns=["name", "kind", "predicted", "measured", "unit", "skipped", "factor",
                                        "measured_lo", "measured_hi"])
    bad = [r["name"] for r in rows if not math.isfinite(r["measured"])]
    if bad:
        raise BadInputError(f"the measurement for {', '.join(bad)} is not a finite number: pass what was measured")
    return frame


def _row(name: str, kind: str, predicted: Any, measured: Any, unit: str) -> dict[str, Any]:
    if isinstance(measured, bool) or not isinstance(measured, int | float):
        raise BadInputError(f"the measurement for {name!r} must be a number, got {type(measured).__name__}")
    usable = isinstance(predicted, int | float) and not isinstance(predicted, bool) and predicted != 0
    return {"name": name, "kind": kind, "predicted": float(predicted) if usable else None,
            "measured": float(measured), "unit": unit, "skipped": not usable,
            "factor": float(measured) / float(predicted) if usable else None}


def summary() -> Summary:
    """The lab's last word on predictions: how many were written and how many skipped, by name; loud when the
    run was unattended (Run All). End the lab's last cell with it: it shows once, as text or a red box."""
    gs = list(_BOOK.guesses.values())
    skipped = [g for g in gs if g.skipped]
    if not gs:
        text = "No guesses were noted in this run."
    elif not skipped:
        text = f"Predictions: all {len(gs)} written before their measurements."
    else:
        names = ", ".join(g.name for g in skipped)
        text = f"Predictions: {len(gs) - len(skipped)} of {len(gs)} written; {len(skipped)} skipped ({names})."
        if any(not g.attended for g in skipped):
            text = ("⚠ " + text + " This run went top to bottom without you: restart the kernel and run it cell "
                    "by cell, writing each guess before its measurement.")
    return Summary(text, loud=any(not g.attended for g in skipped))


def forget() -> None:
    """Start the count again (a new run of the lab in the same kernel)."""
    _BOOK.guesses.clear()
    _BOOK.bannered = False


_hook(_BOOK)
