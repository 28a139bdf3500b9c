"""``labkit new-review NAME``: a design-review notebook to start from (:func:`labkit.report.new_review`)."""

from __future__ import annotations

import argparse

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run ``labkit new-review NAME``."""
    from labkit.report.review import new_review

    p = argparse.ArgumentParser(
        prog="labkit new-review",
        description="Copy the design-review template to NAME.ipynb in the current folder (never overwriting).")
    p.add_argument("name", help="the new notebook's name (NAME or NAME.ipynb)")
    args = p.parse_args(argv)
    path = new_review(args.name)
    print(f"wrote {path}: it runs as is on toyshop. Open it in JupyterLab, replace the example with your "
          f"question, baseline and candidate, then: labkit report {path} --quick")
    return 0
