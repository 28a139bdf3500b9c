"""``labkit room collect DIR…``: the room's view — every learner's experiment records on one offline page.

The instructor points it at a hub's home folders (``/home``: one folder per learner) or at a folder of handed-in
files. Each experiment record (:class:`labkit.learner.record.Experiment` JSON) becomes one row: who, which experiment,
the prediction, the measured ratio with its interval, the verdict — and how noisy the learner's machine was
when they measured, read from the record's fingerprints and the comparison's spread:

* ``throttled``: the cgroup's throttled time grew between planning and measuring (a CFS quota paused them);
* ``busy``: the machine's load average per core (all its cores: the load average is machine-wide) was above
  0.5 before measuring, or above it after the measurement's own runnable thread is taken off
  (``(load − 1) / cores``), the same threshold as ``labkit doctor``'s load check. A learner pinned to cores of
  their own (a hub's pinned spawner) counts only the load beyond the room's own pinned work: the other cores may
  each carry one runnable task (another learner measuring) before anything counts, and what is left is spread
  over the learner's own cores — so a room measuring at once is not "busy" by itself;
* ``wide spread``: the ratio's interval is wider than 25 % of the ratio, or the verdict was inconclusive;
* ``quiet`` otherwise (``not measured`` for a plan without a comparison yet).

The learner is the top folder under DIR that holds the file (a file directly in DIR, or in its ``results/``,
belongs to DIR's own name). A file that is not a readable experiment record — not JSON, damaged, another
kind of result, unreadable — is named with the reason on the page and on the terminal, and skipped; the run
never fails because of one.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

from labkit.errors import BadInputError, ResultsError

__all__ = ["Entry", "Room", "collect", "render"]

_PRUNE = {"node_modules", "site-packages", "__pycache__", ".ipynb_checkpoints"}
NOISE = ("throttled", "busy", "wide spread", "quiet", "not measured")  # worst first


@dataclass(frozen=True)
class Entry:
    """One learner's experiment record, with how noisy their machine was (see the module docstring)."""

    learner: str
    title: str
    path: str
    predicted_ratio: float | None
    measured_ratio: float | None
    ci: tuple[float, float] | None
    verdict: str | None
    outcome: str | None
    noise: str
    why: str
    #: the interval's confidence level (``compare`` widens it when it looked more than once)
    confidence: float = 0.95
    #: the CPU the comparison ran on (its fingerprint's ``cpu_model``)
    cpu: str = ""


@dataclass(frozen=True)
class Room:
    """What :func:`collect` found: the records, and every file skipped with the reason."""

    entries: tuple[Entry, ...]
    skipped: tuple[tuple[str, str], ...]
    #: every grading record found: ``(learner, record)`` (:class:`labkit.grading.gradings.Grading`), oldest first
    gradings: tuple[tuple[str, Any], ...] = ()

    def to_frame(self) -> Any:
        """The entries as a DataFrame, one row per record."""
        import pandas as pd

        cols = [f for f in Entry.__dataclass_fields__]
        return pd.DataFrame([{c: getattr(e, c) for c in cols} for e in self.entries], columns=cols)


def _files(folder: Path, skipped: list[tuple[str, str]]) -> Iterable[Path]:
    def unreadable(e: OSError) -> None:  # a folder that cannot be listed is named, not passed over
        skipped.append((str(e.filename), f"folder not readable ({e.strerror or e}): its records were not read"))

    for here, dirs, files in os.walk(folder, onerror=unreadable):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _PRUNE)
        # hidden files are passed over as hidden folders are: the labs' handout manifest (.perflab-handout.json)
        # is labkit's own bookkeeping in every learner's copy, not a record to list as skipped
        yield from (Path(here) / f for f in sorted(files) if f.endswith(".json") and not f.startswith("."))


def _learner(folder: Path, path: Path) -> str:
    parts = path.relative_to(folder).parts
    if len(parts) == 1 or parts[0] == "results":
        return folder.resolve().name or str(folder)
    return parts[0]


def _load_per_core(fp: dict[str, Any], own: float) -> float | None:
    # the load average is the whole machine's (not namespaced), so it is divided by the machine's cores; a
    # learner pinned to some of them (a hub's pinned spawner) discounts the room's own work on the others, up to
    # one runnable task per core: what is left over is load beyond the room's, on the learner's own cores
    load, cores = fp.get("load_average"), fp.get("cores_logical") or fp.get("cores_usable")
    if not load or not cores:
        return None
    usable = fp.get("cores_usable")
    if isinstance(usable, int | float) and 0 < usable < cores:
        return max(float(load[0]) - own - (float(cores) - usable), 0.0) / float(usable)
    return max(float(load[0]) - own, 0.0) / float(cores)


def _last_comparison(exp: Any) -> dict[str, Any]:
    found = [m for m in exp.measurements if isinstance(m, dict) and m.get("kind") == "comparison"]
    return found[-1] if found else {}


def _noise(exp: Any) -> tuple[str, str, tuple[float, float] | None]:
    comparisons = [m for m in exp.measurements if isinstance(m, dict) and m.get("kind") == "comparison"]
    if exp.measured_ratio is None or not comparisons:
        return "not measured", "no comparison recorded yet", None
    last = comparisons[-1]
    ci = tuple(float(x) for x in last.get("ci") or ()) or None
    fp0, fp1 = exp.fingerprint or {}, last.get("fingerprint") or {}
    reasons: list[tuple[str, str]] = []
    t0, t1 = fp0.get("cpu_throttled_us"), fp1.get("cpu_throttled_us")
    if isinstance(t0, int | float) and isinstance(t1, int | float) and t1 > t0:
        reasons.append(("throttled", f"throttled {(t1 - t0) / 1000:.0f} ms between plan and measurement"
                        + (f" (quota {fp1['cpu_quota_cores']:g} cores)" if fp1.get("cpu_quota_cores") else "")))
    before, after = _load_per_core(fp0, 0.0), _load_per_core(fp1, 1.0)
    if before is not None and before > 0.5:
        reasons.append(("busy", f"load {before:.2f} per core before measuring"))
    elif after is not None and after > 0.5:
        reasons.append(("busy", f"load {after:.2f} per core besides the measurement"))
    width = (ci[1] - ci[0]) / exp.measured_ratio if ci and len(ci) == 2 and exp.measured_ratio else None
    if exp.verdict == "inconclusive" or (width is not None and width > 0.25):
        reasons.append(("wide spread", f"verdict {exp.verdict}" + (f", interval ±{width / 2:.0%}" if width else "")))
    if any(w for w in last.get("warnings") or ()):
        reasons.append(("wide spread", f"{len(last['warnings'])} warning(s) from the comparison"))
    if not reasons:
        return "quiet", "load and spread within bounds" + (f", interval ±{width / 2:.0%}" if width else ""), ci
    worst = min((r[0] for r in reasons), key=NOISE.index)
    return worst, "; ".join(r[1] for r in reasons), ci  # type: ignore[return-value]


def collect(*folders: str | os.PathLike[str]) -> Room:
    """Read every ``*.json`` under each folder (hidden folders, virtualenvs and checkpoints left out).

    Raises:
        BadInputError: a folder given does not exist or is not a folder (one bad *file* never raises).
    """
    from labkit.grading.gradings import Grading
    from labkit.learner.record import Experiment, judge
    from labkit.results import read_json

    entries: list[Entry] = []
    skipped: list[tuple[str, str]] = []
    gradings: list[tuple[str, Any]] = []
    for f in folders:
        folder = Path(f)
        if not folder.is_dir():
            raise BadInputError(f"{folder} is not a folder: pass the folders that hold the learners' records "
                                "(a hub's /home, or a folder of handed-in files)")
        for path in _files(folder, skipped):
            try:
                data = read_json(path)
                if data.get("kind") == Grading.KIND:
                    gradings.append((_learner(folder, path), Grading.from_dict(data)))
                    continue
                if data.get("kind") != Experiment.KIND:
                    raise ResultsError(f"a {data.get('kind')!r} result, not an experiment record" if "kind" in data
                                       else "JSON without a 'kind': not written by labkit")
                exp = Experiment.from_dict_of(data, path)
                noise, why, ci = _noise(exp)
            except (ResultsError, TypeError, ValueError, AttributeError) as e:
                skipped.append((str(path), str(e).replace(f"{path}: ", "").replace(f"{path} ", "")))
                continue
            outcome = exp.outcome  # judged by today's rule when the interval is known (an old record too)
            if exp.predicted_ratio is not None and ci is not None and len(ci) == 2:
                outcome = judge(exp.predicted_ratio, ci)  # type: ignore[arg-type]
            last = _last_comparison(exp)
            entries.append(Entry(_learner(folder, path), exp.title, str(path), exp.predicted_ratio,
                                 exp.measured_ratio, ci, exp.verdict, outcome, noise, why,  # type: ignore[arg-type]
                                 float(last.get("confidence") or 0.95),
                                 str((last.get("fingerprint") or exp.fingerprint or {}).get("cpu_model") or "")))
    entries.sort(key=lambda e: (e.title, e.learner))
    gradings.sort(key=lambda g: (g[1].graded_at, g[0]))
    return Room(tuple(entries), tuple(skipped), tuple(gradings))


_COLOURS = {"throttled": "#d62728", "busy": "#ff7f0e", "wide spread": "#bcbd22", "quiet": "#2ca02c",
            "not measured": "#999999"}


def _charts(room: Room) -> tuple[str, str]:
    import altair as alt

    from labkit.report.static import chart_svg

    scale = alt.Scale(domain=list(_COLOURS), range=list(_COLOURS.values()))
    rows = [{"title": e.title, "learner": e.learner, "measured": e.measured_ratio, "predicted": e.predicted_ratio,
             "lo": e.ci[0] if e.ci else None, "hi": e.ci[1] if e.ci else None, "noise": e.noise}
            for e in room.entries]
    measured = [r for r in rows if r["measured"]]
    ratios = ""
    if measured:
        base = alt.Chart(alt.Data(values=measured))
        y = alt.Y("title:N", title=None)
        x = alt.X("measured:Q", scale=alt.Scale(type="log"), title="candidate / baseline time (log; < 1 is faster)")
        bars = base.mark_rule(opacity=0.5).encode(x=alt.X("lo:Q", scale=alt.Scale(type="log")), x2="hi:Q", y=y,
                                                    yOffset="learner:N", color=alt.Color("noise:N", scale=scale))
        dots = base.mark_circle(size=60).encode(x=x, y=y, yOffset="learner:N",
                                                 color=alt.Color("noise:N", scale=scale, title="machine when measured"))
        preds = alt.Chart(alt.Data(values=[r for r in rows if r["predicted"]])).mark_tick(
            color="black", thickness=2, size=18).encode(x=alt.X("predicted:Q", scale=alt.Scale(type="log")), y=y)
        chart = (bars + dots + preds).properties(width=560, title="Measured ratio per learner (dots, with "
                                                 "intervals) beside the predictions (black ticks)")
        ratios = chart_svg(chart.to_dict())
    noise = ""
    if rows:
        chart = alt.Chart(alt.Data(values=rows)).mark_rect(stroke="white").encode(
            x=alt.X("title:N", title=None, axis=alt.Axis(labelAngle=-30, labelLimit=200)),
            y=alt.Y("learner:N", title=None), color=alt.Color("noise:N", scale=scale, title="machine when measured"),
        ).properties(title="Noise map: whose machine was busy or throttled when they measured")
        noise = chart_svg(chart.to_dict())
    return ratios, noise


def _svg(text: str) -> str:
    return text[text.index("<svg"):] if "<svg" in text else text


def _num(x: float | None) -> str:
    return "–" if x is None else f"{x:.3g}"


def _replications(room: Room) -> str:
    """Each experiment measured on two machines or more, pooled (:mod:`labkit.workshop.replication`)."""
    from labkit.report.static import chart_svg
    from labkit.workshop.replication import replicate

    studies = replicate(room)
    if not studies:
        return ""
    parts = ["<h2>Did it hold across the room?</h2><p>Each machine's ratio and interval, pooled with a "
             "random-effects model (DerSimonian–Laird): the pooled interval is the room's average effect; I² is "
             "the share of the spread between machines that their own noise does not explain.</p>"]
    for study in studies:
        parts.append(f"<p><b>{escape(study.summary())}</b></p>{_svg(chart_svg(study.chart().to_dict()))}")
    return "".join(parts)


def _shown(path: str, learners: set[str], names: bool) -> str:
    """A file's place for the page: the last parts of its path below a learner's folder, never a home path; the
    learner's folder under its anonymous id unless ``names``."""
    from labkit.workshop.gradebook import anonymous

    parts = Path(path).parts
    start = next((i for i, part in enumerate(parts) if part in learners), max(0, len(parts) - 2))
    shown = list(parts[start:])
    if shown and not names and shown[0] in learners:
        shown[0] = anonymous(shown[0])
    return "/".join(shown)


def render(room: Room, title: str = "The room's experiments", *, names: bool = False) -> str:
    """One self-contained HTML page (charts as inline SVG; nothing loaded from outside). Learners appear under
    anonymous ids unless ``names``; no file is shown by its home path."""
    from labkit.workshop.gradebook import anonymous, grid

    folders = {e.learner for e in room.entries} | {learner for learner, _ in room.gradings}
    if not names:  # the page is anonymous: every learner under their id, the charts included
        room = Room(tuple(dataclasses.replace(e, learner=anonymous(e.learner)) for e in room.entries),
                    room.skipped, room.gradings)
    ratios, noise = _charts(room)
    by_title: dict[str, list[Entry]] = {}
    for e in room.entries:
        by_title.setdefault(e.title, []).append(e)
    summary = []
    for t, es in by_title.items():
        got = [e.measured_ratio for e in es if e.measured_ratio is not None]
        pred = [e.predicted_ratio for e in es if e.predicted_ratio is not None]
        verdicts = ", ".join(f"{v} {sum(e.verdict == v for e in es)}" for v in sorted({e.verdict or "–" for e in es}))
        quiet = [e.measured_ratio for e in es if e.noise == "quiet" and e.measured_ratio is not None]
        summary.append(f"<tr><td>{escape(t)}</td><td>{len(es)}</td><td>{_num(statistics.median(pred) if pred else None)}"
                       f"</td><td>{_num(statistics.median(got) if got else None)}</td><td>"
                       f"{_num(min(got) if got else None)}–{_num(max(got) if got else None)}</td><td>"
                       f"{_num(statistics.median(quiet) if quiet else None)} ({len(quiet)})</td><td>"
                       f"{escape(verdicts)}</td></tr>")
    detail = "".join(f"<tr class='{escape(e.noise.replace(' ', '-'))}'><td>{escape(e.learner)}</td><td>"
                     f"{escape(e.title)}</td><td>{_num(e.predicted_ratio)}</td><td>{_num(e.measured_ratio)}</td>"
                     f"<td>{escape(e.verdict or '–')}</td><td>{escape(e.outcome or '–')}</td><td>{escape(e.noise)}"
                     f"</td><td>{escape(e.why)}</td></tr>" for e in room.entries)
    skipped = "".join(f"<li><code>{escape(_shown(p, folders, names))}</code>: "
                      f"{escape(why.replace(p, _shown(p, folders, names)))}</li>" for p, why in room.skipped)
    learners = len({e.learner for e in room.entries})
    head = ("<tr><th>experiment</th><th>records</th><th>predicted (median)</th><th>measured (median)</th>"
            "<th>measured range</th><th>median of quiet machines (n)</th><th>verdicts</th></tr>")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:72em}} table{{border-collapse:collapse;margin:1em 0}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:left}} .throttled td{{background:#fbe3e3}}
.busy td{{background:#fdebd3}} .wide-spread td{{background:#f5f5d5}} td.passed{{background:#e6f4ea}}
td.failed{{background:#fbe3e3}} td.not-tried{{color:#888}}</style></head><body>
<h1>{escape(title)}</h1>
<p>{len(room.entries)} experiment record(s) from {learners} learner(s); {len(room.skipped)} file(s) skipped
(listed at the end). Compare ratios, not milliseconds: machines differ, ratios travel. A learner far from the
room on a busy or throttled machine measured their neighbours.</p>
<h2>Each experiment across the room</h2>
<table>{head}{''.join(summary)}</table>
{_svg(ratios) if ratios else '<p>No measured experiments yet.</p>'}
<h2>Who passed which exercise</h2>
{grid(room, names=names)}
{_replications(room)}
<h2>Noise map</h2>
{_svg(noise)}
<table><tr><th>learner</th><th>experiment</th><th>predicted</th><th>measured</th><th>verdict</th><th>prediction</th>
<th>machine</th><th>why</th></tr>{detail}</table>
<h2>Skipped files</h2>
{f'<ul>{skipped}</ul>' if skipped else '<p>None.</p>'}
</body></html>
"""

