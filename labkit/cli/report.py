"""``labkit report NOTEBOOK [-p NAME=VALUE …] [--quick] [--out FILE.html] [--baseline FOLDER [--compare-anyway]]``
and ``labkit report --render RUN_FOLDER [--baseline FOLDER]``."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from labkit.errors import BadInputError, BaselineError

if TYPE_CHECKING:
    from labkit.report.html import Rendered
    from labkit.report.run import ReportRun

__all__ = ["main"]

EPILOG = """\
The run's folder (results/reports/<notebook>-<time>/) keeps the executed notebook, every result it saved and
report.json; the HTML goes beside it unless --out says otherwise. It opens offline: charts are drawn as SVG.
A -p value becomes the type of the parameter's default: a tuple parameter takes -p SIZES=5,50 or '[5, 50]'.
A baseline must be a completed run of the same notebook with the same parameters (exit 2 otherwise), unless
--compare-anyway, and then the page says what differs.

examples:
  labkit report notebooks/02_nplusone.ipynb --quick
  labkit report review.ipynb -p ROUNDS=40 --baseline results/reports/review-20261130-101500/
  labkit report --render results/reports/review-20261201-093000/ --baseline results/reports/review-20261130-101500/
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="labkit report", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run a notebook with parameters and write one self-contained HTML report of it.")
    p.add_argument("notebook", nargs="?", help="the notebook (.ipynb) to run")
    p.add_argument("-p", "--parameter", action="append", default=[], metavar="NAME=VALUE",
                   help="set a parameter of the notebook's parameters cell (made the type of its default); "
                        "repeatable")
    p.add_argument("--quick", action="store_true", help="pass QUICK=True: the notebook's quick settings")
    p.add_argument("--out", metavar="FILE.html", help="where to write the report (default: beside the run's folder)")
    p.add_argument("--baseline", metavar="FOLDER",
                   help="an earlier run's folder: compare each experiment's ratio interval with it, by title")
    p.add_argument("--compare-anyway", action="store_true",
                   help="accept a baseline of another notebook or other parameters (the page says what differs)")
    p.add_argument("--render", metavar="RUN_FOLDER",
                   help="rebuild the page of a finished run from its folder, without running the notebook")
    p.add_argument("--repeat", type=int, default=1, metavar="K",
                   help="run it K times, each in a fresh kernel: the page says in how many runs each verdict held")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def _report(args: argparse.Namespace) -> tuple[ReportRun, Rendered]:
    from labkit.report.pipeline import build, rerender
    from labkit.report.run import parse_parameters

    if args.render is not None:
        if args.notebook or args.parameter or args.quick:
            raise BadInputError("--render rebuilds a finished run's page as it ran: pass no notebook, -p or "
                                "--quick with it (run the notebook again to change them)")
        return rerender(args.render, baseline=args.baseline, compare_anyway=args.compare_anyway, out=args.out)
    if not args.notebook:
        raise BadInputError("which notebook? e.g. `labkit report review.ipynb --quick`, or "
                            "`labkit report --render RUN_FOLDER` for a finished run")
    params = parse_parameters(args.parameter)
    raw = {pair.partition("=")[0].strip(): pair.partition("=")[2] for pair in args.parameter}
    return build(args.notebook, params, quick=args.quick, raw=raw, out=args.out, baseline=args.baseline,
                 compare_anyway=args.compare_anyway, progress=not args.no_progress, repeat=args.repeat)


def main(argv: list[str] | None = None) -> int:
    """Run ``labkit report …``; 0 when the report is written, 1 when the notebook or the report failed, 2 when
    the baseline cannot stand for this run."""
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        run, rendered = _report(args)
    except BaselineError as e:
        print(f"labkit report: {e}", file=sys.stderr)
        return 2
    size = len(rendered.html.encode())
    line = (f"wrote {run.html} ({size / 1024:,.0f} KiB, opens offline): {len(rendered.experiments)} experiment(s), "
            f"{rendered.counts.get('charts', 0)} chart(s)")
    if rendered.changes is not None:
        moved = [c for c in rendered.changes if c.changed or c.status == "missing"]
        line += "; against the baseline: " + (", ".join(f"{c.status} — {c.title}" for c in moved)
                                               if moved else "nothing changed")
    print(line)
    return 0
