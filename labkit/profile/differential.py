"""Before/after (differential) CPU profiles with an interval per frame, sampled in this process.

    d = profile.diff(slow_report, fast_report, rounds=5, duration_s=1)
    print(d)                  # the summary line names the frames that got slower or faster
    d.to_frame()              # one row per frame: self and total change in seconds, with bootstrap intervals
    profile.diff_chart(d)     # an offline icicle: red slower, blue faster, grey when the interval covers 0

The sides run in interleaved rounds (A B B A A B …, as :func:`labkit.compare` does), so drift on a shared
machine lands on both. Each profile is turned into fractions of its *own* samples and then into seconds by its
*own* measured duration, so neither the sampling rate nor the length of a run scales one side against the
other. The sampler is a thread reading ``sys._current_frames()`` of the calling thread: in-process, no ptrace.
Frames are functions (``name (file)``), not lines, so a frame keeps its identity when a fix moves its lines.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from labkit.errors import BadInputError
from labkit.inputs import integer, number
from labkit.results import Saveable, TextRepr

__all__ = ["ProfileDiff", "diff", "diff_chart"]

Stack = tuple[str, ...]


def _sample(fn: Callable[[], Any], duration_s: float, interval_s: float) -> tuple[Counter[Stack], float, int]:
    """Call ``fn`` until ``duration_s`` has passed (at least once) while a thread samples this thread."""
    target = threading.get_ident()
    counts: Counter[Stack] = Counter()
    stop = threading.Event()
    here = __file__

    def sampler() -> None:
        while not stop.wait(interval_s):
            frame = sys._current_frames().get(target)
            stack: list[str] = []
            while frame is not None:
                code = frame.f_code
                if code.co_filename == here:
                    break  # our own loop and everything outside it
                stack.append(f"{code.co_name} ({code.co_filename})")
                frame = frame.f_back
            if stack and inside[0]:
                counts[tuple(reversed(stack))] += 1

    inside = [False]  # only samples taken while fn runs (not the join at the end)
    th = threading.Thread(target=sampler, daemon=True)
    calls = 0
    t0 = time.perf_counter()
    th.start()
    try:
        while True:
            inside[0] = True
            fn()
            inside[0] = False
            calls += 1
            if time.perf_counter() - t0 >= duration_s:
                break
    finally:
        inside[0] = False
        stop.set()
        th.join()
    return counts, (time.perf_counter() - t0) / calls, calls


@dataclass(frozen=True)
class ProfileDiff(TextRepr, Saveable):
    """Before/after profiles and the change per frame (seconds per call of each side's function).

    Attributes:
        before, after: what was profiled.
        profiles: ``(side, seconds per call, calls, collapsed stacks)`` per profile, in the order they ran.
        confidence: the bootstrap intervals' level; ``resamples``: bootstrap resamples; ``seed``.
    """

    KIND = "profile-diff"

    before: str
    after: str
    profiles: tuple[tuple[str, float, int, str], ...]
    confidence: float = 0.95
    resamples: int = 2000
    seed: int = 0
    min_change: float = 0.05

    def _side(self, side: str) -> list[tuple[list[Stack], np.ndarray, float]]:
        """This side's profiles: (stacks, their sample counts, seconds per call) each."""
        out = []
        for s, spc, _calls, text in self.profiles:
            if s == side:
                c: Counter[Stack] = Counter()
                for line in text.splitlines():
                    st, _, w = line.rpartition(" ")
                    c[tuple(st.split(";"))] += int(w)
                out.append((list(c), np.array(list(c.values()), dtype=float), spc))
        return out

    def _draws(self, side: list[tuple[list[Stack], np.ndarray, float]], frames: list[str],
               rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Each profile's per-frame (self, total) seconds per call, as measured — shape (2, profiles, frames) —
        and ``resamples`` bootstrap means of the side — shape (2, resamples, frames). A resample picks the side's
        profiles with replacement *and* redraws each picked profile's samples from its own counts (a two-level
        bootstrap): a thin profile (a low rate, a short run, a loaded machine) is as uncertain as its few samples
        make it, which resampling whole profiles alone does not show with five a side."""
        index = {f: i for i, f in enumerate(frames)}
        measured = np.zeros((2, len(side), len(frames)))
        redrawn = np.zeros((2, len(side), self.resamples, len(frames)))
        for j, (stacks, counts, spc) in enumerate(side):
            member = np.zeros((2, len(stacks), len(frames)))  # stack × frame: is its leaf (self), is in it (total)
            for k, st in enumerate(stacks):
                member[0, k, index[st[-1]]] = 1
                member[1, k, [index[f] for f in set(st)]] = 1
            n = counts.sum()
            draws = rng.multinomial(int(n), counts / n, size=self.resamples) / n * spc  # resamples × stacks
            for c in (0, 1):
                measured[c, j] = counts / n * spc @ member[c]
                redrawn[c, j] = draws @ member[c]
        pick = rng.integers(0, len(side), size=(self.resamples, len(side)))
        rows = np.arange(self.resamples)[:, None]
        return measured, redrawn[:, pick, rows, :].mean(axis=2)

    def to_frame(self) -> Any:
        """One row per frame: mean self and total seconds per call on each side, their change and its
        bootstrap interval (two levels: profiles resampled with replacement within each side, and each one's
        samples redrawn from its counts), and ``verdict`` (``slower``, ``faster`` or ``no change`` when the
        total change's interval covers zero)."""
        import pandas as pd

        a, b = self._side("A"), self._side("B")
        frames = sorted({f for side in (a, b) for stacks, _, _ in side for st in stacks for f in st})
        rng = np.random.default_rng(self.seed)
        (ma, ra), (mb, rb) = self._draws(a, frames, rng), self._draws(b, frames, rng)
        lo_q, hi_q = (1 - self.confidence) / 2, 1 - (1 - self.confidence) / 2
        rows = []
        for i, f in enumerate(frames):
            row: dict[str, Any] = {"frame": f}
            for k, col in ((0, "self"), (1, "total")):
                before, after = ma[k, :, i].mean(), mb[k, :, i].mean()
                row[f"{col}_before_s"], row[f"{col}_after_s"] = before, after
                row[f"{col}_change_s"] = after - before
                row[f"{col}_low_s"], row[f"{col}_high_s"] = np.quantile(rb[k, :, i] - ra[k, :, i], [lo_q, hi_q])
                row[f"{col}_ratio"] = after / before if before else float("inf")
            # coloured only when the interval excludes zero *and* the change is at least min_change of the
            # frame's before time: a whole call's duration is measured so precisely that microseconds of
            # timer jitter would otherwise colour the root of an A/A run
            big = abs(row["total_change_s"]) >= self.min_change * max(row["total_before_s"], 1e-12)
            row["verdict"] = ("slower" if big and row["total_low_s"] > 0 else
                              "faster" if big and row["total_high_s"] < 0 else "no change")
            rows.append(row)
        return pd.DataFrame(rows).sort_values("total_before_s", ascending=False, ignore_index=True)

    def changed(self) -> dict[str, str]:
        """frame → ``"slower"``/``"faster"`` for the frames whose interval excludes no change."""
        df = self.to_frame()
        return dict(zip(df.frame[df.verdict != "no change"], df.verdict[df.verdict != "no change"], strict=True))

    def __str__(self) -> str:
        ch = self.changed()
        n = len(self.profiles) // 2
        names = ", ".join(f"{f.split(' (')[0]} {v}" for f, v in ch.items()) or "no frame changed"
        return (f"profile diff {self.before} → {self.after}: {n} profiles a side, interleaved; "
                f"{int(self.confidence * 100)} % intervals: {names}")


def diff(before: Callable[[], Any], after: Callable[[], Any], *, rounds: int = 5, duration_s: float = 1.0,
         rate: int = 1000, rate_after: int | None = None, seed: int = 0) -> ProfileDiff:
    """Profile ``before`` and ``after`` (no-argument callables) in interleaved rounds, ``rounds`` profiles a
    side, each ``duration_s`` long at ``rate`` samples a second (``rate_after`` for the after side, to check
    that the rate does not matter). See :class:`ProfileDiff` for the reading."""
    for name, f in (("before", before), ("after", after)):
        if not callable(f):
            raise BadInputError(f"{name} must be a function to call (wrap arguments: lambda: f(x)), "
                                f"not {type(f).__name__}")
    rounds = integer(rounds, "rounds", low=5, high=100, hint="at least 5 profiles a side give an interval")
    duration_s = number(duration_s, "duration_s", low=0.05, high=600, unit="seconds")
    rate = integer(rate, "rate", low=10, high=5000)
    rate_b = integer(rate_after or rate, "rate_after", low=10, high=5000)
    order = []
    for r in range(rounds):
        order += ["A", "B"] if r % 2 == 0 else ["B", "A"]
    profiles = []
    for side in order:
        fn, rt = (before, rate) if side == "A" else (after, rate_b)
        counts, spc, calls = _sample(fn, duration_s, 1.0 / rt)
        text = "".join(f"{';'.join(s)} {w}\n" for s, w in counts.items())
        profiles.append((side, spc, calls, text))
    name = lambda f: getattr(f, "__name__", type(f).__name__)  # noqa: E731
    return ProfileDiff(name(before), name(after), tuple(profiles), seed=seed)


def diff_chart(d: ProfileDiff, *, width: int = 720) -> Any:
    """An icicle of the before side's call tree (function frames), each box coloured by its frame's verdict:
    red slower, blue faster, grey no change. Frames too narrow to draw are listed in the subtitle."""
    import altair as alt
    import pandas as pd

    from labkit.profile.stacks import Stacks

    c: Counter[Stack] = Counter()
    for _s, _spc, _n, text in d.profiles:
        for line in text.splitlines():
            st, _, w = line.rpartition(" ")
            c[tuple(st.split(";"))] += int(w)
    layout = Stacks.from_counts(c.items()).layout(min_share=0.004)
    verdict = d.to_frame().set_index("frame").verdict
    layout["verdict"] = [verdict.get(f, "no change") if f != "all" else "no change" for f in layout.frame]
    elided = sorted(set(verdict.index) - set(layout.frame))
    sub = ("elided (too narrow): " + ", ".join(f.split(" (")[0] for f in elided[:12])
           + (" …" if len(elided) > 12 else "")) if elided else ""
    layout = pd.DataFrame(layout)
    # the summary names every changed frame: wrapped to the chart's width as subtitle lines, under a short title,
    # so a long list neither widens the chart nor pushes the icicle out of the cell
    import textwrap

    changed = str(d).split(": ", 1)[1] if ": " in str(d) else str(d)
    lines = textwrap.wrap(changed, width=max(40, width // 7)) + (textwrap.wrap(sub, width=max(40, width // 7)) if sub else [])
    title = alt.TitleParams(f"profile diff {d.before} → {d.after}: red slower, blue faster, grey no change",
                            subtitle=lines, anchor="start")
    return alt.Chart(layout, title=title).mark_rect(stroke="white").encode(
        x=alt.X("x0:Q", axis=None), x2="x1", y=alt.Y("depth:O", axis=None),
        color=alt.Color("verdict:N", scale=alt.Scale(domain=["slower", "faster", "no change"],
                                                      range=["#d62728", "#1f77b4", "#bbbbbb"])),
        tooltip=["function", "file", "verdict"]).properties(width=width)
