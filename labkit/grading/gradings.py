"""Every graded check leaves a record: which exercise, each item's verdict and measurement, the prediction, the
machine, and the learner's fix — so a room's passes can be collected (``labkit room collect``), exported to a
gradebook and shown side by side.

A record is one JSON file in the learner's results folder (``results/gradings/``, or ``$PERFLAB_RESULTS``), written
atomically when :meth:`labkit.grading.Exercise.grade` ends. Writing it never changes a grade: a folder that cannot be
written is said once on stderr and the grade is returned as it is.

The fix is kept as its source and a hash of its *normalised* source: the code parsed and dumped again without
comments, docstrings, layout, the function's own name or its parameters' names, so two learners' identical fixes
hash alike however they are laid out or named.
"""

from __future__ import annotations

import ast
import datetime as dt
import hashlib
import inspect
import re
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from labkit.results import Saveable, results_dir, write_json_atomic

__all__ = ["Grading", "normalised", "record_grading"]


def normalised(fn: Any) -> tuple[str, str]:
    """``(source, hash)`` of a function: its source as written, and a hash of it without comments, docstrings, layout
    or its name; ``("", "")`` when the source cannot be read (a builtin, a lambda typed at a prompt)."""
    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        return "", ""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source, hashlib.sha256(source.encode()).hexdigest()[:16]
    renamed: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.arg):
            node.arg = renamed.setdefault(node.arg, f"_{len(renamed)}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in renamed:
            node.id = renamed[node.id]
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            node.name = "_"
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                    and isinstance(body[0].value.value, str) and len(body) > 1:
                node.body = body[1:]
    return source, hashlib.sha256(ast.dump(tree, annotate_fields=False).encode()).hexdigest()[:16]


def _measured(detail: Any) -> dict[str, Any]:
    """What an item measured, as plain values: a comparison's ratio and interval, a count, a record's outcome."""
    if detail is None:
        return {}
    if isinstance(detail, int | float) and not isinstance(detail, bool):
        return {"value": detail}
    out: dict[str, Any] = {}
    for name in ("ratio", "verdict", "predicted_ratio", "measured_ratio", "outcome"):
        value = getattr(detail, name, None)
        if isinstance(value, str | int | float) and not isinstance(value, bool):
            out[name] = value
    ci = getattr(detail, "ci", None) or getattr(detail, "measured_ci", None)
    if isinstance(ci, tuple | list) and len(ci) == 2:
        out["ci"] = [float(ci[0]), float(ci[1])]
    return out


@dataclass(frozen=True)
class Grading(Saveable):
    """One graded check, as recorded.

    Attributes:
        lab: the lab's number (``"03"``), read from the exercise's title.
        exercise: the exercise's title.
        passed: whether every item held.
        items: each item's ``criterion``, ``ok``, ``message`` and what it ``measured``.
        failed_item: the number (from 1) of the first item that failed, or None.
        seed: the seed that reproduces the grading.
        graded_at: when (ISO, UTC).
        source, source_hash: the learner's fix and the hash of its normalised source (:func:`normalised`).
        prediction: the learner's prediction and its outcome, when the check concluded one.
        fingerprint: the machine (:func:`labkit.fingerprint`).
    """

    KIND: ClassVar[str] = "grading"

    lab: str
    exercise: str
    passed: bool
    items: tuple[dict[str, Any], ...]
    failed_item: int | None
    seed: int | None
    graded_at: str
    source: str = ""
    source_hash: str = ""
    prediction: dict[str, Any] = field(default_factory=dict)
    fingerprint: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def item(self, criterion: str) -> dict[str, Any] | None:
        """The first item of ``criterion`` (``"speed"``, ``"budget"``…), or None."""
        return next((i for i in self.items if i.get("criterion") == criterion), None)


def record_grading(title: str, result: Any, solution: Any, seed: int | None,
                   folder: str | Path | None = None) -> Path | None:
    """Write the record of one grade (a :class:`labkit.grading.CheckResult`) and return its path — or None, with one
    line on stderr, when it cannot be written (the grade stands)."""
    from labkit.measure.machine import fingerprint

    items = tuple({"criterion": i.criterion, "ok": bool(i.ok), "message": str(i.message),
                   "measured": _measured(i.detail)} for i in result.items)
    failed = next((n for n, i in enumerate(result.items, 1) if not i.ok), None)
    prediction = next((_measured(i.detail) for i in result.items if i.criterion == "prediction"
                       and getattr(i.detail, "outcome", None) is not None), {})
    source, digest = normalised(solution)
    lab = re.match(r"Lab (\d\d)\b", title)
    now = dt.datetime.now(dt.UTC)
    grading = Grading(lab.group(1) if lab else "", title, bool(result.passed), items, failed, seed,
                      now.isoformat(timespec="seconds"), source, digest, prediction, fingerprint())
    base = Path(folder) if folder is not None else results_dir() / "gradings"
    name = f"{now.strftime('%Y%m%d-%H%M%S-%f')}-lab{grading.lab or 'xx'}.json"
    try:
        return write_json_atomic(base / name, grading.to_dict())
    except Exception as e:  # a grade never fails because its record could not be kept
        print(f"labkit: this grading was not recorded ({e}); set PERFLAB_RESULTS to a writable folder to keep "
              "gradings for the room", file=sys.stderr)
        return None
