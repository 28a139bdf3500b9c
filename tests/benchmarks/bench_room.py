"""How long ``labkit room`` takes for a room: generated learners' folders, each with experiment records and
gradings as labs write them, collected and turned into the room page, the gradebook and the gallery.

    .venv/bin/python tests/benchmarks/bench_room.py --learners 30 200

The goal (issue: the room): 30 learners' folders in under 60 s and 200 in under 5 minutes on a 2-core machine.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from labkit import compare
from labkit.grading.gradings import Grading
from labkit.learner.record import Experiment
from labkit.measure.machine import fingerprint
from labkit.results import write_json_atomic
from labkit.workshop import gradebook, room

TITLES = [f"lab {n:02d} fix" for n in range(10)]


def make_room(base: Path, learners: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    fp = fingerprint()
    for i in range(learners):
        home = base / f"learner{i:03d}" / "results"
        for t in TITLES:
            a = [rng.gauss(100.0, 3.0) for _ in range(20)]
            b = [x * rng.uniform(0.3, 0.6) for x in a]
            c = compare(a, b)  # a real comparison of two sample sets
            exp = Experiment.plan(t, "a hypothesis long enough to be the learner's own words", predicted_ratio=0.45)
            exp.conclude(c).save(home)
            for attempt in range(rng.randint(1, 3)):
                ok = attempt > 0 or rng.random() < 0.5
                items = ({"criterion": "correctness", "ok": True, "message": "same answers", "measured": {}},
                         {"criterion": "speed", "ok": ok, "message": "faster", "measured": {"ratio": c.ratio}})
                g = Grading(t[4:6], t, ok, items, None if ok else 2, rng.randrange(2**31),
                            f"2026-12-02T10:{attempt:02d}:00+00:00",
                            f"def fix(xs):\n    return sorted(set(xs))  # {rng.randrange(5)}\n", f"h{rng.randrange(5)}",
                            {}, fp)
                write_json_atomic(home / "gradings" / f"{t[4:6]}-{attempt}.json", g.to_dict())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--learners", type=int, nargs="+", default=[30, 200])
    args = parser.parse_args()
    for n in args.learners:
        with tempfile.TemporaryDirectory() as tmp:
            base = Path(tmp)
            t0 = time.perf_counter()
            make_room(base, n)
            made = time.perf_counter() - t0
            t0 = time.perf_counter()
            r = room.collect(base)
            page = room.render(r)
            book = gradebook.gradebook_csv(r)
            gallery = gradebook.gallery(r)
            took = time.perf_counter() - t0
            print(f"{n:4d} learners: {len(r.entries)} records, {len(r.gradings)} gradings; collect + page + gradebook "
                  f"+ gallery {took:.1f} s (page {len(page) / 1024:.0f} KiB, gradebook {book.count(chr(10)) - 1} rows, "
                  f"gallery {len(gallery) / 1024:.0f} KiB); the folders took {made:.1f} s to make")


if __name__ == "__main__":
    main()
