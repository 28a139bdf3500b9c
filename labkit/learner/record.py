"""Experiment records: the hypothesis written down first, then the measurements and the verdict.

    exp = Experiment.plan("orjson for the export", "json.dumps is a third of the request; orjson is ~10×
                          faster at encoding, so the request should take ~0.7× as long", predicted_ratio=0.7)
    exp.save()                              # the prediction is on disk before anything is measured
    exp = exp.conclude(labkit.compare(baseline, candidate))
    exp.save()                              # same file, now with the numbers and the outcome
    labkit.experiments()                    # every record in the results folder, as a DataFrame

Records are JSON, written atomically, with the environment fingerprint of the machine that measured them.
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

__all__ = ["Experiment", "experiments", "judge"]


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
        outcome: ``confirmed``, ``refuted`` or ``inconclusive`` — did the prediction hold?
        measured_ratio: the comparison's ratio, once concluded.
        notes: anything else worth keeping.
        id: the record's file stem.
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
    notes: str = ""
    id: str = ""
    fingerprint: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

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
                   when, notes=notes, id=ident, fingerprint=fingerprint())

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

    def conclude(self, comparison: Comparison, notes: str | None = None, tolerance: float = 2.0) -> Experiment:
        """Record the comparison that tests the hypothesis, its verdict, and whether the prediction held.

        The prediction is judged on the size of the **effect**, not on the ratio: see :func:`judge` (the
        predicted effect ``ln(predicted_ratio)`` must lie within ``tolerance`` — a factor — of some point of the
        measured interval's effect, on the same side of "no change"). Predicting 0.9 (a 10 % saving) and
        measuring 0.46 (a 54 % saving) is ``refuted``; predicting 0.5 and measuring 0.46 is ``confirmed``.
        ``inconclusive`` when the comparison could not tell; no outcome without a predicted ratio.
        """
        if not isinstance(comparison, Comparison):
            raise BadInputError(
                f"conclude() takes the labkit.compare(...) result that tests the hypothesis, got "
                f"{type(comparison).__name__}; attach other results with add()")
        if not tolerance >= 1:
            raise BadInputError(f"tolerance is a factor ≥ 1 (2 means within 2× of the predicted effect), got "
                                f"{tolerance!r}")
        outcome = (None if self.predicted_ratio is None else
                   judge(self.predicted_ratio, comparison.verdict, comparison.ci, comparison.min_effect, tolerance))
        out = self.add(comparison)
        return dataclasses.replace(out, verdict=comparison.verdict, outcome=outcome, measured_ratio=comparison.ratio,
                                   concluded_at=_now(), notes=self.notes if notes is None else notes)

    def summary(self) -> str:
        """Plain text: the hypothesis, the prediction, and what happened."""
        lines = [f"Experiment: {self.title}", f"  hypothesis: {self.hypothesis}"]
        if self.predicted_ratio is not None:
            lines.append(f"  predicted: candidate/baseline ≈ {self.predicted_ratio:.3g} "
                         f"(expect '{self.expected_verdict()}')")
        if self.concluded_at is None:
            lines.append("  not measured yet")
        else:
            lines.append(f"  measured: ratio {self.measured_ratio:.3g}, verdict '{self.verdict}' "
                         f"→ prediction {self.outcome or 'not stated'}")
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



def judge(predicted_ratio: float, verdict: str, ci: tuple[float, float], min_effect: float = 0.05,
          tolerance: float = 2.0) -> str:
    """Whether a predicted time ratio held, judged on the size of the effect with the measured interval.

    The effect of a change is ``ln(ratio)``: 0 is no change, ``ln 0.5`` twice as fast, ``ln 2`` twice as slow
    (a log scale treats "2× faster" and "2× slower" alike, and a 10 % saving as a tenth of a 2× one, not as
    "within 2× of the ratio"). The rule, in order:

    * ``inconclusive`` when the verdict is (the measurement cannot judge anything);
    * a measured ``same`` (the interval within ±``min_effect`` of 1) confirms a prediction of no change
      (``predicted_ratio`` within ``1 ± min_effect``) and refutes any other;
    * ``refuted`` when the verdict goes the other way than the prediction (or the prediction said "no change");
    * otherwise ``confirmed`` when the predicted effect's size ``|ln p|`` lies within ``tolerance`` (a factor)
      of the measured interval's: ``|ln hi| / tolerance ≤ |ln p| ≤ |ln lo| × tolerance`` for a speed-up
      (the interval's ends swapped for a slow-down), else ``refuted``.

    Examples at ``tolerance=2``: measured 0.46 (interval 0.43–0.49): predicted 0.5 is confirmed (|ln 0.5| = 0.69
    lies in 0.36–1.69); predicted 0.9 is refuted (|ln 0.9| = 0.11, a fifth of the effect measured).

    Args:
        predicted_ratio: candidate / baseline time predicted (> 0).
        verdict, ci, min_effect: the comparison's verdict, the interval of its ratio and its "same" band.
        tolerance: how far (a factor, ≥ 1) the predicted effect's size may be from the measured one's.
    """
    if verdict == "inconclusive":
        return "inconclusive"
    p = float(predicted_ratio)
    predicts_same = 1 / (1 + min_effect) <= p <= 1 + min_effect
    if verdict == "same":
        return "confirmed" if predicts_same else "refuted"
    if predicts_same or (verdict == "faster") != (p < 1):
        return "refuted"
    near, far = sorted(abs(math.log(max(r, 1e-300))) for r in ci)  # the interval's effect sizes (it excludes 1 here)
    return "confirmed" if near / tolerance <= abs(math.log(p)) <= far * tolerance else "refuted"


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
