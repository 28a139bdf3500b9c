"""``labkit room collect DIR… [--out room.html] [--names]``: the learners' experiment records and gradings on one
offline page; ``labkit room gradebook DIR… [--out gradebook.csv]`` and ``labkit room gallery DIR… [--out
gallery.html]``: who passed, as a CSV, and the passing fixes side by side."""

from __future__ import annotations

import argparse
from pathlib import Path

from labkit.errors import ResultsError
from labkit.workshop import room as room_module
from labkit.workshop.gradebook import COLUMNS, gallery, gradebook_csv
from labkit.workshop.room import collect, render

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """``labkit room collect DIR… [--out room.html]``: write the room's page; exit 0 even when files were skipped."""
    parser = argparse.ArgumentParser(prog="labkit room", description=room_module.__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="action", required=True)
    c = sub.add_parser("collect", help="gather the learners' experiment records into one offline HTML page")
    c.add_argument("folders", nargs="+", metavar="DIR", help="a hub's home folders, or folders of handed-in files")
    c.add_argument("--out", default="room.html", help="the page to write (default: room.html)")
    c.add_argument("--names", action="store_true", help="show the learners' names (default: anonymous ids)")
    b = sub.add_parser("gradebook", help="who passed which exercise, as one CSV for a gradebook (columns: "
                                         + ", ".join(COLUMNS) + ")")
    b.add_argument("folders", nargs="+", metavar="DIR")
    b.add_argument("--out", default="gradebook.csv", help="the CSV to write (default: gradebook.csv)")
    b.add_argument("--names", action="store_true", help="the learners' names instead of anonymous ids")
    g = sub.add_parser("gallery", help="each exercise's passing fixes, anonymised, deduplicated and ranked")
    g.add_argument("folders", nargs="+", metavar="DIR")
    g.add_argument("--out", default="gallery.html", help="the page to write (default: gallery.html)")
    args = parser.parse_args(argv)
    room = collect(*args.folders)
    out = Path(args.out)
    text = {"collect": lambda: render(room, names=args.names),
            "gradebook": lambda: gradebook_csv(room, names=args.names),
            "gallery": lambda: gallery(room)}[args.action]()
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as e:
        raise ResultsError(f"cannot write {out}: {e.strerror or e}; pass --out with a writable path") from e
    for path, why in room.skipped:
        print(f"skipped {path}: {why}")
    learners = len({e.learner for e in room.entries} | {learner for learner, _ in room.gradings})
    print(f"{len(room.entries)} record(s) and {len(room.gradings)} grading(s) from {learners} learner(s), "
          f"{len(room.skipped)} file(s) skipped → {out}")
    return 0
