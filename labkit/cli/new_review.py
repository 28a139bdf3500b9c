"""``labkit new-review NAME``: a design-review notebook to start from (:func:`labkit.report.new_review`)."""

from __future__ import annotations

import argparse

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run ``labkit new-review NAME``."""
    from labkit.report.review import TEMPLATES, new_review

    p = argparse.ArgumentParser(
        prog="labkit new-review",
        description="Copy the design-review template to NAME.ipynb in the current folder (never overwriting).")
    p.add_argument("name", help="the new notebook's name (NAME or NAME.ipynb)")
    p.add_argument("--kind", choices=sorted(TEMPLATES), default="toyshop",
                   help="toyshop: a change to the toy service (default); function: two functions of your own")
    args = p.parse_args(argv)
    path = new_review(args.name, kind=args.kind)
    what = "on toyshop" if args.kind == "toyshop" else "on two example CSV parsers"
    print(f"wrote {path}: it runs as is {what}. Open it in JupyterLab, replace the example with your "
          f"question, baseline and candidate, then: labkit report {path} --quick")
    return 0
