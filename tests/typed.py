"""Wrong answers typed into a lab, as a hurried learner types them: every guess cell and every plan filled in,
each far from anything the lab can measure — so the suite's run of a lab walks the learner's path (the guess
judged beside its measurement, the plan saved, concluded and judged) and every judged prediction must read
``refuted`` (test_notebooks.py). Only what a name says the kind of (:func:`labkit.learner.guesses.expects`)
is typed; a codec's name, a ranking or a hypothesis left as ``None`` stays skipped."""

from __future__ import annotations

import re
from typing import Any

from labkit.learner.guesses import expects

#: a predicted ratio (candidate ÷ baseline time) nothing in the labs comes near: a hundred times slower (5 was
#: tried first, and lab 00's quadratic += and lab 04's record-vs-column sums measure about 4)
WRONG_RATIO = 100.0
#: what a learner's own hypothesis says when the name asks for one (``my_hypothesis``)
WRONG_HYPOTHESIS = "(typed by the suite, deliberately wrong) it gets a hundred times slower"
#: a value per kind of guess, each orders of magnitude from what the labs measure
_WRONG = {"pct": 99.0, "share": 0.99, "time": 0.001, "count": 997, "number": 7.0}
_GUESS = re.compile(r"^(\s*)(my_\w+) = None\b")
_PLAN = re.compile(r"predicted_ratio=None\b")
_TODO = re.compile(r'"TODO: ?')


def wrong_value(name: str) -> float | int | str | None:
    """The wrong answer typed for the guess called ``name``, or None when its name does not say its kind: a
    ratio where the name says one (``_ratio``, ``_x``, ``_over_``, or ``my_ratio_…``), a hypothesis's text."""
    if name.endswith("_hypothesis"):
        return WRONG_HYPOTHESIS
    want = expects(name)
    if want is None:
        return WRONG_RATIO if "_ratio" in name else None
    if want[0] == "ratio":  # a speed-up of a thousand, or a ratio of five: each far from any measurement
        return 1000.0 if name.endswith(("_x", "_speedup")) else WRONG_RATIO
    return _WRONG[want[0]]


def type_wrong(nb: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``nb`` (a notebook's JSON) with the wrong answers typed into its code cells, and what was typed."""
    typed: list[str] = []

    def guess(m: re.Match[str]) -> str:
        value = wrong_value(m.group(2))
        if value is None:
            return m.group(0)
        typed.append(f"{m.group(2)} = {value!r}")
        return f"{m.group(1)}{m.group(2)} = {value!r}"

    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        out = "\n".join(_GUESS.sub(guess, line) for line in source.split("\n"))
        if "Experiment.plan(" in out:  # the hypothesis written, the prediction typed (or taken from a typed guess)
            out = _TODO.sub('"(typed by the suite, deliberately wrong) ', out)
            if _PLAN.search(out):
                out = _PLAN.sub(f"predicted_ratio={WRONG_RATIO}", out)
                typed.append(f"a plan with predicted_ratio={WRONG_RATIO}")
        cell["source"] = out.splitlines(keepends=True)
    return nb, typed
