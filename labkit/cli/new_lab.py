"""``labkit new-lab NN name [--title T] [--root DIR]``: a new lab's skeletons, registered in labkit/labs.py."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Write the lab's notebook, instructor notes, grader and test; add its row to the labs' table."""
    from labkit.scaffold import new_lab

    parser = argparse.ArgumentParser(prog="labkit new-lab", description="Start a new lab from the skeletons.")
    parser.add_argument("number", help="the lab's number, e.g. 10")
    parser.add_argument("name", help="the notebook's name after the number, e.g. cache_stampede")
    parser.add_argument("--title", help="the title the tables show (default: the name with spaces)")
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the repository (default: this folder)")
    args = parser.parse_args(argv)
    done = new_lab(args.root, args.number, args.name, args.title)
    print(done)
    print("next: fill in every TODO (the notebook, the grader and its test, the notes, the lab's row in "
          "labkit/labs.py), then `labkit labs --write` and `make test` (docs/labs.md: adding a lab)")
    return 0
