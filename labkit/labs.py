"""The labs, declared once: each lab's row in :data:`LABS`, from which everything that lists the labs is made.

A row holds the lab's number, notebook and title; the sentence README.md and the index give for it; its QUICK
budget (the suite holds each QUICK run to it, ``tests/test_notebooks.py``); how many charts the browser test
must see painted; its minutes (a 90-minute workshop slot's core, and a self-paced learner's estimate with its
optional sections); which labs it builds on; and, by the house's convention, its grader module and instructor
notes. README.md's lab table and the index's two tables are generated from it (:func:`tables`):

    labkit labs            # the labs, one line each
    labkit labs --write    # README.md and notebooks/index.ipynb made equal to this table again

``tests/test_labs.py`` fails, printing that command, when a generated table and :data:`LABS` disagree, and when a
lab's notebook, grader, instructor notes or test is missing. ``labkit new-lab NN name`` adds a row here.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LABS", "INDEX_BUDGET_S", "QUICK_BUDGET_S", "TABLE_FILES", "Lab", "lab", "sync", "tables"]


@dataclass(frozen=True)
class Lab:
    """One lab of the product.

    Attributes:
        number: two digits, ``"00"``.
        stem: the notebook's name without ``.ipynb`` (``"00_method"``).
        title: as the tables show it (``"the method"``).
        readme: README's "you will be able to…" sentence.
        index: the index's "by the end you can…" sentence (shorter: the index is read on screen).
        charts: how many charts its QUICK run draws at least (the browser test checks each is painted).
        slot: core minutes in a 90-minute workshop slot.
        self_paced: a self-paced learner's core minutes with the exercise, estimated (low, high; equal for one
            figure), as the lab's header estimates them.
        optional: the optional sections' minutes on top of ``self_paced``.
        builds_on: which labs (and saved results) it builds on, in words; ``"—"`` for none.
        quick_budget_s: the longest its QUICK run may take on a 2-core machine.
    """

    number: str
    stem: str
    title: str
    readme: str
    index: str
    charts: int
    slot: int
    self_paced: tuple[int, int]
    optional: int
    builds_on: str
    quick_budget_s: float = 90

    @property
    def notebook(self) -> str:
        """The notebook's file name in ``notebooks/``."""
        return f"{self.stem}.ipynb"

    @property
    def grader(self) -> str:
        """The module that grades its exercise."""
        return f"labkit.exercises.lab{self.number}"

    @property
    def notes(self) -> str:
        """Its instructor notes, relative to the repository."""
        return f"notebooks/instructor/{self.stem}.md"

    @property
    def test(self) -> str:
        """Its own test module (the grader's cases), relative to the repository."""
        return f"tests/test_lab{self.number}.py"

    def minutes(self) -> str:
        """The self-paced minutes as the index shows them: ``"91 (+5 optional)"``, ``"115–145"``."""
        low, high = self.self_paced
        said = f"{low}" if low == high else f"{low}–{high}"
        return said + (f" (+{self.optional} optional)" if self.optional else "")


#: every lab, in order
LABS: tuple[Lab, ...] = (
    Lab("00", "00_method", 'the method',
        readme='tell a real speed-up from noise: warm-up, spread, percentiles, interleaved A/B, one change at a time, a hypothesis written down first, the experiment record',
        index='tell a real speed-up from noise: warm-up, spread, percentiles, interleaved A/B, the hypothesis first, experiment records',
        charts=4, slot=85, self_paced=(91, 91), optional=5, builds_on='—'),
    Lab("01", "01_latency_numbers", 'latency numbers, measured here',
        readme="measure the famous table on your machine (caches, syscalls, context switches, disk, loopback), read the ladder, and predict a request's cost with napkin math",
        index="measure the famous latency table on this machine, read the ladder, and predict a request's cost with napkin math",
        charts=3, slot=85, self_paced=(115, 145), optional=0, builds_on='00'),
    Lab("02", "02_nplusone", 'N+1 queries',
        readme="spot an N+1 from a request's query count, prove it with the detector, fix it with batching or a join, and keep it out with a query budget in tests",
        index="find an N+1 from a request's query count, prove it with the detector, fix it with batching or a join",
        charts=3, slot=88, self_paced=(112, 112), optional=8, builds_on='00'),
    Lab("03", "03_preallocation", 'preallocation, reused buffers and pools',
        readme="spot a cost that grows faster than its input, locate it with allocation counts, fix it by preallocating or reusing a buffer, tell (by measurement) when CPython already pools for you, and catch a pooled buffer leaking the last user's data",
        index="find a cost that grows faster than its input, fix it by preallocating or reusing a buffer, know when CPython already pools for you, and catch a pooled buffer that leaks the last user's data",
        charts=3, slot=97, self_paced=(135, 135), optional=9, builds_on='00'),
    Lab("04", "04_data_layout", 'data layout',
        readme='predict from bytes moved and measured bandwidth what a column saves over records, measure the layers that make Python containers slow (interpreter work, scattered objects, cache lines), and find where SoA stops paying',
        index='predict what a column saves over records from bytes moved and bandwidth, measure why Python containers are slow, find where SoA stops paying',
        charts=6, slot=85, self_paced=(101, 101), optional=13, builds_on="00; 01's saved table (`results/lab01_latency_table.json`), else it measures the rows it needs"),
    Lab("05", "05_serialization", 'serialization swaps',
        readme="measure the serialize stage, choose a format (`Accept`: JSON, MessagePack, protobuf) and a codec (`codec=json\\|orjson\\|msgspec\\|msgpack\\|protobuf`), trim fields, weigh compression, and predict the gain end to end with the client's decoding included",
        index='measure what writing a response costs, choose a wire format and codec (JSON, MessagePack, protobuf; Accept and `codec=`), trim fields, and predict the gain end to end — client decoding included',
        charts=3, slot=72, self_paced=(77, 77), optional=14, builds_on='00'),
    Lab("06", "06_gc_profiling", 'GC and allocation profiling',
        readme='test the obvious guess first, then profile: a CPU flame graph of the running service (py-spy) and an allocation flame graph of one request (memray), both drawn offline; lay GC pauses beside request latencies on one time axis; cut temporaries, tune the collector (`gc.freeze()` after warm-up, a larger young generation) or keep bulk long-lived data off its books, and verify each on the P99 across processes; know what `gc.disable()` and `timeit` hide',
        index='profile a service with py-spy and a request with memray (flame graphs that work offline), lay GC pauses beside the P99, cut temporaries, tune the collector or take bulk data off its books, and verify each across processes',
        charts=11, slot=85, self_paced=(140, 140), optional=15, builds_on='00; 02 (Server-Timing), 03 (allocation counts)'),
    Lab("07", "07_tail_latency", 'tail latency and pool sizing',
        readme="find the knee with a bounded step-load sweep and check it before believing it (a busy machine, a lagging load generator); predict the requests inside a service with Little's law and count them; see why a closed loop hides the queue; size a thread pool by experiment, tell a micro-benchmark's win from what it buys the user near the knee, shed load with `queue=N`, and say below which rate pool size does not matter",
        index="find the knee of a service and check it, predict the requests inside with Little's law and count them, see why a closed loop hides the queue, size a pool by experiment, tell a micro-benchmark's win from what the user gets, and shed load",
        charts=8, slot=86, self_paced=(130, 130), optional=15, builds_on='00'),
    Lab("08", "08_capstone", 'capstone: milliseconds to microseconds',
        readme="take toyshop's export from the baseline to every fix in a professional's order: keep the baseline, read the Server-Timing waterfall, predict each step from lab 01's table, apply one fix at a time (`n1=join`, `cache=local`, `codec=orjson`, `log=queued`, `io=concurrent`, `hop=inline`; `?preset=baseline\\|all`) verified interleaved, rank the fixes by payoff, weigh micro against end to end, and diff against the kept baseline",
        index="take one endpoint from the baseline to every fix the way a professional does: keep the baseline, locate with the waterfall, predict each step from lab 01's table, one fix at a time verified interleaved, rank the fixes by payoff, and show the diff against the kept baseline",
        charts=9, slot=88, self_paced=(159, 159), optional=23, builds_on="00–07's fixes in one endpoint; 01's saved table, else it measures the rows it needs"),
    Lab("09", "09_contention", 'contention and scheduling',
        readme="tell waiting from working in toyshop (`stats=locked\\|short\\|sharded\\|queued`, `loop=blocking\\|thread`): a wall-clock profile and a lock that times itself (Server-Timing `lock`, `/tally`), what the GIL lets threads do, an update lost without a lock, a lock's queue predicted from its hold time, a blocked event loop found with `labkit.looplag` (`/loop`), the price of a core, a hand-off and a busy poll; graded: a leaderboard whose reads starve the ledger's writers",
        index="tell waiting from working: find what requests wait for with a wall-clock profile and a lock that times itself, measure what the GIL lets threads do, show an update lost without a lock, predict a lock's queue from its hold time, find a blocking call on an event loop with a lag monitor, and price a core, a hand-off and a busy poll",
        charts=4, slot=84, self_paced=(147, 147), optional=22, builds_on="00; 01's table (hand-offs, locks), else it measures them; 06 (py-spy's views), 07 (Little's law, `labkit.queueing`)"),
)

#: the index page's QUICK budget: it only opens a panel
INDEX_BUDGET_S = 30

#: seconds each notebook's QUICK run may take on a 2-core machine (the index's included)
QUICK_BUDGET_S: dict[str, float] = {"index.ipynb": INDEX_BUDGET_S, **{x.notebook: x.quick_budget_s for x in LABS}}


def lab(number: str) -> Lab:
    """The lab numbered ``number`` (``"07"`` or ``7``)."""
    key = f"{int(number):02d}" if str(number).isdigit() else str(number)
    for x in LABS:
        if x.number == key:
            return x
    raise KeyError(f"no lab {number!r}: the labs are {', '.join(x.number for x in LABS)} (labkit/labs.py)")


def _hours() -> str:
    total = sum(x.self_paced[0] for x in LABS) / 60
    return f"About {round(total)} hours for labs {LABS[0].number}–{LABS[-1].number}, cores only."


def tables() -> dict[str, str]:
    """The generated tables, by marker name: ``readme`` (README.md's), ``index-goals`` and ``index-times``
    (the index's first cell). Each is the text between ``<!-- labs:NAME -->`` and ``<!-- /labs:NAME -->``."""
    readme = ["| lab | you will be able to… |", "|---|---|"]
    readme += [f"| [{x.number} — {x.title}](notebooks/{x.notebook}) | {x.readme} |" for x in LABS]
    goals = ["| lab | by the end you can… |", "|---|---|"]
    goals += [f"| [{x.number} — {x.title}]({x.notebook}) | {x.index} |" for x in LABS]
    times = ["| lab | workshop slot, core (min) | self-paced, core + exercise (min, estimate) | builds on |",
             "|---|---|---|---|"]
    times += [f"| {x.number} | {x.slot} | {x.minutes()} | {x.builds_on} |" for x in LABS]
    return {"readme": "\n".join(readme), "index-goals": "\n".join(goals),
            "index-times": "\n".join(times) + "\n\n" + _hours()}


#: where each generated table lives: the file (relative to the repository) and, for a notebook, its first cell
TABLE_FILES: dict[str, str] = {"readme": "README.md", "index-goals": "notebooks/index.ipynb",
                               "index-times": "notebooks/index.ipynb"}


def _between(text: str, name: str, body: str) -> str | None:
    """``text`` with the block between ``name``'s markers replaced by ``body``; None when a marker is missing."""
    start, end = f"<!-- labs:{name} -->", f"<!-- /labs:{name} -->"
    i, j = text.find(start), text.find(end)
    if i < 0 or j < i:
        return None
    return text[: i + len(start)] + "\n" + body + "\n" + text[j:]


def sync(root: str | os.PathLike[str], *, write: bool = False) -> list[str]:
    """Hold README.md's and the index's tables to :data:`LABS`: the problems found (a file whose table differs,
    a marker missing), each a line; with ``write``, the tables are rewritten first (so only missing markers are
    left to say). ``root`` is the repository."""
    base = Path(root)
    problems: list[str] = []
    for path in sorted(set(TABLE_FILES.values())):
        names = [n for n, f in TABLE_FILES.items() if f == path]
        target = base / path
        raw = target.read_text(encoding="utf-8")
        notebook = path.endswith(".ipynb")
        nb = json.loads(raw) if notebook else None
        text = "".join(nb["cells"][0]["source"]) if nb is not None else raw
        new = text
        for name in names:
            replaced = _between(new, name, tables()[name])
            if replaced is None:
                problems.append(f"{path}: the markers <!-- labs:{name} --> … <!-- /labs:{name} --> are missing")
            else:
                new = replaced
        if new == text:
            continue
        if not write:
            problems.append(f"{path}: its lab tables differ from labkit/labs.py's LABS")
            continue
        if nb is not None:
            nb["cells"][0]["source"] = new.splitlines(keepends=True)
            target.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        else:
            target.write_text(new, encoding="utf-8")
    return problems
