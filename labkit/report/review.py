"""``labkit new-review NAME [--kind toyshop|function]``: start a design-review notebook from a template that runs
as is — on toyshop (the default), or on two functions of your own (``--kind function``: inputs generated at
several sizes, a size sweep, a comparison, the memory peak, the decision).

The template (``review_template.ipynb`` beside this module) walks the loop a review needs: the question; the
baseline and the candidate(s); the hypothesis with napkin math (``Experiment.plan``); the measurement
(``labkit.compare``, then ``labkit.load`` under load); the verdict; what would change my mind. It measures a
real toyshop change so a reviewer sees a complete, working example before replacing it with their own code.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from labkit.errors import BadInputError

__all__ = ["TEMPLATE", "TEMPLATES", "new_review"]

TEMPLATE = Path(__file__).with_name("review_template.ipynb")
#: the templates by kind
TEMPLATES = {"toyshop": TEMPLATE, "function": Path(__file__).with_name("function_review_template.ipynb")}


def new_review(name: str | os.PathLike[str], folder: str | os.PathLike[str] | None = None, *,
               kind: str = "toyshop") -> Path:
    """Copy a review template to ``NAME.ipynb`` in ``folder`` (default: the current folder).

    Args:
        name: the notebook's name.
        folder: where to write it.
        kind: ``toyshop`` (a change to the toy service, under load) or ``function`` (two functions of your own).

    Raises:
        BadInputError: the name is empty, the kind unknown, or the file already exists (it is never overwritten).
    """
    if kind not in TEMPLATES:
        raise BadInputError(f"--kind {kind!r}: the review templates are {', '.join(TEMPLATES)}")
    text = str(name).strip()
    if not text or text in (".", "..") or text.endswith(("/", os.sep)):
        raise BadInputError(f"new-review needs a name for the notebook, e.g. `labkit new-review orjson-export` "
                            f"(got {str(name)!r})")
    target = Path(folder or ".") / (text if text.endswith(".ipynb") else f"{text}.ipynb")
    if not target.parent.is_dir():
        raise BadInputError(f"cannot create {target}: the folder {target.parent} does not exist")
    try:
        with open(target, "xb") as out, open(TEMPLATES[kind], "rb") as src:  # "x": never overwrite, even in a race
            shutil.copyfileobj(src, out)
    except FileExistsError:
        raise BadInputError(f"{target} already exists and is kept as it is: choose another name, or move it "
                            "away first") from None
    return target
