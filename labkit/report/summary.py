"""The top of a report, as HTML: the question, what changed against the baseline, the experiments, the
parameters and the environment. Pure functions of values already measured; nothing here runs anything."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

from labkit.learner.record import NAPKIN_TOLERANCE
from labkit.report.baseline import Change, Concluded

__all__ = ["top", "decision_block", "answer", "experiments_table", "baseline_banner", "environment_table",
           "parameters_table"]

_COLOURS = {"faster": "#1a7f37", "slower": "#cf222e", "less": "#1a7f37", "more": "#cf222e", "same": "#57606a", "inconclusive": "#9a6700",
            "better": "#1a7f37", "worse": "#cf222e", "unchanged": "#57606a", "confirmed": "#1a7f37",
            "refuted": "#cf222e"}

CSS = """
.labkit-report { font-family: var(--jp-content-font-family, sans-serif); font-size: 14px; line-height: 1.45;
  max-width: 1280px; margin: 0 auto 24px; padding: 16px 20px; border: 1px solid #d0d7de; border-radius: 6px; }
.labkit-report h2 { font-size: 17px; margin: 18px 0 6px; }
.labkit-report table { border-collapse: collapse; margin: 4px 0 8px; }
.labkit-report th, .labkit-report td { border: 1px solid #d0d7de; padding: 3px 8px; text-align: left;
  vertical-align: top; }
.labkit-report th { background: #f6f8fa; }
.labkit-report td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.labkit-report .labkit-kicker { color: #57606a; margin: 0 0 8px; }
.labkit-report .labkit-question { border-left: 4px solid #0969da; padding: 2px 12px; margin: 8px 0; }
.labkit-report .labkit-banner { padding: 8px 12px; border-radius: 6px; margin: 8px 0;
  background: #f6f8fa; border: 1px solid #d0d7de; }
.labkit-report .labkit-banner.changed { border-color: #cf222e; background: #fff5f5; }
.labkit-report .labkit-banner.improved { border-color: #1a7f37; background: #f3fbf5; }
.labkit-report .labkit-hyp { min-width: 15em; max-width: 26em; font-size: 13px; color: #24292f; }
.labkit-report .labkit-hyp summary { cursor: pointer; }
.labkit-report .labkit-scroll { max-width: 100%; overflow-x: auto; }
.labkit-report .labkit-decision { border: 1px solid #0969da; border-radius: 6px; padding: 4px 14px; margin: 8px 0; }
.labkit-report .labkit-packages { max-height: 12em; overflow-y: auto; }
.labkit-report .labkit-warn { color: #9a6700; }
.labkit-report ul.labkit-qualify { margin: 2px 0 6px; padding-left: 18px; color: #9a6700; font-size: 13px; }
.labkit-report ul.labkit-qualify li.labkit-qualify-head { list-style: none; margin-left: -18px; }
.labkit-report tr.labkit-set td { font-weight: 600; }
.labkit-widget-note { color: #57606a; font-style: italic; }
"""


def _tag(word: str | None) -> str:
    if not word:
        return "<span style='color:#57606a'>—</span>"
    return f"<b class='labkit-{escape(word)}' style='color:{_COLOURS.get(word, '#24292f')}'>{escape(word)}</b>"


def _num(x: float | None) -> str:
    return "—" if x is None else f"{x:.3g}"


def _ci(c: Concluded | None) -> str:
    if c is None or c.ci is None:
        return "—"
    level = "" if round(c.confidence, 4) == 0.95 else f" ({c.confidence:.2%})"
    return f"{c.ci[0]:.3g} – {c.ci[1]:.3g}{level}"


def experiments_table(experiments: Sequence[Concluded], changes: Sequence[Change] | None = None) -> str:
    """Every experiment record of the run: hypothesis, predicted vs measured ratio, interval, verdict,
    outcome, and (with a baseline) what changed."""
    if not experiments:
        return ("<p>This run saved no experiment record. Plan one with <code>labkit.Experiment.plan(...)</code>, "
                "conclude it with a comparison and <code>save()</code> it, and it appears here.</p>")
    by_title = {c.title: c for c in changes or ()}
    head = ["experiment", "hypothesis", "predicted ratio", "measured ratio", "interval (95 % unless said)", "verdict",
            "outcome"]
    if changes is not None:
        head += ["baseline ratio [interval]", "vs baseline"]
    def td(html: str, num: bool = False) -> str:
        return f"<td class='num'>{html}</td>" if num else f"<td>{html}</td>"

    rows = []
    for e in experiments:
        cells = [td(f"<b>{escape(e.title)}</b>"), td(_folded(e.hypothesis)),
                 td(_num(e.predicted_ratio), True), td(_num(e.ratio), True), td(_ci(e), True),
                 td(_tag(e.verdict or ("not measured" if not e.measured else None))), td(_judged(e))]
        if changes is not None:
            ch = by_title.get(e.title)
            then = ch.then if ch else None
            cells += [td(f"{_num(then.ratio if then else None)} [{_ci(then)}]", True), td(_tag(ch.status if ch else None))]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    note = ("<p class='labkit-kicker'>ratio = candidate time / baseline time, measured interleaved in this run "
            "(below 1: the candidate is faster). Outcome: <i>confirmed</i> when the predicted ratio lies inside the "
            f"measured interval widened by the napkin tolerance (±{NAPKIN_TOLERANCE:.0%} of the ratio: the range "
            "shown), <i>refuted</i> outside it whatever the verdict, <i>inconclusive</i> when the measurement cannot "
            "tell (no interval, or one too wide).</p>")
    return (note + "<div class='labkit-scroll'><table class='labkit-experiments'><tr>"
            + "".join(f"<th>{h}</th>" for h in head) + "</tr>" + "".join(rows) + "</table></div>")


def _judged(e: Concluded) -> str:
    """The outcome word, coloured, then the range it was judged by."""
    line = e.judgement
    word, _, rest = line.partition(": ")
    return _tag(e.outcome) + (f": {escape(rest)}" if rest and word == e.outcome else "")


def _folded(text: str, width: int = 60) -> str:
    """A hypothesis in a table cell: its first words, the whole text one click away."""
    if len(text) <= width:
        return f"<div class='labkit-hyp'>{escape(text)}</div>"
    cut = text[:width].rsplit(" ", 1)[0]
    return (f"<details class='labkit-hyp'><summary>{escape(cut)} …</summary>{escape(text)}</details>")


def answer(e: Concluded) -> str:
    """One experiment's answer in one line: the verdict in words, the ratio with its interval, the prediction."""
    if not e.measured:
        return f"<b>{escape(e.title)}</b>: not measured in this run"
    assert e.ratio is not None
    stats = f"ratio {e.ratio:.3g}, interval {_ci(e)}"
    said = {"faster": f"the candidate is {1 / e.ratio:.2f}× faster",
            "slower": f"the candidate is {e.ratio:.2f}× slower",
            "less": f"the candidate uses {1 / e.ratio:.2f}× less {escape(e.metric.replace('_', ' ') or 'memory')}"
                    if e.ratio > 0 else "the candidate uses none",
            "more": f"the candidate uses {e.ratio:.2f}× more {escape(e.metric.replace('_', ' ') or 'memory')}",
            "same": "no difference that matters (within the threshold)",
            "inconclusive": "no answer: too noisy to tell"}.get(e.verdict or "", escape(str(e.verdict)))
    pred = "" if e.predicted_ratio is None else f"; predicted {e.predicted_ratio:.3g}"
    outcome = f" — {_judged(e)}" if e.outcome else ""
    return f"{_tag(e.verdict)} <b>{escape(e.title)}</b>: {said} ({stats}{pred}){outcome}"


def qualified(e: Concluded) -> str:
    """What qualifies an answer, under its line: each warning of the comparison that concluded it (cut short, a
    wide spread, a busy machine, the collector's share), so the top of the page says how far to trust it."""
    if not e.measured or not e.warnings:
        return ""
    said = "".join(f"<li>{escape(w)}</li>" for w in e.warnings)
    return f"<ul class='labkit-qualify'><li class='labkit-qualify-head'>trust it with care:</li>{said}</ul>"


def held(e: Concluded, replicated: Sequence[Sequence[Concluded]]) -> str:
    """With ``--repeat``: in how many of the runs the verdict held, and the ratios across them beside this run's
    interval (which covers one run only: the runs' spread is the noise between fresh kernels)."""
    if not replicated or not e.measured:
        return ""
    same = [c for run in replicated for c in run if c.title == e.title and c.measured]
    ratios = [e.ratio, *(c.ratio for c in same)]
    kept = 1 + sum(c.verdict == e.verdict for c in same)
    runs = 1 + len(replicated)
    spread = f"{min(ratios):.3g}–{max(ratios):.3g}" if len(ratios) > 1 else "this run only"
    inside = sum(e.ci[0] <= r <= e.ci[1] for r in ratios[1:]) if e.ci is not None else 0
    missing = runs - len(ratios)
    said = (f"held in {kept} of {runs} runs (fresh kernels): ratios {spread} across them, "
            f"{inside} of {len(ratios) - 1} other runs inside this run's interval {_ci(e)}"
            + (f"; {missing} run(s) did not measure it" if missing else ""))
    return f"<br><span class='labkit-{'kicker' if kept == runs else 'warn'}'>{escape(said)}</span>"


def decision_block(question_html: str, experiments: Sequence[Concluded], change_mind_html: str | None,
                   replicated: Sequence[Sequence[Concluded]] = ()) -> str:
    """The top of the page: the question, each experiment's answer in one line, and what would change it."""
    answers = "".join(f"<li>{answer(e)}{held(e, replicated)}{qualified(e)}</li>" for e in experiments) or \
        "<li>no experiment was recorded: nothing is decided by this run</li>"
    change = change_mind_html or ("<p>The notebook does not say what would change this decision: add a text cell "
                                  "headed <code>## What would change my mind</code>.</p>")
    return (f"<div class='labkit-decision'><h2>Decision</h2><div class='labkit-question'>{question_html}</div>"
            f"<p><b>Answer</b>, per experiment:</p><ul>{answers}</ul>"
            f"<p><b>What would change it</b>:</p><div class='labkit-change'>{change}</div></div>")


def baseline_banner(changes: Sequence[Change], baseline: str, then: Any = None, now_fp: dict | None = None,
                    differs: Sequence[str] = ()) -> str:
    """The line at the very top: what changed (better/worse) against the baseline, then the rest in brief."""
    counts = {s: sum(c.status == s for c in changes) for s in ("worse", "better", "unchanged", "new", "missing",
                                                                "unmeasured")}
    when = f", run {escape(then.started_at)}" if then is not None and then.started_at else ""
    commit = then.git.get("commit") if then is not None and then.git else None
    where = f"<code>{escape(Path(baseline).name)}</code>{when}{f', commit {escape(commit)}' if commit else ''}"
    summary = " · ".join(f"{n} {s}" for s, n in counts.items() if n)
    klass = "changed" if counts["worse"] else "improved" if counts["better"] else ""
    items = "".join(f"<li>{_tag(c.status)} <b>{escape(c.title)}</b> — {escape(c.note)}</li>"
                    for c in changes if c.changed or c.status == "missing")
    if not items:
        items = "<li>nothing changed: every experiment found in both runs has overlapping ratio intervals</li>" \
            if counts["unchanged"] else "<li>no experiment could be compared (none found in both runs)</li>"
    warn = ""
    then_fp = then.fingerprint if then is not None else None
    if then_fp and now_fp:
        keys = ("cpu_model", "cores_usable", "python")
        moved = [k for k in keys if then_fp.get(k) != now_fp.get(k)]
        if moved:
            warn = (f"<p class='labkit-warn'>The baseline ran on a different machine or Python ({', '.join(moved)} "
                    "differ): ratios travel better than times, but read changes with care.</p>")
    if differs:
        warn += ("<p class='labkit-warn'><b>Compared anyway, though the runs differ:</b> "
                 + "; ".join(escape(d) for d in differs) + ". Read every change below with that in mind.</p>")
    return (f"<div class='labkit-banner {klass}'><b>Against the baseline</b> {where}: {summary or 'nothing to compare'}"
            f"<ul>{items}</ul><span class='labkit-kicker'>Compared by title, ratio interval now vs then — never raw "
            f"samples across runs.</span>{warn}</div>")


_SOURCES = {"passed": "passed (-p)", "--quick": "set by --quick"}


def parameters_table(passed: dict[str, Any], declared: dict[str, str], sources: dict[str, str] | None = None) -> str:
    """Every parameter's value in this run, and where it came from: passed, set by ``--quick``, or the
    notebook's default (as its parameters cell writes it)."""
    sources = sources or {}
    rows = []
    for name in [*declared, *(k for k in passed if k not in declared)]:
        if name in passed:
            value, where = repr(passed[name]), _SOURCES.get(sources.get(name, "passed"), sources.get(name, ""))
        else:
            value, where = declared[name], "the notebook's default"
        klass = "" if name not in passed else " class='labkit-set'"
        rows.append(f"<tr{klass}><td><code>{escape(name)}</code></td><td><code>{escape(value)}</code></td>"
                    f"<td>{escape(where)}</td></tr>")
    if not rows:
        return "<p>The notebook has no parameters cell; it ran as written.</p>"
    return ("<table><tr><th>parameter</th><th>value used</th><th>from</th></tr>" + "".join(rows) + "</table>")


def _git_row(git: dict[str, Any] | None) -> str:
    if not git:
        return "not in a git repository"
    dirty = "<b class='labkit-warn'>dirty</b> (uncommitted changes to tracked files)" if git.get("dirty") else "clean"
    mine = "" if git.get("notebook_committed", True) else "; <b class='labkit-warn'>the notebook itself has " \
        "uncommitted changes or is not committed</b>"
    return f"commit <code>{escape(str(git.get('commit')))}</code>, {dirty}{mine} — {escape(str(git.get('repository')))}"


def environment_table(fp: dict[str, Any], git: dict[str, Any] | None, imported: dict[str, str] | None = None) -> str:
    """The machine and software the run measured on (the fingerprint at the start of the run), and the version
    of every package the run's kernel had imported by its end (``imported``, when recorded)."""
    gib = (fp.get("memory_total_bytes") or 0) / 2**30
    avail = (fp.get("memory_available_bytes") or 0) / 2**30
    lc = fp.get("git_commit") or "unknown"
    rows = [
        ("notebook's repository", _git_row(git)),
        ("labkit", f"{escape(str(fp.get('packages', {}).get('labkit', '?')))}, commit <code>"
                   f"{escape(lc.replace('+dirty', ''))}</code>{' (dirty)' if lc.endswith('+dirty') else ''}"),
        ("CPU", escape(f"{fp.get('cpu_model')} — {fp.get('cores_usable')} usable of {fp.get('cores_logical')} "
                       f"logical cores; caches {fp.get('caches')}")),
        ("memory", f"{gib:.1f} GiB, {avail:.1f} GiB available at the start"),
        ("load average at the start", escape(str(fp.get("load_average")))),
        ("CPU governor", escape(str(fp.get("cpu_governor")))),
        ("OS", escape(str(fp.get("os")))),
        ("Python", escape(f"{fp.get('python')} ({fp.get('python_implementation')})")),
        ("packages", escape(", ".join(f"{k} {v}" for k, v in (fp.get("packages") or {}).items()))),
    ]
    if imported is not None:
        listed = ", ".join(f"{k} {v}" for k, v in sorted(imported.items(), key=lambda kv: kv[0].lower()))
        rows.append((f"every package the run imported ({len(imported)})",
                     f"<div class='labkit-packages'>{escape(listed)}</div>"))
    else:
        rows.append(("every package the run imported", "not recorded (the run did not reach its end under "
                                                       "<code>labkit report</code>)"))
    return "<table>" + "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows) + "</table>"


def top(*, title: str, question_html: str, kicker: str, experiments: Sequence[Concluded],
        changes: Sequence[Change] | None, baseline: str | None, baseline_run: Any, parameters: dict[str, Any],
        declared: dict[str, str], fingerprint: dict[str, Any], git: dict[str, Any] | None,
        notes: Sequence[str] = (), sources: dict[str, str] | None = None, differs: Sequence[str] = (),
        change_mind_html: str | None = None, imported: dict[str, str] | None = None,
        replicated: Sequence[Sequence[Concluded]] = ()) -> str:
    """The whole summary section placed above the notebook in the report."""
    parts = [f"<section class='labkit-report' id='labkit-report'><style>{CSS}</style>",
             f"<p class='labkit-kicker'>{kicker}</p>"]
    if changes is not None and baseline is not None:
        parts.append(baseline_banner(changes, baseline, baseline_run, fingerprint, differs))
    parts.append(decision_block(question_html, experiments, change_mind_html, replicated))
    parts += [f"<h2>Experiments ({len(experiments)})</h2>", experiments_table(experiments, changes)]
    parts += ["<h2>Parameters</h2>", parameters_table(parameters, declared, sources)]
    parts += ["<h2>Environment</h2>", environment_table(fingerprint, git, imported)]
    parts += [f"<p class='labkit-kicker'>{escape(n)}</p>" for n in notes]
    parts.append(f"<p class='labkit-kicker'>Below: {escape(title)} as it ran, every output kept.</p></section>")
    return "".join(parts)
