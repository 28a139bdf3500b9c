"""Experiment records: the hypothesis written down first, then the measurements and the verdict.

    exp = Experiment.plan("orjson for the export", "json.dumps is a third of the request; orjson is ~10×
                          faster at encoding, so the request should take ~0.7× as long", predicted_ratio=0.7)
    exp.save()                              # the prediction is on disk before anything is measured
    exp = exp.conclude(labkit.compare(baseline, candidate))
    exp.save()                              # same file, now with the numbers and the outcome
    labkit.experiments()                    # every record in the results folder, as a DataFrame

Records are JSON, written atomically, with the environment fingerprint of the machine that measured them.

**How a prediction is judged** (:func:`judge`, one rule for the whole product). A napkin model is worth about
a quarter either way, so the measured interval of the ratio is widened by :data:`NAPKIN_TOLERANCE` (25 %) on
each side, on the ratio's own scale (``lo / 1.25`` to ``hi × 1.25``: :func:`accepted_range`):

* **confirmed** — the predicted ratio lies inside that band, and the interval is narrow enough to tell (it spans
  at most :data:`MAX_SPAN`, a factor of 2, from end to end);
* **refuted** — it lies outside the band, *whatever the comparison's verdict*: measured 0.992–1.139 (too noisy
  to call faster, slower or the same) still refutes a predicted 0.5;
* **inconclusive** — the measurement cannot tell: there is no interval (nothing measured, a broken one), or the
  prediction lies inside the band of an interval spanning more than a factor of 2, which would "confirm" a
  saving of a third and of two thirds alike (0.3–0.7 accepts 0.24–0.88): measure longer, then judge.

The outcome line shows the range (:func:`judgement`): ``confirmed: 0.16 within 0.11–0.19`` against a measured
0.133–0.152, ``refuted: 0.38 outside 0.11–0.19``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labkit.errors import BadInputError, ResultsError, ResultsWarning
from labkit.measure.comparison import Comparison
from labkit.measure.machine import fingerprint
from labkit.results import Saveable, read_json, results_dir, write_json_atomic

__all__ = ["Experiment", "experiments", "judge", "judgement", "accepted_range", "notebook_lab", "NAPKIN_TOLERANCE",
           "MAX_SPAN"]

#: how far (a fraction of the ratio, each side) a napkin prediction may lie outside the measured interval and
#: still be confirmed: the one tolerance every lab, grader, report and chart judges by (see the module's docstring)
NAPKIN_TOLERANCE = 0.25

#: a measured interval wider than this factor end to end (``hi / lo``) confirms nothing: it cannot tell a saving
#: of a third from one of two thirds (it still refutes a prediction outside its band)
MAX_SPAN = 2.0


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "experiment"


@dataclass(frozen=True)
class Experiment(Saveable):
    """One experiment: what you expect and why, then what you measured and whether it held.

    Attributes:
        title: a short name.
        hypothesis: the claim, with its napkin math, in your words.
        predicted_ratio: the predicted candidate/baseline ratio (0.5 = twice as fast), or None.
        planned_at, concluded_at: ISO timestamps; the plan must come before the measurement.
        measurements: saved result dicts (comparisons, load tests …), in the order added.
        verdict: the comparison's verdict (faster/slower/same/inconclusive), once concluded.
        outcome: ``confirmed``, ``refuted`` or ``inconclusive`` — did the prediction hold? (:func:`judge`)
        measured_ratio: the comparison's ratio, once concluded.
        measured_ci: the interval of that ratio, once concluded: the outcome was judged by it.
        notes: anything else worth keeping.
        id: the record's file stem.
        lab: the lab whose notebook planned it ("05"), when that is known (:func:`notebook_lab`): a grader
            refuses a record planned in another lab's notebook.
    """

    KIND = "experiment"

    title: str
    hypothesis: str
    predicted_ratio: float | None = None
    planned_at: str = ""
    concluded_at: str | None = None
    measurements: tuple[dict[str, Any], ...] = ()
    verdict: str | None = None
    outcome: str | None = None
    measured_ratio: float | None = None
    measured_ci: tuple[float, float] | None = None
    notes: str = ""
    id: str = ""
    fingerprint: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    lab: str = ""

    @classmethod
    def plan(cls, title: str, hypothesis: str, predicted_ratio: float | None = None, notes: str = "") -> Experiment:
        """Write the hypothesis down before measuring.

        Args:
            title: a short name for the experiment.
            hypothesis: what you expect and why (the napkin math).
            predicted_ratio: candidate time / baseline time you expect (0.25 = four times faster; 1 = no change).
        """
        if not isinstance(title, str) or not title.strip():
            raise BadInputError("an experiment needs a title: Experiment.plan('orjson export', '…')")
        if not isinstance(hypothesis, str) or len(hypothesis.strip()) < 10:
            raise BadInputError(
                "write the hypothesis out (at least a sentence): what you expect to change, by how much, "
                "and why — that is what the experiment tests")
        if predicted_ratio is not None and not (isinstance(predicted_ratio, int | float) and predicted_ratio > 0):
            raise BadInputError(f"predicted_ratio is candidate/baseline time and must be > 0, got {predicted_ratio!r}")
        when = _now()
        ident = dt.datetime.now().strftime("%Y%m%d-%H%M%S-%f") + "-" + _slug(title)
        return cls(title, hypothesis.strip(), None if predicted_ratio is None else float(predicted_ratio),
                   when, notes=notes, id=ident, fingerprint=fingerprint(), lab=notebook_lab())

    def expected_verdict(self, min_effect: float = 0.05) -> str | None:
        """The verdict the prediction implies: faster, slower or same (None without a predicted ratio)."""
        if self.predicted_ratio is None:
            return None
        if self.predicted_ratio < 1 / (1 + min_effect):
            return "faster"
        if self.predicted_ratio > 1 + min_effect:
            return "slower"
        return "same"

    def add(self, result: Any) -> Experiment:
        """Attach another measured result (anything with ``to_dict()``) and return the new record."""
        if not hasattr(result, "to_dict"):
            raise BadInputError(f"cannot record a {type(result).__name__}: pass a labkit result (it has to_dict())")
        return dataclasses.replace(self, measurements=(*self.measurements, result.to_dict()))

    def conclude(self, comparison: Comparison | Any, notes: str | None = None) -> Experiment:
        """Record the comparison that tests the hypothesis, its verdict, and whether the prediction held.

        A timing comparison (:func:`labkit.compare`) or a memory one
        (:meth:`labkit.alloc.AllocComparison.verdict`: less, more, same or inconclusive) concludes it alike.

        The prediction is judged by :func:`judge`: ``confirmed`` when the predicted ratio lies inside the
        measured interval widened by :data:`NAPKIN_TOLERANCE`, ``refuted`` outside it (whatever the verdict),
        ``inconclusive`` when the measurement cannot tell; :attr:`judgement` says it with the range. No outcome
        without a predicted ratio.
        """
        if type(comparison).__name__ == "AllocComparison":
            raise BadInputError("conclude() takes a verdict, and alloc.compare(...) counts every metric: conclude on "
                                "the one the hypothesis is about, e.g. exp.conclude(c.verdict('allocations'))")
        if not isinstance(comparison, Comparison) and getattr(comparison, "KIND", None) != "memory-comparison":
            raise BadInputError(
                f"conclude() takes the labkit.compare(...) result that tests the hypothesis (or a memory verdict, "
                f"alloc.compare(...).verdict(metric)), got {type(comparison).__name__}; attach other results with "
                "add()")
        ci = (float(comparison.ci[0]), float(comparison.ci[1]))
        outcome = None if self.predicted_ratio is None else judge(self.predicted_ratio, ci)
        out = self.add(comparison)
        return dataclasses.replace(out, verdict=comparison.verdict, outcome=outcome, measured_ratio=comparison.ratio,
                                   measured_ci=ci, concluded_at=_now(), notes=self.notes if notes is None else notes)

    @property
    def judgement(self) -> str:
        """The outcome with the range it was judged by (``confirmed: 0.14 within 0.11–0.19``); empty until
        concluded with a prediction. A record saved before its interval was kept says its outcome alone."""
        if self.outcome is None or self.predicted_ratio is None:
            return ""
        if self.measured_ci is None:
            return self.outcome
        return judgement(self.predicted_ratio, self.measured_ci)

    def summary(self) -> str:
        """Plain text: the hypothesis, the prediction, and what happened."""
        lines = [f"Experiment: {self.title}", f"  hypothesis: {self.hypothesis}"]
        if self.predicted_ratio is not None:
            lines.append(f"  predicted: candidate/baseline ≈ {self.predicted_ratio:.3g} "
                         f"(expect '{self.expected_verdict()}')")
        if self.concluded_at is None:
            lines.append("  not measured yet")
        else:
            ci = "" if self.measured_ci is None else f" ({self.measured_ci[0]:.3g}–{self.measured_ci[1]:.3g})"
            lines.append(f"  measured: ratio {self.measured_ratio:.3g}{ci}, verdict '{self.verdict}' "
                         f"→ prediction {self.judgement or 'not stated'}")
        return "\n".join(lines)

    __str__ = summary

    def _repr_html_(self) -> str:
        from html import escape

        return "<pre>" + escape(self.summary()) + "</pre>"

    @property
    def is_template(self) -> bool:
        """True while the hypothesis still says ``TODO``: a lab's template that nobody has written in yet."""
        return "TODO" in self.hypothesis

    def save(self, folder: str | os.PathLike[str] | None = None) -> Path | None:  # type: ignore[override]
        """Write the record to ``folder`` (default: :func:`labkit.results.results_dir`) as ``<id>.json``.

        A template (:attr:`is_template`) is not saved — a TODO is not a prediction, and a record of it would
        read as one in ``experiments()`` and in reports: None is returned, and what to write is said — in a
        notebook as an amber notice in the cell's output (:func:`labkit.learner.guesses.notice`; a warning would go to
        stderr, which JupyterLab draws red, as an error), elsewhere as a :class:`~labkit.errors.ResultsWarning`."""
        if self.is_template:
            message = (f"experiment {self.title!r} not saved: its hypothesis still says TODO — write yours (what "
                       "you expect to change, by how much, and why), then run the cell again")
            from labkit.learner import (
                guesses,  # here, not at the top: importing it hooks IPython's cell events
            )

            if guesses.ipython() is not None:  # a notebook: shown in the cell's output
                guesses.notice(message, tone="todo")
            else:
                warnings.warn(message, ResultsWarning, stacklevel=2)
            return None
        return write_json_atomic(Path(folder or results_dir()) / f"{self.id}.json", self.to_dict())



def notebook_lab() -> str:
    """The two-digit lab number of the notebook this kernel runs ("05" for ``notebooks/05_serialization.ipynb``,
    or a copy of it such as ``05_serialization-Copy1.ipynb``), or "" when no notebook is known. Jupyter Server
    (2.0 and newer) tells a kernel its notebook's path in ``JPY_SESSION_NAME``."""
    name = os.path.basename(os.environ.get("JPY_SESSION_NAME", ""))
    found = re.match(r"(\d\d)_", name) or re.search(r"(?<![0-9])(\d\d)_[a-z]", name)
    return found.group(1) if found else ""


def accepted_range(ci: tuple[float, float], tolerance: float = NAPKIN_TOLERANCE) -> tuple[float, float]:
    """The predicted ratios a measurement confirms: its interval widened by ``tolerance`` on each side, on the
    ratio's own (multiplicative) scale — ``(lo / (1 + t), hi × (1 + t))``, so "25 % faster" and "25 % slower"
    than the interval weigh alike. Measured 0.133–0.152 accepts 0.106–0.19."""
    lo, hi = (float(r) for r in ci)
    return lo / (1 + tolerance), hi * (1 + tolerance)


def _usable(ci: Any) -> bool:
    try:
        lo, hi = (float(r) for r in ci)
    except (TypeError, ValueError):
        return False
    return math.isfinite(lo) and math.isfinite(hi) and 0 < lo <= hi


def judge(predicted_ratio: float, ci: tuple[float, float] | None, tolerance: float = NAPKIN_TOLERANCE) -> str:
    """Whether a predicted time ratio held: the measured interval, widened by the napkin tolerance, decides.

    The rule (the module's docstring says why), with ``band`` = :func:`accepted_range` ``(ci, tolerance)``:

    * ``inconclusive`` when there is no measured interval to judge by (None, not finite, not > 0);
    * ``refuted`` when the prediction lies outside the band — whatever the comparison's verdict: an
      inconclusive comparison whose interval excludes the prediction by more than the tolerance refutes it;
    * ``confirmed`` when it lies inside the band and the interval is narrow enough to tell: ``hi / lo`` at most
      :data:`MAX_SPAN` (2);
    * ``inconclusive`` when it lies inside the band of an interval wider than that: such a measurement would
      "confirm" a third saved and two thirds saved alike (0.3–0.7 accepts 0.24–0.88) — measure longer.

    Examples at the product's tolerance (25 %): measured 0.133–0.152 accepts 0.106–0.19: 0.16 is confirmed,
    0.02 and 0.38 are refuted; measured 0.992–1.139 (an inconclusive comparison) refutes 0.5.

    Args:
        predicted_ratio: candidate / baseline time predicted (> 0).
        ci: the measured interval of that ratio (a comparison's ``ci``), or None.
        tolerance: the napkin tolerance, a fraction of the ratio (the product's is :data:`NAPKIN_TOLERANCE`).
    """
    if not 0 <= tolerance < 1:
        raise BadInputError(f"tolerance is a fraction of the ratio between 0 and 1 (0.25 = ±25 %), got "
                            f"{tolerance!r}")
    p = float(predicted_ratio)
    if not (math.isfinite(p) and p > 0):
        raise BadInputError(f"predicted_ratio is candidate/baseline time and must be > 0, got {predicted_ratio!r}")
    if ci is None or not _usable(ci):
        return "inconclusive"
    lo, hi = (float(r) for r in ci)
    low, high = accepted_range((lo, hi), tolerance)
    if not low <= p <= high:
        return "refuted"
    return "confirmed" if hi / lo <= MAX_SPAN else "inconclusive"


def _fmt(x: float, d: int) -> str:
    return f"{x:.{d + (x >= 1)}g}"  # 0.11, 1.42, 12.8: two decimals' worth around 1


def _range(p: float, low: float, high: float, inside: bool) -> str:
    """The band printed with the fewest digits (2 to 4 significant) that still say what was decided about p."""
    for d in (2, 3, 4):
        a, b = _fmt(low, d), _fmt(high, d)
        if (float(a) <= p <= float(b)) == inside:
            break
    return f"{a}–{b}"


def judgement(predicted_ratio: float | None, ci: tuple[float, float] | None,
              tolerance: float = NAPKIN_TOLERANCE) -> str:
    """The outcome (:func:`judge`) in one line with the range it was judged by: ``confirmed: 0.14 within
    0.11–0.19``, ``refuted: 0.5 outside 0.79–1.4``, ``inconclusive: …`` saying why the measurement could not
    tell. An empty string without a prediction."""
    if predicted_ratio is None:
        return ""
    p = float(predicted_ratio)
    outcome = judge(p, ci, tolerance)
    if ci is None or not _usable(ci):
        return f"{outcome}: {p:g}, with no measured interval to judge it by"
    lo, hi = (float(r) for r in ci)
    low, high = accepted_range((lo, hi), tolerance)
    inside = low <= p <= high
    band = _range(p, low, high, inside)
    if outcome == "inconclusive":
        return (f"inconclusive: {p:g} within {band}, but the measured interval {lo:.3g}–{hi:.3g} is too wide to "
                f"tell (it spans more than {MAX_SPAN:g}× from end to end): measure longer")
    return f"{outcome}: {p:g} {'within' if inside else 'outside'} {band}"


def experiments(folder: str | os.PathLike[str] | None = None) -> Any:
    """Every experiment record in ``folder`` as a DataFrame, oldest first (an empty frame if there are none).

    A file that cannot be read — truncated, not JSON, a damaged record, a newer format — is skipped with a
    :class:`~labkit.errors.ResultsWarning` naming it and the reason; every other record is still listed.
    Results of other kinds (comparisons, load tests saved beside the records) are not experiments and are
    passed over without a word.
    """
    import pandas as pd

    base = Path(folder or results_dir())
    cols = ["id", "title", "planned_at", "concluded_at", "predicted_ratio", "measured_ratio", "verdict",
            "outcome", "hypothesis", "path"]
    if base.exists() and not base.is_dir():
        raise ResultsError(f"{base} is a file, not a results folder: pass the folder that holds the records")
    rows = []
    for p in sorted(base.glob("*.json")) if base.is_dir() else []:
        try:
            data = read_json(p)
            if "kind" not in data:
                raise ResultsError(f"{p} is JSON without a 'kind': not a labkit result")
            if data["kind"] != Experiment.KIND:
                continue  # another kind of result, readable: not an experiment
            exp = Experiment.from_dict_of(data, p)
        except ResultsError as e:
            warnings.warn(f"experiments(): skipped {p}: {e}", ResultsWarning, stacklevel=2)
            continue
        rows.append({**{c: getattr(exp, c, None) for c in cols}, "path": str(p)})
    return pd.DataFrame(rows, columns=cols).sort_values("planned_at", kind="stable").reset_index(drop=True)
