"""This run against a kept baseline, experiment by experiment — ratios and intervals, never raw samples.

Machines drift between runs (lab 00): the same code can take 30 % longer an hour later because a neighbour
is busy. Raw samples from two runs are therefore never compared with each other. Each experiment's
*within-run* ratio (candidate / baseline, both measured interleaved in the same run) is what travels: the
ratio measured now, with its 95 % interval, is held against the ratio measured then.

An experiment is ``worse`` when its whole interval now lies above the earlier interval by more than the
tolerance (the comparison's own ``min_effect``, 5 % by default: the difference below which ``compare`` calls
two things the same), ``better`` when it lies below by as much, ``unchanged`` otherwise. Experiments are
matched by title; one found only now is ``new``, one found only in the baseline is ``missing``, and one
without a concluded comparison on either side is ``unmeasured``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labkit.errors import BadInputError, ResultsError
from labkit.learner.record import judge, judgement
from labkit.results import read_json

__all__ = ["Concluded", "Change", "concluded_in", "diff", "STATUSES"]

STATUSES = ("worse", "better", "unchanged", "new", "missing", "unmeasured")


@dataclass(frozen=True)
class Concluded:
    """What one experiment record says: the prediction, and (once concluded) the ratio with its interval.

    Attributes:
        title, hypothesis, predicted_ratio, verdict: as in :class:`labkit.Experiment`.
        outcome: the prediction judged against ``ci`` by :func:`labkit.learner.record.judge` (today's rule, even
            for a record concluded under an older one); the record's own outcome when there is no interval.
        ratio: the concluding comparison's candidate/baseline ratio of medians (None until concluded).
        ci: its interval (None until concluded), at the level ``confidence`` (0.95 for a fixed design; higher
            when ``compare`` looked several times, see :mod:`labkit.measure.comparison`).
        min_effect: the comparison's threshold for a difference that matters.
        concluded_at: when it was concluded (ISO), or None.
        path: the record's file.
        warnings: the concluding comparison's warnings, each saying what qualifies the verdict.
    """

    title: str
    hypothesis: str
    predicted_ratio: float | None
    ratio: float | None
    ci: tuple[float, float] | None
    verdict: str | None
    outcome: str | None
    min_effect: float
    concluded_at: str | None
    path: str
    confidence: float = 0.95
    #: what qualified the concluding comparison (cut short, a wide spread, a busy machine, the collector's share)
    warnings: tuple[str, ...] = ()
    #: the memory metric a memory verdict concluded it on (``allocations`` …); empty for a timing comparison
    metric: str = ""

    @classmethod
    def of(cls, record: dict[str, Any], path: str = "") -> Concluded:
        """Read an experiment record (the dict ``Experiment.to_dict()`` saves)."""
        ratio, ci, min_effect, confidence = record.get("measured_ratio"), None, 0.05, 0.95
        warnings: tuple[str, ...] = ()
        metric = ""
        # the concluding comparison is the last one attached with the recorded ratio
        for m in reversed(record.get("measurements") or ()):
            if m.get("kind") in ("comparison", "memory-comparison") and ratio is not None and m.get("ratio") == ratio:
                lo, hi = m.get("ci") or (None, None)
                ci = (float(lo), float(hi)) if lo is not None and hi is not None else None
                min_effect = float(m.get("min_effect") or 0.05)
                confidence = float(m.get("confidence") or 0.95)
                warnings = tuple(str(w) for w in m.get("warnings") or ())
                metric = str(m.get("metric") or "")
                break
        predicted, outcome = record.get("predicted_ratio"), record.get("outcome")
        if predicted is not None and ci is not None:  # judged by today's rule: an old record reads like a new one
            outcome = judge(predicted, ci)
        return cls(str(record.get("title", "")), str(record.get("hypothesis", "")), predicted,
                   ratio, ci, record.get("verdict"), outcome, min_effect,
                   record.get("concluded_at"), path, confidence, warnings, metric)

    @property
    def judgement(self) -> str:
        """The outcome with the range it was judged by (:func:`labkit.learner.record.judgement`), or the
        outcome alone without an interval; empty without a prediction."""
        if self.predicted_ratio is None or self.outcome is None:
            return ""
        return judgement(self.predicted_ratio, self.ci) if self.ci is not None else self.outcome

    @property
    def measured(self) -> bool:
        """True when a comparison concluded it (a ratio and an interval exist)."""
        return self.ratio is not None and self.ci is not None


@dataclass(frozen=True)
class Change:
    """One experiment, now against the baseline.

    Attributes:
        title: the experiment's title (how the two runs are matched).
        status: one of :data:`STATUSES`.
        now, then: the experiment in this run and in the baseline (None where it is absent).
        tolerance: the relative gap between the intervals needed to call a change.
        note: a sentence saying why this status.
    """

    title: str
    status: str
    now: Concluded | None
    then: Concluded | None
    tolerance: float
    note: str

    @property
    def changed(self) -> bool:
        """True for ``better`` and ``worse``."""
        return self.status in ("better", "worse")


def concluded_in(folder: str | os.PathLike[str]) -> list[Concluded]:
    """Every experiment record in ``folder`` (one JSON file each), oldest plan first; none if it does not exist
    (a run that saved nothing has no results folder).

    Raises:
        BadInputError: ``folder`` is a file.
    """
    base = Path(folder)
    if base.exists() and not base.is_dir():
        raise BadInputError(f"{base} is a file: pass the folder of a run (results/reports/<notebook>-<time>/)")
    found = []
    for p in sorted(base.glob("*.json")):
        try:
            data = read_json(p)
        except ResultsError:
            continue  # a damaged or foreign file is not an experiment; it never hides the others
        if data.get("kind") == "experiment":
            found.append((str(data.get("planned_at", "")), Concluded.of(data, str(p))))
    return [c for _, c in sorted(found, key=lambda pair: pair[0])]


def _by_title(items: Sequence[Concluded]) -> dict[str, Concluded]:
    # the same title twice in one run (a cell re-run, a loop): the last concluded one speaks for it
    out: dict[str, Concluded] = {}
    for c in items:
        if c.title not in out or c.measured or not out[c.title].measured:
            out[c.title] = c
    return out


def _fmt(c: Concluded) -> str:
    assert c.ci is not None and c.ratio is not None
    return f"{c.ratio:.3g} [{c.ci[0]:.3g}–{c.ci[1]:.3g}]"


def diff(now: Sequence[Concluded], then: Sequence[Concluded], tolerance: float | None = None) -> list[Change]:
    """Match experiments by title and say which changed, this run (``now``) against the baseline (``then``).

    Args:
        now, then: the experiments of the two runs (see :func:`concluded_in`).
        tolerance: how far apart (relative) the two intervals must be to call a change; by default the larger
            ``min_effect`` of the two comparisons.

    Returns:
        One :class:`Change` per title, in this run's order, then the baseline's titles missing now.
    """
    if tolerance is not None and not 0 <= tolerance < 1:
        raise BadInputError(f"tolerance is a fraction between 0 and 1 (0.05 = 5 %), got {tolerance!r}")
    a, b = _by_title(now), _by_title(then)
    changes = []
    for title, c in a.items():
        old = b.get(title)
        tol = tolerance if tolerance is not None else max(c.min_effect, old.min_effect if old else 0.0)
        if old is None:
            changes.append(Change(title, "new", c, None, tol, "no experiment of this title in the baseline"))
            continue
        if not (c.measured and old.measured):
            side = "this run" if not c.measured else "the baseline"
            changes.append(Change(title, "unmeasured", c, old, tol, f"not concluded in {side}: nothing to compare"))
            continue
        assert c.ci is not None and old.ci is not None
        if c.ci[0] > old.ci[1] * (1 + tol):
            status, why = "worse", "the whole interval now lies above the earlier one"
        elif c.ci[1] < old.ci[0] / (1 + tol):
            status, why = "better", "the whole interval now lies below the earlier one"
        else:
            status, why = "unchanged", "the intervals overlap (or lie within the tolerance of each other)"
        changes.append(Change(title, status, c, old, tol,
                              f"ratio {_fmt(c)} now vs {_fmt(old)} then: {why} (tolerance {tol:.0%})"))
    for title, old in b.items():
        if title not in a:
            changes.append(Change(title, "missing", None, old, tolerance or old.min_effect,
                                  "in the baseline, not in this run"))
    return changes
