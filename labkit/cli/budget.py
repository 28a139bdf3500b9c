"""``labkit budget history LEDGER``: a drift ledger read back, each test's counts from first run to last.
``labkit budget gate --base REV --cases FILE``: each timed case on the base revision and the working tree,
interleaved; exit 1 only on a confident slowdown beyond a case's threshold (see labkit.gate)."""

from __future__ import annotations

import argparse

from labkit.budget import history


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="labkit budget", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    h = sub.add_parser("history", help="each budgeted count's first and last value, and every change of figure")
    h.add_argument("ledger", help="the ledger pytest --budget-ledger= wrote")
    g = sub.add_parser("gate", help="time the declared cases on the base revision and the working tree")
    g.add_argument("--base", required=True, help="the revision to compare against (a branch, tag or commit)")
    g.add_argument("--cases", required=True, help="the file of @labkit.gate.timed cases, in the working tree")
    g.add_argument("--repo", default=".", help="the repository (default: here)")
    g.add_argument("--max-time", type=float, default=20.0, help="seconds per case at most (default 20)")
    g.add_argument("--install", action=argparse.BooleanOptionalAction, default=None,
                   help="build and install each tree's project before timing it (default: when the repository "
                        "has a pyproject.toml or setup.py); --no-install imports each tree's source")
    g.add_argument("--ledger", default=None, help="append each case's ratio and verdict to this drift ledger")
    e = sub.add_parser("export-asv", help="write the ledger as an asv results folder (asv publish reads it)")
    e.add_argument("ledger")
    e.add_argument("folder", help="the asv results folder to write (results_dir of asv.conf.json)")
    e.add_argument("--machine", default="", help="the machine's name in asv (default: this host's)")
    args = parser.parse_args(argv)
    if args.command == "history":
        print(history(args.ledger))
        return 0
    if args.command == "export-asv":
        from labkit.budget import export_asv

        print(f"wrote {export_asv(args.ledger, args.folder, args.machine)}")
        return 0
    from labkit.gate import gate

    results = gate(args.repo, args.base, args.cases, max_time=args.max_time, install=args.install)
    for r in results:
        print(r)
    if args.ledger:
        from labkit.budget import append_times

        append_times(args.ledger, args.base, results)
    failed = [r.case for r in results if r.failed]
    if failed:
        print(f"\n{len(failed)} case(s) confidently slower than {args.base} beyond their threshold: "
              f"{', '.join(failed)}")
    return 1 if failed else 0
