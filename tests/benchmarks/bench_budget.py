"""Issue 43's 'done means', measured: the time gate and the exact counters on a small repository made here, with
another load running (a busy-looping process on one of the two cores).

    .venv/bin/python tests/benchmarks/bench_budget.py [--times 20]

Prints, of --times runs each: a docs-only change that passes the time gate; a 30 % slowdown of the case that
fails it; one extra query that fails the query budget; a 10 % growth in bytes inside a 15 % tolerance that
passes (and the ledger lines it wrote).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from labkit.budget import BudgetExceeded, within
from labkit.gate import gate

CASES = """
from labkit.gate import timed


@timed(threshold=0.10)
def squares():
    from shop import work
    return lambda: work(20000)
"""
PLAIN = "def work(n):\n    return sum(i * i for i in range(n))\n"
SLOWER = "def work(n):\n    return sum(i * i for i in range(n)) + sum(i * i for i in range(3 * n // 10))\n"


def _burn(stop: float) -> None:
    while time.time() < stop:
        pass


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--times", type=int, default=20)
    n = ap.parse_args().times
    load = mp.get_context("spawn").Process(target=_burn, args=(time.time() + 3600,), daemon=True)
    load.start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            repo = Path(tmp) / "shop"
            (repo / "shop").mkdir(parents=True)
            code = repo / "shop" / "__init__.py"
            code.write_text(PLAIN)
            (repo / "perf_cases.py").write_text(CASES)
            git = ["git", "-C", str(repo), "-c", "user.name=b", "-c", "user.email=b@example.org"]
            subprocess.run(["git", "init", "-q", str(repo)], check=True)
            subprocess.run([*git, "add", "-A"], check=True)
            subprocess.run([*git, "commit", "-qm", "base"], check=True)
            for label, source, docs in (("docs-only change", PLAIN, True), ("30 % slower case", SLOWER, False)):
                code.write_text(source)
                if docs:
                    (repo / "README.md").write_text("docs\n")
                t0 = time.perf_counter()
                runs = [gate(repo, "HEAD", "perf_cases.py")[0] for _ in range(n)]
                fails = sum(r.failed for r in runs)
                ratios = sorted(r.ratio for r in runs)
                print(f"{label:<18} failed {fails}/{n}; tree/base {ratios[0]:.3f}–{ratios[-1]:.3f}; "
                      f"verdicts {sorted({r.verdict for r in runs})}; {(time.perf_counter() - t0) / n:.1f} s a run")
    finally:
        load.kill()
    import sqlite3

    conn = sqlite3.connect(":memory:")
    extra = 0
    for _ in range(n):
        try:
            with within(conn, queries=3):
                for i in range(4):
                    conn.execute("SELECT ?", (i,)).fetchone()
        except BudgetExceeded:
            extra += 1
    print(f"{'one extra query':<18} failed {extra}/{n}")

    def make(k: int) -> list[bytes]:
        return [bytes(1000) for _ in range(k)]

    probe = within(allocated_bytes=10**9)
    with probe:
        make(1000)
    figure = probe.counted.values["allocated_bytes"]
    with tempfile.TemporaryDirectory() as tmp:
        from labkit.budget import append, history

        ledger = Path(tmp) / "ledger.jsonl"
        passed = 0
        for _ in range(n):
            try:
                with within(allocated_bytes=figure, tolerance=0.15,
                            record=lambda c: append(ledger, "grown", c)):
                    make(1100)
                passed += 1
            except BudgetExceeded:
                pass
        print(f"{'10 % more bytes':<18} passed {passed}/{n} within 15 % of {figure:,}; ledger:")
        print("  " + history(ledger))


if __name__ == "__main__":
    sys.exit(main())
