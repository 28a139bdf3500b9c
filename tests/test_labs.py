"""The labs are declared once (``labkit/labs.py``'s ``LABS``): every table that lists them is made from it, and every
lab it names has what a lab needs — its notebook, grader, instructor notes and test."""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import pytest

from labkit.labs import LABS, QUICK_BUDGET_S, lab, sync, tables

ROOT = Path(__file__).resolve().parents[1]
NUMBERED = sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def test_readme_and_index_tables_are_made_from_labs():
    problems = sync(ROOT)
    assert not problems, "\n".join(problems) + "\nrun: .venv/bin/labkit labs --write"


def test_every_numbered_notebook_is_a_lab_and_every_lab_a_notebook():
    assert [x.notebook for x in LABS] == NUMBERED, "add the lab's row to LABS in labkit/labs.py (labkit new-lab does)"
    assert [x.number for x in LABS] == sorted({x.number for x in LABS}), "one row per number, in order"
    assert set(QUICK_BUDGET_S) == {"index.ipynb", *NUMBERED}
    assert lab(7).stem == "07_tail_latency" and lab("07") is lab(7)
    with pytest.raises(KeyError, match="the labs are 00"):
        lab(99)


@pytest.mark.parametrize("x", LABS, ids=[x.number for x in LABS])
def test_each_lab_has_its_grader_notes_and_test(x):
    grader = importlib.import_module(x.grader)
    assert callable(grader.check) and callable(grader.hint) and callable(grader.solution), x.grader
    notes = ROOT / x.notes
    assert notes.is_file(), f"{x.notes} is missing (labkit new-lab writes its skeleton)"
    assert re.match(rf"# Instructor notes — Lab {x.number}\b", notes.read_text()), f"{x.notes}: first line"
    versions = notes.read_text().partition("\n## Python versions\n")[2]
    assert re.search(r"3\.11\.\d", versions) and "3.12–3.14" in versions, \
        f"{x.notes}: a '## Python versions' section says which CPython its ranges were measured on, and what differs on 3.12–3.14"
    test = ROOT / x.test
    assert test.is_file() and "GRADER_CASES" in test.read_text(), f"{x.test} must declare GRADER_CASES"
    assert x.charts >= 1 and 0 < x.quick_budget_s <= 90 and x.slot > 0
    assert x.self_paced[0] <= x.self_paced[1]


@pytest.mark.parametrize("x", LABS, ids=[x.number for x in LABS])
def test_each_notebook_opens_with_its_number_and_title(x):
    first = "".join(json.loads((ROOT / "notebooks" / x.notebook).read_text())["cells"][0]["source"])
    assert first.lstrip("# ").lower().startswith(f"lab {x.number}"), f"{x.notebook}'s first line should name lab {x.number}"


def test_the_tables_list_every_lab_once():
    made = tables()
    for name, text in made.items():
        for x in LABS:
            assert text.count(f"{x.number} ") >= 1, (name, x.number)
    assert made["index-times"].rstrip().endswith("cores only.")
