"""The repository stands alone: nothing in it points outside it. A learner or a contributor who clones it has no
folder beside it, so a citation of one (a sibling folder of the house's private notes) or a relative link that leaves
the repository or names a missing file is a dead end. The facts the labs cite live in docs/references.md, the house
rules in docs/labs.md."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEXT = (".md", ".py", ".yml", ".yaml", ".csv", ".toml", ".txt", ".cfg", ".ipynb", ".j2", ".tmpl")
OUTSIDE = re.compile(r"\.\./shared|shared/seeds|\b(?:FACTS|LABS|DESIGN|STYLE)\.md\b")
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")


def _tracked() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout.splitlines()
    return [ROOT / p for p in listed if p.endswith(TEXT) and (ROOT / p).is_file()]


def _lines(path: Path) -> list[tuple[str, str]]:
    """(where, text) for each line a reader sees: a notebook's cells by number, any other file by line."""
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        return [(f"cell {n}", line) for n, c in enumerate(cells) for line in "".join(c["source"]).splitlines()]
    return [(f"line {n}", line) for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)]


def test_nothing_cites_a_path_outside_the_repository():
    here = Path(__file__).resolve()
    found = [f"{p.relative_to(ROOT)} {where}: {m.group(0)!r}" for p in _tracked() if p.resolve() != here
             for where, line in _lines(p) for m in OUTSIDE.finditer(line)]
    assert not found, "cite docs/references.md or docs/labs.md instead:\n" + "\n".join(found)


def test_every_relative_link_stays_inside_and_names_a_file_that_exists():
    broken = []
    for p in _tracked():
        if p.suffix not in (".md", ".ipynb"):
            continue
        for where, line in _lines(p):
            for m in LINK.finditer(line):
                target = m.group(1)
                if re.match(r"[a-z]+:", target) or target.startswith("/"):
                    continue  # a URL (the labs link to public docs) or an absolute path on purpose
                resolved = (p.parent / target).resolve()
                if not resolved.is_relative_to(ROOT) or not resolved.exists():
                    broken.append(f"{p.relative_to(ROOT)} {where}: ({target})")
    assert not broken, "links that leave the repository or name no file:\n" + "\n".join(broken)


def test_the_references_page_holds_every_identifier_the_labs_cite():
    page = (ROOT / "docs" / "references.md").read_text(encoding="utf-8")
    cited = {m for p in _tracked() if p.name != "references.md" for _, line in _lines(p)
             for m in re.findall(r"\b[SI]00[0-3]-\d+\b", line)}
    assert cited and not {c for c in cited if c not in page}, sorted(c for c in cited if c not in page)
