"""``labkit latency [--quick] [--json] [--save PATH]``: measure the table and print it."""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run the latency probes and print the table (text, or JSON with ``--json``); return the exit code."""
    from labkit.latency.ladder import PROBES, table

    parser = argparse.ArgumentParser(prog="labkit latency",
                                     description="Measure the latency-numbers table on this machine.")
    parser.add_argument("--quick", action="store_true", help="smaller working sets, files and sample counts (faster, noisier)")
    parser.add_argument("--json", action="store_true", help="print the full result (raw samples) as JSON")
    parser.add_argument("--save", metavar="PATH", help="also save the result as JSON to PATH")
    parser.add_argument("--only", metavar="PROBE", action="append", choices=list(PROBES),
                        help="run only this probe (repeatable)")
    parser.add_argument("--skip", metavar="PROBE", action="append", choices=list(PROBES), default=[],
                        help="skip this probe (repeatable), e.g. --skip http")
    parser.add_argument("--no-progress", action="store_true", help="do not print progress to stderr")
    args = parser.parse_args(argv)
    try:
        result = table(quick=args.quick, progress=not args.no_progress, include=args.only, exclude=args.skip)
    except KeyboardInterrupt:
        print("interrupted: temporary files were removed", file=sys.stderr)
        return 130
    if args.save:
        result.save(args.save)
    if args.json:
        json.dump(result.to_dict(), sys.stdout, indent=1)
        print()
    else:
        print(result)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
