"""What a report costs: ``labkit report`` of lab 02 with ``--quick``, beside running the same notebook bare.

Issue 16 asks for the time to produce a report of lab 02 with ``--quick`` and the size of its HTML. Both are
shown as ratios measured in one run: the report's wall time over papermill alone on the same notebook (each a
fresh process, interleaved: bare, report, bare, report …), the render step's share, and the HTML's size over
the executed notebook's. Run it under the shared lock, alone:

    flock /tmp/perflab-bench.lock .venv/bin/python tests/benchmarks/bench_report.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "notebooks" / "02_nplusone.ipynb"
BARE = ("import sys, papermill; papermill.execute_notebook(sys.argv[1], sys.argv[2], parameters={'QUICK': True}, "
        "kernel_name='python3', cwd=sys.argv[3], progress_bar=False)")


def _timed(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    secs = time.perf_counter() - t0
    if done.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{done.stderr[-2000:]}")
    return secs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2, help="interleaved pairs (bare run, report) to time")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-report-"))
    env = dict(os.environ, PERFLAB_RESULTS=str(work / "results"))
    labkit = str(Path(sys.executable).with_name("labkit"))
    print(f"lab 02 --quick, {args.rounds} interleaved pair(s); load average at start {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores")
    bare, report, html = [], [], []
    for i in range(args.rounds):
        out = work / f"bare-{i}.ipynb"
        bare.append(_timed([sys.executable, "-c", BARE, str(LAB), str(out), str(LAB.parent)], env))
        target = work / f"report-{i}.html"
        report.append(_timed([labkit, "report", str(LAB), "--quick", "--no-progress", "--out", str(target)], env))
        html.append(target)
        print(f"  pair {i + 1}: papermill alone {bare[-1]:.1f} s, labkit report {report[-1]:.1f} s "
              f"→ {report[-1] / bare[-1]:.2f}×")
    runs = sorted((work / "results" / "reports").glob("02_nplusone-*/report.json"))
    executed = [json.loads(p.read_text()) for p in runs]
    ran = [r["duration_s"] for r in executed]
    # within each report: the notebook's own run (report.json) against everything else (start-up, render, write)
    extra = [(wall - r) / r for wall, r in zip(report, ran, strict=True)]
    t0 = time.perf_counter()
    from labkit.report import render

    last = Path(executed[-1]["folder"])
    rendered = render(last / "02_nplusone.ipynb", results=last)
    render_s = time.perf_counter() - t0
    size = html[-1].stat().st_size
    nb_size = (last / "02_nplusone.ipynb").stat().st_size
    ratios = [r / b for r, b in zip(report, bare, strict=True)]
    print(f"time to produce the report: median {statistics.median(report):.1f} s = "
          f"{statistics.median(ratios):.2f}× papermill alone (median {statistics.median(bare):.1f} s)")
    print(f"  within each report, what is not the notebook's run (start-up, render, write) / the run: "
          f"{', '.join(f'{x:.2f}' for x in extra)} (the run itself: {', '.join(f'{r:.0f} s' for r in ran)})")
    print(f"  rendering it again here "
          f"(first render in this process, imports included): {render_s:.1f} s = {render_s / statistics.median(report):.2f} "
          f"of the report's time")
    print(f"HTML: {size / 1024:,.0f} KiB with {rendered.counts['charts']} charts as SVG = "
          f"{size / nb_size:.2f}× the executed notebook ({nb_size / 1024:,.0f} KiB, which carries each chart's "
          f"JavaScript in its widget state)")
    print(f"(files kept in {work})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
