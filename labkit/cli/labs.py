"""``labkit labs [--write] [--root DIR]``: the labs as declared in ``labkit/labs.py``, and the tables made from them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """List the labs; ``--write`` makes README.md's and the index's tables equal to them again."""
    from labkit.labs import LABS, sync

    parser = argparse.ArgumentParser(prog="labkit labs", description="The labs, declared once in labkit/labs.py.")
    parser.add_argument("--write", action="store_true", help="rewrite README.md's and notebooks/index.ipynb's tables")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[2],
                        help="the repository (default: the one this labkit is installed from)")
    args = parser.parse_args(argv)
    for x in LABS:
        print(f"{x.number}  {x.notebook:<28} {x.slot:>3} min slot  {x.minutes():<18} {x.title}")
    if not (args.root / "README.md").is_file():
        print(f"labkit labs: {args.root} holds no README.md: pass the repository with --root", file=sys.stderr)
        return 2
    problems = sync(args.root, write=args.write)
    for line in problems:
        print(f"labkit labs: {line}", file=sys.stderr)
    if problems and not args.write:
        print("labkit labs: run `labkit labs --write` to make them equal", file=sys.stderr)
    return 1 if problems else 0
