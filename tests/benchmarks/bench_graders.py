"""Every exercise grader against its reference, the baseline, the cheats and a wrong answer, 10 times each.

docs/labs.md's contract: the reference passes and every other case fails, **10 times in 10** on a busy 2-core
machine. The suite (tests/test_lab*.py) runs each case once; this runs them ``--times`` times and prints the
tallies, one line per lab and case, with the wall time of a grading.

    flock /tmp/perflab-bench.lock .venv/bin/python tests/benchmarks/bench_graders.py [--times 10] [--lab 02]

A lab registers its cases as ``GRADER_CASES`` at module level in its test module (see tests/graderkit.py).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))

from graderkit import run_cases, should_pass  # noqa: E402

# thousands of gradings are not a room's: keep them out of the results folder
os.environ.setdefault("PERFLAB_GRADINGS", "off")


def _modules(only: str | None) -> list[tuple[str, dict]]:
    out = []
    for path in sorted(TESTS.glob("test_*.py")):
        text = path.read_text()
        if "GRADER_CASES" not in text:
            continue
        spec = importlib.util.spec_from_file_location(path.stem, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        cases = getattr(mod, "GRADER_CASES", None)
        if cases and (only is None or only in path.stem):
            out.append((path.stem, cases))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--times", type=int, default=10)
    ap.add_argument("--lab", help="only test modules whose name contains this (e.g. lab03, nplusone)")
    a = ap.parse_args()
    bad = 0
    for name, cases in _modules(a.lab):
        tally: dict[str, list[bool]] = {}
        secs: list[float] = []
        for _ in range(a.times):
            t0 = time.perf_counter()
            for v in run_cases(cases["grade"], cases["reference"], cases["baseline"], cases["wrong"], cases["cheats"],
                                 cases.get("experiment"), cases.get("others")):
                tally.setdefault(v.case, []).append(v.passed)
                if v.passed != should_pass(v.case):
                    print(f"  {name} {v.case}: unexpected {'pass' if v.passed else 'fail'}:\n{v.grade}")
            secs.append(time.perf_counter() - t0)
        per_round = sum(secs) / len(secs)
        print(f"{name}  ({per_round:.1f} s per round of {len(tally)} cases, {per_round / len(tally):.2f} s per case)")
        for case, results in tally.items():
            want = should_pass(case)
            right = sum(r == want for r in results)
            bad += right != len(results)
            verb = "passed" if want else "failed"
            print(f"  {case:<12} {verb} {right}/{len(results)}"
                  f"{'' if right == len(results) else '   <-- goal 10/10'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
