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

A running toyshop is diffed the same way, with py-spy attached to its process while a bounded load runs:

    d = profile.diff_under_load("/customers/1/export?n1=naive", "/customers/1/export?n1=batched",
                                service=svc, load_rate=30)            # one process, two request switches
    d = profile.diff_under_load(heap_svc, flat_svc, path="/customers/2/export", load_rate=250,
                                native=True, gil=True)                # two processes, one path each round

There each profile's samples become *busy thread-seconds per request*: a frame's samples divided by py-spy's
rate (the seconds its threads spent there) and by the responses completed inside that profile's own sampling
window. Waiting threads are left out (py-spy's default), so a faster side that idles more is not charged for
the idling. A profile during which py-spy said it fell behind its rate carries a note (:attr:`ProfileDiff.notes`).
"""

from __future__ import annotations

import re
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

__all__ = ["ProfileDiff", "diff", "diff_under_load", "diff_chart"]

Stack = tuple[str, ...]
_ADDRESS = re.compile(r"(?<![^;\n])0x[0-9a-f]+(?: \([^;()]*\))?(?=[; ])")


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
    """Before/after profiles and the change per frame, in seconds per call of each side's function (in
    process) or busy thread-seconds per request (a service under load: :func:`diff_under_load`).

    Attributes:
        before, after: what was profiled.
        profiles: ``(side, seconds per call or per request, calls or requests, collapsed stacks)`` per profile,
            in the order they ran; ``unit`` names which.
        confidence: the bootstrap intervals' level; ``resamples``: bootstrap resamples; ``seed``.
        min_change: the smallest change, as a fraction of the frame's before time, that is coloured.
        notes: what affects the reading (py-spy fell behind its rate, a profile without requests).
    """

    KIND = "profile-diff"

    before: str
    after: str
    profiles: tuple[tuple[str, float, int, str], ...]
    confidence: float = 0.95
    resamples: int = 2000
    seed: int = 0
    min_change: float = 0.05
    unit: str = "seconds per call"
    notes: tuple[str, ...] = ()

    def _side(self, side: str) -> list[tuple[list[Stack], np.ndarray, float, int]]:
        """This side's profiles: (stacks, their sample counts, seconds per call, calls) each."""
        out = []
        for s, spc, calls, text in self.profiles:
            if s == side:
                c: Counter[Stack] = Counter()
                for line in text.splitlines():
                    st, _, w = line.rpartition(" ")
                    c[tuple(st.split(";"))] += int(w)
                out.append((list(c), np.array(list(c.values()), dtype=float), spc, max(int(calls), 1)))
        return out

    def _draws(self, side: list[tuple[list[Stack], np.ndarray, float, int]], frames: list[str],
               rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """The side's per-frame (self, total) seconds per call, as measured — shape (2, frames) — and
        ``resamples`` bootstrap values of it — shape (2, resamples, frames). A resample picks the side's
        profiles with replacement *and* redraws each picked profile's samples from its own counts (a two-level
        bootstrap): a thin profile (a low rate, a short run, a loaded machine) is as uncertain as its few samples
        make it, which resampling whole profiles alone does not show with five a side. Profiles are averaged
        weighted by their calls (the side's time over its calls): a profile that saw one slow request of a
        service counts as one request, not as much as one that saw a hundred."""
        index = {f: i for i, f in enumerate(frames)}
        measured = np.zeros((2, len(side), len(frames)))
        redrawn = np.zeros((2, len(side), self.resamples, len(frames)))
        weight = np.array([calls for *_, calls in side], dtype=float)
        for j, (stacks, counts, spc, _calls) in enumerate(side):
            member = np.zeros((2, len(stacks), len(frames)))  # stack × frame: is its leaf (self), is in it (total)
            for k, st in enumerate(stacks):
                member[0, k, index[st[-1]]] = 1
                member[1, k, [index[f] for f in set(st)]] = 1
            n = counts.sum()
            if not n:  # a profile with no samples (nothing ran in the sampled threads): no time, exactly
                continue
            draws = rng.multinomial(int(n), counts / n, size=self.resamples) / n * spc  # resamples × stacks
            for c in (0, 1):
                measured[c, j] = counts / n * spc @ member[c]
                redrawn[c, j] = draws @ member[c]
        pick = rng.integers(0, len(side), size=(self.resamples, len(side)))
        rows = np.arange(self.resamples)[:, None]
        w = weight[pick]                                                    # resamples × picked profiles
        boot = (redrawn[:, pick, rows, :] * w[None, :, :, None]).sum(axis=2) / w.sum(axis=1)[None, :, None]
        return (measured * weight[None, :, None]).sum(axis=1) / weight.sum(), boot

    def to_frame(self) -> Any:
        """One row per frame: self and total seconds per call on each side (its profiles weighted by their calls), their change and its
        bootstrap interval (two levels: profiles resampled with replacement within each side, and each one's
        samples redrawn from its counts), and ``verdict`` (``slower``, ``faster`` or ``no change`` when the
        total change's interval covers zero)."""
        import pandas as pd

        a, b = self._side("A"), self._side("B")
        frames = sorted({f for side in (a, b) for stacks, *_ in side for st in stacks for f in st})
        if not frames:  # no profile caught a sample: nothing ran in the sampled threads
            return pd.DataFrame(columns=["frame", *(f"{c}_{k}" for c in ("self", "total") for k in
                                                    ("before_s", "after_s", "change_s", "low_s", "high_s", "ratio")),
                                         "verdict"])
        rng = np.random.default_rng(self.seed)
        (ma, ra), (mb, rb) = self._draws(a, frames, rng), self._draws(b, frames, rng)
        lo_q, hi_q = (1 - self.confidence) / 2, 1 - (1 - self.confidence) / 2
        rows = []
        for i, f in enumerate(frames):
            row: dict[str, Any] = {"frame": f}
            for k, col in ((0, "self"), (1, "total")):
                before, after = ma[k, i], mb[k, i]
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

    def per_call(self) -> tuple[float, float]:
        """Each side's whole sampled time per call (per request for a service), its profiles weighted by calls:
        what a frame's ``total_before_s``/``total_after_s`` is a part of."""
        def side(name: str) -> float:
            got = [(spc, max(int(n), 1)) for s, spc, n, _t in self.profiles if s == name]
            return sum(spc * n for spc, n in got) / sum(n for _spc, n in got)

        return side("A"), side("B")

    def changed(self) -> dict[str, str]:
        """frame → ``"slower"``/``"faster"`` for the frames whose interval excludes no change, the largest
        change (in total time) first."""
        df = self.to_frame()
        df = df[df.verdict != "no change"]
        df = df.iloc[df.total_change_s.abs().argsort()[::-1]]
        return dict(zip(df.frame, df.verdict, strict=True))

    def __str__(self) -> str:
        ch = self.changed()
        n = len(self.profiles) // 2
        shown = list(ch.items())[:8]
        names = ", ".join(f"{f.split(' (')[0]} {v}" for f, v in shown) or "no frame changed"
        if len(ch) > len(shown):
            names += f" … and {len(ch) - len(shown)} more (to_frame())"
        text = (f"profile diff {self.before} → {self.after}: {n} profiles a side, interleaved; "
                f"{int(self.confidence * 100)} % intervals: {names}")
        return "\n".join([text, *(f"  note: {note}" for note in self.notes)])


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


def _side_of(x: Any, service: Any, path: str | None, which: str) -> tuple[Any, str]:
    """One side of :func:`diff_under_load`: a Service (with ``path=``) or a request path (with ``service=``)."""
    if isinstance(x, str):
        if service is None:
            raise BadInputError(f"{which} is a path ({x!r}): give the service it is sent to, service=svc")
        svc, p = service, x
    elif hasattr(x, "pid") and hasattr(x, "url"):
        if path is None:
            raise BadInputError(f"{which} is a service: give the request path both sides are loaded with, "
                                "path='/customers/1/export'")
        svc, p = x, path
    else:
        raise BadInputError(f"{which} must be a running labkit.service.Service or a request path such as "
                            f"'/customers/1/export?n1=batched', got {type(x).__name__}")
    if not p.startswith("/"):
        raise BadInputError(f"the path must start with '/', got {p!r} (e.g. '/customers/1/export?n1=batched')")
    if not getattr(svc, "alive", True):
        raise BadInputError(f"the {which} service is not running (stopped, or it died): start it again")
    return svc, p


def _served_in(load: Any, start_s: float, end_s: float) -> int:
    """Responses of a load run completed between two ``time.perf_counter()`` readings."""
    done_ns = load.t0_ns + load.start_ns + load.samples_ns
    return int(np.count_nonzero((done_ns >= start_s * 1e9) & (done_ns < end_s * 1e9)))


def _profile_round(svc: Any, path: str, seconds: float, rate: int, opts: dict[str, bool], load_rate: float | None,
                   concurrency: int | None, load_kwargs: dict[str, Any]) -> tuple[str, list[str], bool, int]:
    """One profile of ``svc`` under a fresh bounded load on ``path``: its collapsed stacks, py-spy's notes,
    whether py-spy fell behind, and the responses completed while it sampled."""
    from labkit.load import background
    from labkit.profile.cpu import _Recording, _sleep_until_done

    with background(svc.url + path, rate=load_rate, concurrency=concurrency, duration_s=seconds + 30,
                    warmup_s=0.15, **load_kwargs) as load:
        load.warm()
        rec = _Recording(svc.pid, rate, seconds, opts, "raw", None)
        try:
            rec.wait_sampling()
            _sleep_until_done(rec, seconds)
            end = time.perf_counter()
            rec.stop()
            text, _elapsed, said = rec.read()
            behind = any("behind in sampling" in line for line in rec.stdout + rec.stderr)
        finally:
            if rec.proc.poll() is None:
                rec.stop(force=True)
            rec.cleanup()
    return text, said, behind, _served_in(load.result, rec.started, end)


def diff_under_load(before: Any, after: Any, *, path: str | None = None, service: Any = None,
                    load_rate: float | None = None, concurrency: int | None = None, rounds: int = 5,
                    duration_s: float = 1.0, rate: int = 100, gil: bool = False, native: bool = False,
                    names: tuple[str, str] | None = None, seed: int = 0, progress: bool | None = None,
                    **load_kwargs: Any) -> ProfileDiff:
    """Profile a toyshop under load with two settings, in interleaved rounds, with py-spy.

    Each side is a running :class:`labkit.service.Service` (loaded with ``path``) or a request path on
    ``service`` (a request switch in its query: ``?n1=batched``). Every round starts a bounded load on that
    side (:func:`labkit.load.background`, ``load_rate=`` open loop or ``concurrency=`` closed loop), attaches
    py-spy for ``duration_s`` once the warm-up is over, and counts the responses completed while it sampled.

    Args:
        rounds: profiles a side (≥ 5), in the order A B B A A B …
        rate: py-spy's samples per second; ``gil``/``native``: as in :func:`labkit.profile.attach`.
        names: the two sides' labels (default: the paths, or each service's switches that differ).
        progress: a bar over the rounds (:mod:`labkit.progress`: by default in a notebook).

    Raises:
        BadInputError: a side that is neither a service nor a path, a stopped service, a bad knob.
        ProbeUnavailable: py-spy is missing or may not read the service (what to do about ptrace).
    """
    from labkit.profile.cpu import _check
    from labkit.progress import steps_bar

    a, b = _side_of(before, service, path, "before"), _side_of(after, service, path, "after")
    if (load_rate is None) == (concurrency is None):
        raise BadInputError("give exactly one of load_rate= (open loop, requests per second) or concurrency= "
                            "(closed loop) for the load each profile runs under")
    rounds = integer(rounds, "rounds", low=5, high=100, hint="at least 5 profiles a side give an interval")
    duration_s, rate = _check(duration_s, rate)
    if names is None:
        if a[0] is b[0]:
            names = (a[1], b[1])
        else:
            va, vb = getattr(a[0], "variants", {}) or {}, getattr(b[0], "variants", {}) or {}
            differ = sorted(k for k in set(va) | set(vb) if va.get(k) != vb.get(k))
            names = (", ".join(f"{k}={va.get(k)}" for k in differ) or f"pid {a[0].pid}",
                     ", ".join(f"{k}={vb.get(k)}" for k in differ) or f"pid {b[0].pid}")
    opts = {"idle": False, "gil": gil, "native": native, "function": True}
    order = []
    for r in range(rounds):
        order += ["A", "B"] if r % 2 == 0 else ["B", "A"]
    profiles, notes = [], []
    pb = steps_bar(progress, len(order), "profile diff (py-spy, under load)", "profile",
                   expected_s=len(order) * (duration_s + 1.0))
    try:
        for side in order:
            svc, p = a if side == "A" else b
            label = names[0] if side == "A" else names[1]
            # a window in which no response completed (the service stalled: a long collection, a loaded
            # machine) has no per-request time: that profile is taken again, twice as long, up to twice
            for attempt, seconds in enumerate((duration_s, 2 * duration_s, 4 * duration_s)):
                text, said, behind, served = _profile_round(svc, p, seconds, rate, opts, load_rate, concurrency,
                                                            load_kwargs)
                if served:
                    break
                if attempt < 2:
                    notes.append(f"{label}: no response completed in a {seconds:g} s profile; profiled again for "
                                 f"{2 * seconds:g} s")
            notes += [f"{label}: {n}" for n in said]
            if behind:
                notes.append(f"{label}: py-spy fell behind its rate of {rate}/s in one profile, so its seconds are "
                             "too few: lower rate=")
            if not served:
                raise BadInputError(f"no response to {p} was completed while py-spy sampled {label} for "
                                    f"{4 * duration_s:g} s: raise duration_s= or the load (load_rate=/concurrency=)")
            text = _ADDRESS.sub("[native, no symbol]", text)  # an address differs between processes (ASLR)
            busy = sum(int(line.rpartition(" ")[2]) for line in text.splitlines() if line.strip()) / rate
            profiles.append((side, busy / served, served, text))
            if pb is not None:
                pb.update()
    finally:
        if pb is not None:
            pb.close()
    return ProfileDiff(names[0], names[1], tuple(profiles), seed=seed, unit="busy thread-seconds per request",
                       notes=tuple(dict.fromkeys(notes)))


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
    if layout.empty:
        raise BadInputError(f"{d.before} → {d.after}: no profile caught a sample, so there is nothing to draw: "
                            "profile for longer (duration_s=) or under more load")
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
    from labkit.profile.render import _label

    layout["label"] = layout.apply(_label, axis=1, px_per_unit=width)
    x = alt.X("x0:Q", axis=None, scale=alt.Scale(domain=[0, 1], nice=False))
    y = alt.Y("depth:O", axis=None)
    boxes = alt.Chart(layout).mark_rect(stroke="white").encode(
        x, x2="x1", y=y,
        color=alt.Color("verdict:N", scale=alt.Scale(domain=["slower", "faster", "no change"],
                                                      range=["#d62728", "#1f77b4", "#bbbbbb"])),
        tooltip=["function", "file", "verdict"])
    # names on the boxes wide enough to hold them, so a static export (a PNG, a report) reads without hovering
    labels = alt.Chart(layout[layout.label != ""]).mark_text(align="left", baseline="middle", dx=3, fontSize=11,
                                                             color="black").encode(x, y, text="label:N")
    return alt.layer(boxes, labels, title=title).properties(width=width)
