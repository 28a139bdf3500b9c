"""The grader kit, behind one face: every exercise module (``labkit.exercises.labNN``) imports from here only.

- :mod:`labkit.grading.kit` — the criteria (:func:`answers`, :func:`metered`, :func:`timed`, :func:`planned`,
  :func:`prediction`), :class:`Exercise` with its hints and solution, the grade's values, and the threat model;
- :mod:`labkit.grading.calls` — :class:`Caller`: the one worker thread that makes every graded call, timed and
  metered, the same way in every phase;
- :mod:`labkit.grading.exact` — :func:`difference`: answers compared in a canonical form no object can fake;
- :mod:`labkit.grading.sealing` — :func:`seal`: a module's names bound at import, so rebinding them later changes
  nothing a grader runs.

``compare`` and ``Experiment`` are re-exported as the kit binds them (at import), so a grader measures and reads
records through the same names the kit itself uses.
"""

from labkit.grading.calls import CLOCK, Caller, Meter, Outcome
from labkit.grading.exact import difference, kind
from labkit.grading.kit import (
    CheckResult,
    Exercise,
    Item,
    Note,
    Watch,
    answers,
    band,
    failed,
    fresh_seed,
    metered,
    not_callable,
    passed,
    planned,
    prediction,
    quiet,
    timed,
)
from labkit.grading.sealing import seal
from labkit.learner.record import Experiment
from labkit.measure.comparison import compare

__all__ = ["CLOCK", "Caller", "CheckResult", "Exercise", "Experiment", "Item", "Meter", "Note", "Outcome", "answers",
           "band", "compare", "difference", "failed", "fresh_seed", "kind", "metered", "not_callable", "passed",
           "planned", "prediction", "quiet", "seal", "timed", "Watch"]
