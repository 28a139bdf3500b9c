"""Who passed which exercise, the gradebook export, and the room's passing fixes side by side.

From the grading records :func:`labkit.workshop.room.collect` found (each graded check writes one, see
:mod:`labkit.grading.gradings`):

* :func:`grid` — learners × exercises: passed; failed at item k, with its message; not tried — the latest grading
  of each learner for each exercise, and how many attempts it took;
* :func:`gradebook_csv` — the same as one CSV an LMS or nbgrader's gradebook can import (:data:`COLUMNS`);
* :func:`gallery` — each exercise's passing fixes, deduplicated by normalised source, ranked by the grader's exact
  counters (the budget item: fewer queries or allocations first), then by the verified speed-up, on one offline
  page for the room to review together.

**Privacy by default**: learners appear under an anonymous id (:func:`anonymous`, stable across runs, so a gradebook
can be joined) unless ``names=True``; no page shows a home path; nothing is read outside the folders given to
``collect``.
"""

from __future__ import annotations

import csv
import hashlib
import io
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from labkit.workshop.room import Room

__all__ = ["COLUMNS", "Latest", "anonymous", "gallery", "gradebook_csv", "grid", "latest"]

#: the gradebook's columns, in order
COLUMNS = ("learner", "lab", "exercise", "passed", "failed_item", "failed_criterion", "message", "speed_ratio",
           "attempts", "graded_at")


def anonymous(name: str) -> str:
    """A learner's anonymous id: the same name always gives the same id (``learner-3f2a9c``)."""
    return "learner-" + hashlib.sha256(name.encode("utf-8")).hexdigest()[:6]


@dataclass(frozen=True)
class Latest:
    """A learner's latest grading of one exercise, and how many gradings of it were found."""

    learner: str
    grading: Any
    attempts: int

    def status(self) -> str:
        """``passed``, or ``failed at item k (criterion): message``."""
        g = self.grading
        if g.passed:
            return "passed"
        item = g.items[g.failed_item - 1] if g.failed_item else {}
        return f"failed at item {g.failed_item} ({item.get('criterion') or 'check'}): {item.get('message', '')}"


def latest(room: Room) -> dict[tuple[str, str], Latest]:
    """``{(learner, exercise): Latest}`` — the newest record wins; the attempts count them all."""
    out: dict[tuple[str, str], Latest] = {}
    for learner, g in room.gradings:  # oldest first (collect sorts them)
        key = (learner, g.exercise)
        seen = out.get(key)
        out[key] = Latest(learner, g, (seen.attempts if seen else 0) + 1)
    return out


def _who(learner: str, names: bool) -> str:
    return learner if names else anonymous(learner)


def _speed(g: Any) -> float | None:
    item = g.item("speed")
    ratio = (item or {}).get("measured", {}).get("ratio")
    return float(ratio) if isinstance(ratio, int | float) else None


def _budget(g: Any) -> float | None:
    item = g.item("budget")
    value = (item or {}).get("measured", {}).get("value")
    return float(value) if isinstance(value, int | float) else None


def grid(room: Room, *, names: bool = False) -> str:
    """The learners × exercises table, as HTML."""
    done = latest(room)
    if not done:
        return "<p>No grading records yet: each graded check (<code>labNN.check(...)</code>) writes one.</p>"
    learners = sorted({k[0] for k in done}, key=lambda x: _who(x, names))
    exercises = sorted({k[1] for k in done})
    head = "".join(f"<th>{escape(e)}</th>" for e in exercises)
    rows = []
    for who in learners:
        cells = []
        for ex in exercises:
            got = done.get((who, ex))
            if got is None:
                cells.append("<td class='not-tried'>not tried</td>")
                continue
            tries = f" <small>({got.attempts} attempts, the latest shown)</small>" if got.attempts > 1 else ""
            klass = "passed" if got.grading.passed else "failed"
            cells.append(f"<td class='{klass}'>{escape(got.status())}{tries}</td>")
        rows.append(f"<tr><th>{escape(_who(who, names))}</th>{''.join(cells)}</tr>")
    return f"<table class='labkit-grid'><tr><th>learner</th>{head}</tr>{''.join(rows)}</table>"


def gradebook_csv(room: Room, *, names: bool = False) -> str:
    """One row per learner and exercise (the latest grading), with :data:`COLUMNS`."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(COLUMNS)
    for (learner, ex), got in sorted(latest(room).items(), key=lambda kv: (_who(kv[0][0], names), kv[0][1])):
        g = got.grading
        item = g.items[g.failed_item - 1] if g.failed_item else {}
        speed = _speed(g)
        writer.writerow([_who(learner, names), g.lab, ex, "yes" if g.passed else "no", g.failed_item or "",
                         item.get("criterion", "") if item else "", item.get("message", "") if item else "",
                         "" if speed is None else f"{speed:.4g}", got.attempts, g.graded_at])
    return out.getvalue()


def _ranked(fixes: Sequence[tuple[str, Any]]) -> list[tuple[Any, int]]:
    """Passing fixes deduplicated by normalised source (each with how many learners wrote it), best first: the
    exact counter (fewer is better), then the verified speed-up (a lower ratio is faster)."""
    by_hash: dict[str, list[Any]] = {}
    for _learner, g in fixes:
        by_hash.setdefault(g.source_hash or g.source, []).append(g)
    best = [(min(gs, key=lambda g: _speed(g) or 1.0), len(gs)) for gs in by_hash.values()]
    inf = float("inf")
    best.sort(key=lambda x: (_budget(x[0]) if _budget(x[0]) is not None else inf,
                             _speed(x[0]) if _speed(x[0]) is not None else inf))
    return best


def gallery(room: Room, title: str = "The room's fixes") -> str:
    """One offline page: every exercise's passing fixes, anonymised and ranked (see the module docstring)."""
    done = latest(room)
    by_exercise: dict[str, list[tuple[str, Any]]] = {}
    for (learner, ex), got in done.items():
        if got.grading.passed and got.grading.source:
            by_exercise.setdefault(ex, []).append((learner, got.grading))
    parts = []
    for ex in sorted(by_exercise):
        ranked = _ranked(by_exercise[ex])
        parts.append(f"<h2>{escape(ex)}</h2><p>{len(by_exercise[ex])} passing fix(es), {len(ranked)} different.</p>")
        for n, (g, count) in enumerate(ranked, 1):
            said = []
            if _budget(g) is not None:
                said.append(f"budget counter {_budget(g):g}")
            if _speed(g) is not None:
                said.append(f"{1 / _speed(g):.2f}× faster than the baseline (ratio {_speed(g):.3g})")
            who = f"{count} learners wrote this fix" if count > 1 else "one learner wrote this fix"
            parts.append(f"<h3>#{n} — {escape('; '.join(said) or 'passed')}</h3><p><small>{who}</small></p>"
                         f"<pre>{escape(g.source)}</pre>")
    body = "".join(parts) or "<p>No passing fix with its source recorded yet.</p>"
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{escape(title)}</title><style>"
            "body{font-family:sans-serif;margin:2em;max-width:72em} pre{background:#f6f8fa;padding:8px;"
            "overflow-x:auto}</style></head><body>"
            f"<h1>{escape(title)}</h1><p>Every passing fix, without names, the same fix shown once, ranked by the "
            "grader's exact counters first and then by the speed-up it verified.</p>"
            f"{body}</body></html>\n")
