"""``labkit new-lab NN name``: the skeletons a new lab needs, written into a checkout and registered in the table.

:func:`new_lab` writes, from the templates beside this file, the notebook (the anatomy: header table with minutes,
the parameters cell with ``QUICK``, a guess before the measurement, an experiment planned before it is measured,
the verdict, the exercise, takeaways and questions), its instructor notes, a grader module on the kit
(:mod:`labkit.grading`) and its test with ``GRADER_CASES``, each a small working example to replace; then it adds
the lab's row to ``labkit/labs.py`` and makes README's and the index's tables again (:func:`labkit.labs.sync`).
Nothing is overwritten: a file that exists already stops it before anything is written.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from labkit.errors import BadInputError

__all__ = ["NewLab", "new_lab"]

_TEMPLATES = Path(__file__).with_name("templates")
_NAME = re.compile(r"[a-z][a-z0-9_]{1,30}")


@dataclass(frozen=True)
class NewLab:
    """What :func:`new_lab` did: the files it wrote and those it changed, relative to the repository."""

    written: tuple[str, ...]
    changed: tuple[str, ...]

    def __str__(self) -> str:
        return "\n".join([*(f"wrote    {p}" for p in self.written), *(f"changed  {p}" for p in self.changed)])


def _fill(template: str, number: str, title: str) -> str:
    import platform

    text = (_TEMPLATES / template).read_text(encoding="utf-8")
    return text.replace("{{NN}}", number).replace("{{TITLE}}", title).replace("{{PYTHON}}", platform.python_version())


def _notebook(text: str) -> str:
    """A notebook from the percent-format template: ``# %% [markdown]``, ``# %% [parameters]`` and ``# %%`` start
    cells; a markdown cell's text is written as it is (no comment marks)."""
    cells = []
    for n, chunk in enumerate(re.split(r"^# %%", text, flags=re.M)[1:]):
        head, _, body = chunk.partition("\n")
        kind = head.strip().strip("[]")
        source = body.rstrip("\n")
        if kind == "markdown":
            source = re.sub(r"^(Lab \d\d — )", r"# \1", source) if n == 0 else source
            cells.append({"cell_type": "markdown", "id": f"cell-{n:02d}", "metadata": {},
                          "source": source.splitlines(keepends=True)})
        else:
            tags = {"tags": ["parameters"]} if kind == "parameters" else {}
            cells.append({"cell_type": "code", "execution_count": None, "id": f"cell-{n:02d}", "metadata": tags,
                          "outputs": [], "source": source.splitlines(keepends=True)})
    nb = {"cells": cells, "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                                                      "name": "python3"},
                                       "language_info": {"name": "python"}},
          "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def _row(number: str, stem: str, title: str) -> str:
    return (f"    Lab({number!r}, {stem!r}, {title!r},\n"
            f"        readme='TODO: what you will be able to do (README)',\n"
            f"        index='TODO: the same, shorter (the index)',\n"
            f"        charts=2, slot=75, self_paced=(70, 70), optional=10, builds_on='00'),\n")


def new_lab(root: str | os.PathLike[str], number: int | str, name: str, title: str | None = None) -> NewLab:
    """Write a new lab's skeletons into the checkout at ``root`` and register it.

    Args:
        root: the repository (it holds ``labkit/labs.py``, ``notebooks/`` and ``tests/``).
        number: the lab's number, 0–99; it must not be taken.
        name: the notebook's name after the number, lower case with underscores (``"cache_stampede"``).
        title: as the tables show it (default: ``name`` with spaces).

    Returns:
        A :class:`NewLab` listing what was written and changed.
    """
    base = Path(root)
    labs_py = base / "labkit" / "labs.py"
    if not labs_py.is_file():
        raise BadInputError(f"{base} is not a perflab checkout: it has no labkit/labs.py. Run labkit new-lab "
                            "in the repository's folder, or pass --root")
    if not (isinstance(number, int) or str(number).isdigit()) or not 0 <= int(number) <= 99:
        raise BadInputError(f"the lab's number must be 0–99, got {number!r} (e.g. labkit new-lab 10 cache_stampede)")
    nn = f"{int(number):02d}"
    if not _NAME.fullmatch(name or ""):
        raise BadInputError(f"the lab's name must be lower case letters, digits and underscores, got {name!r} "
                            "(e.g. labkit new-lab 10 cache_stampede)")
    source = labs_py.read_text(encoding="utf-8")
    # the checkout's own table (root may be another checkout than the labkit imported here)
    if nn in set(re.findall(r"Lab\(\s*['\"](\d\d)['\"]", source)):
        raise BadInputError(f"lab {nn} exists already (labkit/labs.py): pick the next free number")
    stem, title = f"{nn}_{name}", title or name.replace("_", " ")
    files = {f"notebooks/{stem}.ipynb": _notebook(_fill("notebook.py.tmpl", nn, title)),
             f"notebooks/instructor/{stem}.md": _fill("notes.md.tmpl", nn, title),
             f"labkit/exercises/lab{nn}.py": _fill("grader.py.tmpl", nn, title),
             f"tests/test_lab{nn}.py": _fill("test.py.tmpl", nn, title)}
    there = [p for p in files if (base / p).exists()]
    if there:
        raise BadInputError(f"{', '.join(there)} exist already: new-lab writes over nothing. Pick another number "
                            "or name, or remove the old files first")
    end = source.find("\n)\n", source.find("LABS: tuple[Lab, ...] = ("))
    if end < 0:
        raise BadInputError("labkit/labs.py has no LABS table to add the row to: restore it from git")
    for rel, text in files.items():
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_text(text, encoding="utf-8")
    labs_py.write_text(source[: end + 1] + _row(nn, stem, title) + source[end + 1:], encoding="utf-8")
    _sync_with(base)
    return NewLab(tuple(files), ("labkit/labs.py", "README.md", "notebooks/index.ipynb"))


def _sync_with(base: Path) -> None:
    """Regenerate the tables from the checkout's own labs.py (which may not be the one imported here)."""
    spec = importlib.util.spec_from_file_location("_perflab_labs", base / "labkit" / "labs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    try:
        spec.loader.exec_module(module)
        module.sync(base, write=True)
    finally:
        sys.modules.pop(spec.name, None)
