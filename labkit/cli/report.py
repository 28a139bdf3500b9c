"""``labkit report NOTEBOOK [-p NAME=VALUE …] [--quick] [--out FILE.html] [--baseline FOLDER]``."""

from __future__ import annotations

import argparse

from labkit.errors import BadInputError

__all__ = ["main"]

EPILOG = """\
The run's folder (results/reports/<notebook>-<time>/) keeps the executed notebook, every result it saved and
report.json; the HTML goes beside it unless --out says otherwise. It opens offline: charts are drawn as SVG.

examples:
  labkit report notebooks/02_nplusone.ipynb --quick
  labkit report review.ipynb -p ROUNDS=40 --baseline results/reports/review-20261130-101500/
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="labkit report", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run a notebook with parameters and write one self-contained HTML report of it.")
    p.add_argument("notebook", help="the notebook (.ipynb) to run")
    p.add_argument("-p", "--parameter", action="append", default=[], metavar="NAME=VALUE",
                   help="set a parameter of the notebook's parameters cell (a Python literal, else text); repeatable")
    p.add_argument("--quick", action="store_true", help="pass QUICK=True: the notebook's quick settings")
    p.add_argument("--out", metavar="FILE.html", help="where to write the report (default: beside the run's folder)")
    p.add_argument("--baseline", metavar="FOLDER",
                   help="an earlier run's folder: compare each experiment's ratio interval with it, by title")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run ``labkit report …``; 0 when the report is written, 1 when the notebook or the report failed."""
    from labkit.report.pipeline import build
    from labkit.report.run import parse_parameters

    args = _parser().parse_args(argv)
    params = parse_parameters(args.parameter)
    if args.quick:
        if params.get("QUICK", True) is not True:
            raise BadInputError(f"--quick and -p QUICK={params['QUICK']!r} disagree: pass one of them")
        params["QUICK"] = True
    run, rendered = build(args.notebook, params, out=args.out, baseline=args.baseline,
                          progress=not args.no_progress)
    size = len(rendered.html.encode())
    line = (f"wrote {run.html} ({size / 1024:,.0f} KiB, opens offline): {len(rendered.experiments)} experiment(s), "
            f"{rendered.counts.get('charts', 0)} chart(s)")
    if rendered.changes is not None:
        moved = [c for c in rendered.changes if c.changed or c.status == "missing"]
        line += "; against the baseline: " + (", ".join(f"{c.status} — {c.title}" for c in moved)
                                               if moved else "nothing changed")
    print(line)
    return 0
