"""``labkit budget history LEDGER``: a drift ledger read back, each test's counts from first run to last."""

from __future__ import annotations

import argparse

from labkit.budget import history


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="labkit budget", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    h = sub.add_parser("history", help="each budgeted count's first and last value, and every change of figure")
    h.add_argument("ledger", help="the ledger pytest --budget-ledger= wrote")
    args = parser.parse_args(argv)
    print(history(args.ledger))
    return 0
