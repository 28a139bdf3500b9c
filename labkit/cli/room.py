"""``labkit room collect DIR… [--out room.html]``: the learners' experiment records on one offline page."""

from __future__ import annotations

import argparse
from pathlib import Path

from labkit.errors import ResultsError
from labkit.workshop import room as room_module
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
    args = parser.parse_args(argv)
    room = collect(*args.folders)
    out = Path(args.out)
    try:
        out.write_text(render(room), encoding="utf-8")
    except OSError as e:
        raise ResultsError(f"cannot write {out}: {e.strerror or e}; pass --out with a writable path") from e
    for path, why in room.skipped:
        print(f"skipped {path}: {why}")
    learners = len({e.learner for e in room.entries})
    print(f"{len(room.entries)} record(s) from {learners} learner(s), {len(room.skipped)} file(s) skipped → {out}")
    return 0
