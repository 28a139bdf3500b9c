"""The labs' minutes agree with their headers: a lab whose header totals its section table ("**About N minutes
core, M with the optional sections**") has that total right (the table's minutes, to the nearest 5) and the same N
and M − N as its row in ``labkit/labs.py`` (from which the index's time table is made: tests/test_labs.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from labkit.labs import lab

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
TOTAL = re.compile(r"\*\*About (\d+) minutes core, (\d+) with the optional sections\*\*")


def _first_cell(path: Path) -> str:
    return "".join(json.loads(path.read_text())["cells"][0]["source"])


def _sections(header: str) -> dict[str, int]:
    """Minutes per kind (core, optional) summed over the header's section table."""
    sums = {"core": 0, "optional": 0}
    for line in header.splitlines():
        cols = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cols) >= 3 and cols[-2].isdigit() and cols[-1] in sums:
            sums[cols[-1]] += int(cols[-2])
    return sums


TOTALLED = [p for p in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")) if TOTAL.search(_first_cell(p))]


def test_some_labs_total_their_minutes():
    assert {p.name[:2] for p in TOTALLED} >= {"06", "07", "08"}


@pytest.mark.parametrize("path", TOTALLED, ids=[p.name for p in TOTALLED])
def test_header_total_matches_its_table_and_the_index(path):
    header = _first_cell(path)
    core, total = map(int, TOTAL.search(header).groups())
    sums = _sections(header)
    assert abs(sums["core"] - core) <= 2.5 and abs(sums["core"] + sums["optional"] - total) <= 2.5, (
        f"{path.name}: the header says {core} core / {total} in all, its table sums to {sums}")
    declared = lab(path.name[:2])
    assert declared.self_paced == (core, core) and declared.optional == total - core, (
        f"labkit/labs.py's row for lab {path.name[:2]} should say self_paced=({core}, {core}), "
        f"optional={total - core}, as the header does (then run labkit labs --write): {declared.minutes()}")
