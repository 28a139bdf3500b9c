"""labkit report and labkit new-review: parameters, widgets made static, the offline check, the baseline diff,
a failing cell, the template — and reports of real runs (tiny notebooks made here, and the template).

Every lab's report is built in test_notebooks.py from the run it already makes (no lab runs twice for it);
test_browser.py opens the template's report in Chromium with the network blocked.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from labkit.errors import BadInputError, NotebookError
from labkit.learner.record import Experiment
from labkit.measure.comparison import compare
from labkit.report import build, concluded_in, diff, new_review, render
from labkit.report.baseline import Concluded
from labkit.report.review import TEMPLATE
from labkit.report.run import ReportRun, parse_parameters
from labkit.report.static import WIDGET_STATE, WIDGET_VIEW, external_resources, make_static
from labkit.results import write_json_atomic

# -- parameters ----------------------------------------------------------------------------------------------


def _declaring(path: Path, params: str, kernelspec: dict | None = None) -> Path:
    meta = {"kernelspec": kernelspec} if kernelspec else {}
    nbformat.write(new_notebook(cells=[new_markdown_cell("# q"), new_code_cell(params, metadata={"tags": ["parameters"]})],
                                metadata=meta), path)
    return path


@pytest.mark.parametrize("given, typed", [
    ("SIZES_MB=5,50", {"SIZES_MB": (5, 50)}), ("SIZES_MB=[5, 50]", {"SIZES_MB": (5, 50)}),
    ("SIZES_MB=(5, 50)", {"SIZES_MB": (5, 50)}), ("SIZES_MB=5", {"SIZES_MB": (5,)}),
    ("RATE=3", {"RATE": 3.0}), ("NAME=123", {"NAME": "123"}), ("N=2e6", {"N": 2_000_000}),
    ("LIST=(3, 4)", {"LIST": [3, 4]}), ("NAMES=c,d", {"NAMES": ("c", "d")}), ("QUICK=true", {"QUICK": True})])
def test_parameters_arrive_as_the_types_of_the_notebooks_defaults(tmp_path, given, typed):
    from labkit.report.run import check_parameters

    nb = _declaring(tmp_path / "t.ipynb", "SIZES_MB = (5, 50)\nQUICK = False\nRATE = 2.5\nNAME = 'x'\nN = 10**6\n"
                                         "LIST = [1, 2]\nNAMES = ('a', 'b')")  # no kernel metadata at all
    raw = {given.partition("=")[0]: given.partition("=")[2]}
    got = check_parameters(nb, parse_parameters([given]), raw)
    assert got == typed and all(type(got[k]) is type(v) for k, v in typed.items())


@pytest.mark.parametrize("given, says", [("ROUNDS=2.5", "ROUNDS is a whole number"), ("QUICK=3", "QUICK is True/False"),
                                         ("OPTS=[1]", "OPTS is a dict")])
def test_a_value_that_cannot_be_its_parameters_type_is_refused_naming_the_default(tmp_path, given, says):
    from labkit.report.run import check_parameters

    nb = _declaring(tmp_path / "t.ipynb", "ROUNDS = 3\nQUICK = False\nOPTS = {'a': 1}")
    with pytest.raises(BadInputError, match=says) as e:
        check_parameters(nb, parse_parameters([given]), {given.split("=")[0]: given.split("=")[1]})
    assert "its parameters cell says" in str(e.value)


def test_papermill_gets_tuples_written_as_tuples():
    from papermill.translators import papermill_translators

    from labkit.report.params import use_tuple_translator

    use_tuple_translator()
    t = papermill_translators.find_translator("python3", "python")
    assert t.translate((5, 50)) == "(5, 50)" and t.translate((5,)) == "(5,)"
    assert t.translate({"a": [1, (2, "x")]}) == '{"a": [1, (2, "x")]}'


def test_a_kernel_that_is_not_installed_is_refused_in_one_line_saying_what_to_add(tmp_path, capsys, monkeypatch):
    from labkit.cli import main

    monkeypatch.chdir(tmp_path)
    nb = _declaring(tmp_path / "k.ipynb", "QUICK = False", {"name": "julia-1.9", "language": "julia",
                                                           "display_name": "Julia"})
    assert main(["report", str(nb)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "asks for the kernel 'julia-1.9'" in err and '"kernelspec"' in err
    assert "Traceback" not in err and not (tmp_path / "results").exists()


def test_parameters_are_python_literals_else_text():
    assert parse_parameters(["ROUNDS=10", "QUICK=True", "RATE=2.5", "SIZES=(10, 100)", "NAME=orjson",
                             "S='quoted'", "NONE=None", "EMPTY="]) == {
        "ROUNDS": 10, "QUICK": True, "RATE": 2.5, "SIZES": (10, 100), "NAME": "orjson", "S": "quoted",
        "NONE": None, "EMPTY": ""}


@pytest.mark.parametrize("bad", ["ROUNDS", "=3", "1X=3", "A B=1"])
def test_a_malformed_parameter_says_how_to_write_one(bad):
    with pytest.raises(BadInputError, match="NAME=VALUE"):
        parse_parameters([bad])


@pytest.mark.parametrize("bad", ["S={1, 2}", "B=b'x'", "C=1j", "D={1: 2}"])
def test_a_parameter_that_cannot_be_kept_is_refused(bad):
    with pytest.raises(BadInputError, match="a number, text"):
        parse_parameters([bad])


# -- the baseline diff, on exact values --------------------------------------------------------------------------


def _c(title: str, ratio: float | None, lo: float | None = None, hi: float | None = None) -> Concluded:
    ci = (lo, hi) if lo is not None else None
    return Concluded(title, "a hypothesis", 0.5, ratio, ci, "faster" if ratio else None, None, 0.05, None, "")


def test_diff_marks_worse_better_unchanged_by_interval_not_by_ratio():
    then = [_c("slowed", 0.50, 0.48, 0.52), _c("sped", 0.50, 0.48, 0.52), _c("drift", 0.50, 0.48, 0.52),
            _c("gone", 0.5, 0.4, 0.6), _c("unmeasured", None)]
    now = [_c("slowed", 0.60, 0.56, 0.64),      # 0.56 > 0.52 × 1.05: worse
           _c("sped", 0.40, 0.38, 0.44),        # 0.44 < 0.48 / 1.05: better
           _c("drift", 0.56, 0.545, 0.57),      # apart, but by less than min_effect (5 %): unchanged
           _c("fresh", 0.3, 0.2, 0.4), _c("unmeasured", 0.5, 0.4, 0.6)]
    got = {c.title: c.status for c in diff(now, then)}
    assert got == {"slowed": "worse", "sped": "better", "drift": "unchanged", "fresh": "new", "gone": "missing",
                   "unmeasured": "unmeasured"}
    strict = {c.title: c.status for c in diff(now, then, tolerance=0.0)}
    assert strict["drift"] == "worse"            # the strict rule the tolerance relaxes


def test_diff_uses_the_last_concluded_record_of_a_title():
    then = [_c("x", 0.5, 0.48, 0.52)]
    now = [_c("x", 0.9, 0.88, 0.92), _c("x", 0.5, 0.49, 0.51), _c("x", None)]
    [change] = diff(now, then)
    assert change.status == "unchanged" and change.now.ratio == 0.5


def test_a_record_gives_its_concluding_interval(tmp_path):
    a, b = [100.0, 101.0, 99.0, 100.0] * 10, [50.0, 51.0, 49.0, 50.0] * 10
    exp = Experiment.plan("halved", "the candidate does half the work, so half the time", predicted_ratio=0.5)
    exp = exp.add(compare([1.0] * 40, [3.0] * 40)).conclude(compare(a, b))   # an unrelated comparison first
    exp.save(tmp_path)
    [c] = concluded_in(tmp_path)
    assert c.measured and c.ratio == exp.measured_ratio == 0.5
    assert c.ci[0] <= 0.5 <= c.ci[1] and c.verdict == "faster" and c.outcome == "confirmed"


def test_the_outcome_column_shows_the_range_and_judges_an_old_record_by_todays_rule(tmp_path):
    from labkit.report.summary import experiments_table

    exp = Experiment.plan("join", "one JOIN instead of twenty catalog calls: a seventh of the time",
                          predicted_ratio=0.02)
    done = exp.conclude(compare([100.0, 102.0, 98.0] * 10, [14.3, 14.6, 14.0] * 10))
    assert done.outcome == "refuted"
    # a record concluded under the old rule (effect within 2×) said "confirmed" and kept no measured_ci
    old = {**done.to_dict(), "outcome": "confirmed"}
    old.pop("measured_ci")
    write_json_atomic(tmp_path / "old.json", old)
    [c] = concluded_in(tmp_path)
    assert c.outcome == "refuted" and c.judgement.startswith("refuted: 0.02 outside ")
    table = experiments_table([c])
    assert "refuted</b>: 0.02 outside " in table and "widened by the napkin tolerance" in table


# -- widgets made static, and the offline check ------------------------------------------------------------------


def _chart_spec() -> dict:
    import altair as alt
    import pandas as pd

    return alt.Chart(pd.DataFrame({"x": [1, 2, 3], "y": [3, 1, 2]})).mark_bar().encode(x="x:O", y="y:Q").to_dict()


def _model(name: str, **state) -> dict:
    return {"model_module": "@jupyter-widgets/controls", "model_name": name, "model_module_version": "2.0.0",
            "state": state}


def _view(model_id: str) -> dict:
    return {"output_type": "display_data", "metadata": {},
            "data": {WIDGET_VIEW: {"model_id": model_id, "version_major": 2, "version_minor": 0},
                     "text/plain": f"<widget {model_id}>"}}


def _executed(extra_outputs: list | None = None) -> nbformat.NotebookNode:
    chart = {"model_module": "anywidget", "model_name": "AnyModel", "model_module_version": "~0.11.*",
             "state": {"_anywidget_id": "altair.jupyter.jupyter_chart.JupyterChart", "_esm": "x" * 1000,
                       "spec": _chart_spec()}}
    state = {
        "c1": chart, "c2": dict(chart),
        "bar": _model("HBoxModel", children=["IPY_MODEL_t1", "IPY_MODEL_p1", "IPY_MODEL_t2"]),
        "t1": _model("HTMLModel", value="A/B rounds"), "p1": _model("FloatProgressModel", value=6),
        "t2": _model("HTMLModel", value="6/6"),
        "panel": _model("VBoxModel", children=["IPY_MODEL_ph", "IPY_MODEL_pp", "IPY_MODEL_box"]),
        "ph": _model("HTMLModel", value="<b>How noisy is this machine?</b>"),
        "pp": _model("FloatProgressModel", value=1), "box": _model("BoxModel", children=["IPY_MODEL_c2"]),
    }
    cells = [
        new_markdown_cell("# Does batching help?\n\nThe question this run decides."),
        new_code_cell("QUICK = False", metadata={"tags": ["parameters"]}),
        new_code_cell("charts.ab_chart(cmp)", outputs=[_view("c1")], execution_count=1),
        new_code_cell("compare(...)", outputs=[_view("bar"), {"output_type": "stream", "name": "stdout",
                                                               "text": "faster\n"}], execution_count=2),
        new_code_cell("panel", outputs=[_view("panel")], execution_count=3),
        new_code_cell("gone", outputs=[_view("nowhere")], execution_count=4),
        new_code_cell("table", outputs=[{"output_type": "execute_result", "execution_count": 5, "metadata": {},
                                         "data": {"text/html": "<table><tr><td>42</td></tr></table>",
                                                  "text/plain": "42"}}] + (extra_outputs or []),
                      execution_count=5),
    ]
    nb = new_notebook(cells=cells)
    nb.metadata["widgets"] = {WIDGET_STATE: {"state": state, "version_major": 2, "version_minor": 0}}
    nb.metadata["papermill"] = {"parameters": {"QUICK": True}, "start_time": "2026-11-30T10:00:00",
                                "duration": 12.0}
    return nbformat.from_dict(nb)


def test_widgets_become_svg_charts_notes_or_nothing():
    nb, counts = make_static(_executed())
    assert counts == {"charts": 2, "progress_bars": 1, "widgets": 1, "missing": 1}
    assert "widgets" not in nb.metadata                      # no widget manager needed (or fetched)
    outs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outs if WIDGET_VIEW in o.get("data", {})]
    svgs = [o["data"]["image/svg+xml"] for o in outs if "image/svg+xml" in o.get("data", {})]
    assert len(svgs) == 2 and all(s.startswith("<svg") and "marks" in s for s in svgs)
    notes = [o["data"]["text/html"] for o in outs if "labkit-widget-note" in o.get("data", {}).get("text/html", "")]
    assert len(notes) == 2 and "How noisy is this machine?" in notes[0]


def test_the_offline_check_finds_what_a_page_would_fetch():
    page = """<html><head><link rel="stylesheet" href="https://cdn.example/x.css"><link rel="canonical" href="https://a">
      <script src="https://cdn.example/vega.js"></script><script>var s = "<img src=http://no>";</script>
      <style>@import "theme.css"; .a { background: url('http://img.example/bg.png') } .b { background: url(data:image/png;base64,AA) }</style>
      </head><body><img src="chart.png"><img src="data:image/png;base64,AA"><a href="https://docs.example">docs</a>
      <div style="background-image: url(//cdn.example/i.png)"></div><iframe src="flame.html"></iframe>
      <svg><image href="https://tile.example/t.png"/><use href="#sym"/></svg></body></html>"""
    assert external_resources(page) == [
        "https://cdn.example/x.css", "https://cdn.example/vega.js", "theme.css", "http://img.example/bg.png",
        "chart.png", "//cdn.example/i.png", "flame.html", "https://tile.example/t.png"]


def test_render_puts_the_question_experiments_parameters_and_environment_on_top(tmp_path):
    path = tmp_path / "run.ipynb"
    nbformat.write(_executed(), path)
    results = tmp_path / "results"
    exp = Experiment.plan("batched export", "one call per batch instead of one per item: a fifth of the time",
                          predicted_ratio=0.2)
    exp.conclude(compare([100.0, 102.0, 98.0] * 10, [20.0, 21.0, 19.0] * 10)).save(results)
    Experiment.plan("planned only", "written down, never measured in this run").save(results)
    r = render(path, results=results)
    top, body = r.html.split("Below: run.ipynb as it ran", 1)
    assert "Does batching help?" in top and "Does batching help?" not in body       # moved, not repeated
    assert "batched export" in top and "confirmed" in top and "planned only" in top and "not measured" in top
    assert "<code>QUICK</code>" in top and "passed (-p)" in top
    assert "not in a git repository" in top                                      # tmp_path is not
    assert [e.title for e in r.experiments] == ["batched export", "planned only"] and r.changes is None
    assert body.count("<svg") >= 2 and "<td>42</td>" in body
    assert external_resources(r.html) == [] and "<script src" not in r.html


def test_the_page_opens_with_the_decision_and_folds_long_hypotheses(tmp_path):
    nb = _executed()
    nb.cells.append(new_markdown_cell("## What would change my mind\n\n* **a slower tail under load** — then no."))
    path = tmp_path / "run.ipynb"
    nbformat.write(nb, path)
    results = tmp_path / "results"
    long = "one call per batch instead of one per item, so the per-call overhead is paid a fifth as often: " * 2
    Experiment.plan("batched export", long, predicted_ratio=0.2).conclude(
        compare([100.0, 102.0, 98.0] * 10, [20.0, 21.0, 19.0] * 10)).save(results)
    Experiment.plan("planned only", "written down, never measured").save(results)
    html = render(path, results=results).html
    decision = html[html.index("<h2>Decision</h2>"):html.index("<h2>Experiments")]
    assert "Does batching help?" in decision and "a slower tail under load" in decision
    [line] = [li for li in decision.split("<li>") if "batched export" in li]
    assert "the candidate is 5.00× faster (ratio 0.2, interval" in line and "predicted 0.2" in line
    assert "confirmed" in line and "planned only</b>: not measured in this run" in decision
    table = html[html.index("<h2>Experiments"):html.index("<h2>Parameters")]
    assert '<div class="labkit-scroll"><table' in table
    assert f"<summary>{long[:60].rsplit(' ', 1)[0]} …</summary>" in table and table.count(long.strip()) == 1
    assert "every package the run imported</th><td>not recorded" in html       # not run by labkit report
    # a notebook that says nothing about it is told how to
    nbformat.write(_executed(), path)
    assert "headed <code>## What would change my mind</code>" in render(path, results=results).html


def test_a_page_that_would_reach_the_network_is_refused_and_nothing_is_written(tmp_path, monkeypatch):
    # GIVEN a run whose output loads an image from the web
    nb = _executed(extra_outputs=[{"output_type": "display_data", "metadata": {},
                                   "data": {"text/html": "<img src='https://example.com/flame.png'>"}}])
    folder = tmp_path / "reports" / "run-1"
    folder.mkdir(parents=True)
    run = ReportRun(str(tmp_path / "run.ipynb"), str(folder), {}, "2026-11-30T10:00:00", status="executed")
    nbformat.write(nb, run.notebook)
    nbformat.write(nb, run.executed)
    monkeypatch.setattr("labkit.report.pipeline.execute", lambda *a, **k: run)
    # WHEN the report is built
    with pytest.raises(NotebookError, match="example.com/flame.png"):
        build(run.notebook, out=tmp_path / "out.html", say=lambda line: None)
    # THEN no HTML exists and the run says why
    assert not (tmp_path / "out.html").exists() and not list(tmp_path.rglob("*.html"))
    assert ReportRun.find(folder).status == "failed"


# -- new-review -------------------------------------------------------------------------------------------------


def test_new_review_copies_the_template_and_never_overwrites(tmp_path):
    made = new_review("orjson-export", tmp_path)
    assert made == tmp_path / "orjson-export.ipynb" and made.read_bytes() == TEMPLATE.read_bytes()
    made.write_text("my edits")
    with pytest.raises(BadInputError, match="already exists"):
        new_review("orjson-export.ipynb", tmp_path)
    assert made.read_text() == "my edits"
    with pytest.raises(BadInputError, match="needs a name"):
        new_review(" ", tmp_path)


def test_the_template_is_a_complete_review_committed_clean():
    nb = nbformat.read(TEMPLATE, as_version=4)
    nbformat.validate(nb)
    assert nb.cells[0].cell_type == "markdown" and "**Question.**" in nb.cells[0].source
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert params and "QUICK = False" in params[0].source
    assert not [c for c in nb.cells if c.cell_type == "code" and (c.outputs or c.execution_count)]
    text = "\n".join(c.source for c in nb.cells)
    for part in ("Baseline and candidate", "Hypothesis, with napkin math", "Experiment.plan", "labkit.compare",
                 "load.run", "Verdict", "What would change my mind"):
        assert part in text, part


# -- the command line: checked before anything runs -------------------------------------------------------------


def _notebook(path: Path, *sources: str, params: str = "QUICK = False") -> Path:
    cells = [new_markdown_cell("# A tiny experiment\n\nDoes the test harness see what happened?"),
             new_code_cell(params, metadata={"tags": ["parameters"]})] + [new_code_cell(s) for s in sources]
    nb = new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                            "language": "python"}})
    nbformat.write(nb, path)
    return path


def test_bad_arguments_fail_fast_with_what_to_do(tmp_path, capsys, monkeypatch):
    from labkit.cli import main

    monkeypatch.chdir(tmp_path)
    nb = _notebook(tmp_path / "tiny.ipynb", "x = 1", params="QUICK = False\nROUNDS = 3")
    cases = [(["report", "missing.ipynb"], "no notebook at missing.ipynb"),
             (["report", str(tmp_path)], "is a folder"),
             (["report", str(nb), "-p", "ROUND=4"], "has no parameter ROUND; its parameters are QUICK, ROUNDS"),
             (["report", str(nb), "-p", "ROUNDS"], "NAME=VALUE"),
             (["report", str(nb), "--quick", "-p", "QUICK=False"], "disagree"),
             (["report", str(nb), "-p", "ROUNDS=2.5"], "ROUNDS is a whole number"),
             (["report"], "which notebook?"),
             (["report", "--render", str(tmp_path)], "not the folder of a `labkit report` run"),
             (["report", str(nb), "--baseline", str(tmp_path / "nope")], "no such folder"),
             (["report", str(nb), "--baseline", str(tmp_path)], "holds no experiment record")]
    for argv, message in cases:
        assert main(argv) == (2 if "--baseline" in argv else 1), argv
        assert message in capsys.readouterr().err, argv
    assert not (tmp_path / "results").exists()      # nothing ran


# -- real runs (a kernel each) ----------------------------------------------------------------------------------

SPIN = '''
import time
import labkit

def work(n):                     # pure CPU work, timed on this thread's CPU clock: other programs do not stretch it
    total = 0
    for i in range(n):
        total += i
    return total

N = 20_000
def baseline(): work(2 * N)
def candidate(): work(N + SLOWDOWN)          # half the work, unless a slowdown is injected
def control_a(): work(N)
def control_b(): work(3 * N // 2)

for title, a, b, pred in (("spin: candidate", baseline, candidate, 0.5), ("spin: control", control_a, control_b, 1.5)):
    exp = labkit.Experiment.plan(title, "the candidate does a known share of the baseline's work", predicted_ratio=pred)
    exp.save()
    exp = exp.conclude(labkit.compare(a, b, rounds=15, max_rounds=15, clock=time.thread_time_ns, progress=True))
    exp.save()
    print(exp)
'''


@pytest.mark.slow
def test_a_slowdown_injected_into_the_candidate_is_marked_worse_and_a_rerun_unchanged(tmp_path, capfd, monkeypatch):
    from labkit.cli import main

    monkeypatch.chdir(tmp_path)
    nb = _notebook(tmp_path / "spin.ipynb", SPIN, params="QUICK = False\nSLOWDOWN = 0")
    reports = tmp_path / "results" / "reports"

    def report(*args: str) -> tuple[Path, str]:
        before = {p for p in reports.glob("spin-*") if p.is_dir()} if reports.exists() else set()
        assert main(["report", str(nb), *args]) == 0
        out = capfd.readouterr()
        [folder] = {p for p in reports.glob("spin-*") if p.is_dir()} - before
        return folder, out.out + out.err

    first, shown = report()
    assert "Executing" in shown                                  # papermill's progress bar, per cell
    assert "A/B rounds" in shown                                 # and the kernel's comparisons', on this terminal
    same, shown = report("--baseline", str(first), "--no-progress")
    assert "against the baseline: nothing changed" in shown and "A/B rounds" not in shown
    # a slowdown injected through a parameter is "other parameters": refused unless compared anyway
    assert main(["report", str(nb), "--baseline", str(first), "-p", "SLOWDOWN=40_000"]) == 2
    assert "SLOWDOWN = 40000 now, 0 then" in capfd.readouterr().err
    slowed, shown = report("--baseline", str(first), "-p", "SLOWDOWN=40_000", "--no-progress", "--compare-anyway")
    # the verdict line itself (the kernel's own stderr may follow it: once, under load, a traceback from
    # ipykernel's shutdown, whose "dispatch_control" is not the control experiment)
    verdict = next((line for line in shown.splitlines() if "against the baseline:" in line), shown)
    assert "against the baseline: worse — spin: candidate" in verdict and "control" not in verdict, shown[-3000:]
    html = Path(ReportRun.find(slowed).html).read_text()
    banner = html[html.index("Against the baseline"):html.index("</div>", html.index("Against the baseline"))]
    assert "1 worse" in banner and "1 unchanged" in banner and "spin: candidate" in banner
    assert "parameter SLOWDOWN: 40000 now, 0 in the baseline" in banner
    assert ReportRun.find(slowed).parameters == {"SLOWDOWN": 40_000}
    then = {c.title: c for c in concluded_in(first)}
    now = {c.title: c for c in concluded_in(slowed)}
    assert now["spin: candidate"].ratio > 1.5 * then["spin: candidate"].ratio      # what the slowdown did


@pytest.mark.slow
def test_a_failing_cell_stops_the_report_naming_the_cell_and_writes_no_html(tmp_path, capsys, monkeypatch):
    from labkit.cli import main

    monkeypatch.chdir(tmp_path)
    nb = _notebook(tmp_path / "broken.ipynb", "x = 1", "ratio = x / 0", "print('never')")
    assert main(["report", str(nb), "--no-progress", "--out", str(tmp_path / "broken.html")]) == 1
    err = capsys.readouterr().err
    assert "cell 4 of broken.ipynb" in err and "ratio = x / 0" in err
    assert "ZeroDivisionError: division by zero" in err and "no report was written" in err
    assert not list(tmp_path.rglob("*.html"))
    [folder] = (tmp_path / "results" / "reports").glob("broken-*")
    run = ReportRun.find(folder)
    assert run.status == "failed" and "cell 4" in run.error and run.executed.exists()


def _running(path: Path, started: str, status: str = "running") -> Path:
    """An executed notebook as papermill leaves it mid-run: cell 3 of the source (after the injected parameters)
    started at ``started``, labkit's census cell still to come."""
    from labkit.report.cellwatch import CENSUS_TAG

    def cell(source, tags=(), pm=None):
        c = new_code_cell(source, metadata={"tags": list(tags)})
        c.metadata["papermill"] = pm or {"status": "pending"}
        return c

    nb = new_notebook(cells=[new_markdown_cell("# A review"), cell("QUICK = False", ["parameters"], {"status": "completed"}),
                             cell("QUICK = True", ["injected-parameters"], {"status": "completed"}),
                             cell("\n# parse both ways\ncmp = labkit.compare(a, b)",
                                  pm={"status": status, "start_time": started}),
                             cell("print(cmp)"), cell("census()", [CENSUS_TAG])])
    nbformat.write(nb, path)
    return path


def test_a_long_cell_is_named_while_it_runs_every_20_s(tmp_path):
    import datetime as dt

    from labkit.report.cellwatch import CellWatch

    # GIVEN a run whose third cell started at noon, and a fake clock
    executed = _running(tmp_path / "run.ipynb", "2026-12-01T12:00:00+00:00")
    now = [dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)]
    said: list[str] = []
    watch = CellWatch(executed, said.append, now=lambda: now[0])
    # WHEN the heartbeat looks every 10 s for 75 s
    for t in range(0, 80, 10):
        now[0] = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC) + dt.timedelta(seconds=t)
        watch()
    # THEN it named the cell as the source notebook counts it, at 20, 40 and 60 s: never 30 s without a word
    assert said == [f"labkit report: cell 3 of 4 still running after {t}: cmp = labkit.compare(a, b)"
                    for t in ("20 s", "40 s", "1 min 00 s")]
    # AND a cell that has finished, or a notebook mid-write, says nothing
    _running(executed, "2026-12-01T12:00:00+00:00", status="completed")
    watch()
    executed.write_text('{"cells": [')
    watch()
    assert len(said) == 3
    from labkit.report.cellwatch import first_line

    assert first_line({"source": ["import time\n", "# nap\n", "time.sleep(45)\n"]}) == "import time …"
    assert first_line({"source": "# only a comment"}) == "# only a comment" and first_line({"source": ""}) == ""


def test_a_slow_render_says_it_is_still_rendering_and_a_quick_one_says_nothing(monkeypatch):
    import threading

    from labkit import progress
    from labkit.report import pipeline

    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.01)
    said: list[str] = []
    with pipeline._rendering(said.append):
        threading.Event().wait(0.1)          # ten beats, all before the 15 s a render may take in silence
    assert said == []
    monkeypatch.setattr(pipeline, "STILL_S", 0.0)
    heard = threading.Event()
    with pipeline._rendering(lambda line: (said.append(line), heard.set())):
        assert heard.wait(10)
    assert said[0].startswith("labkit report: still rendering the page (") and "SVG" in said[0]


@pytest.mark.slow
def test_labkit_report_names_a_long_cell_on_the_command_line_while_it_runs(tmp_path, capsys, monkeypatch):
    from labkit import progress
    from labkit.cli import main
    from labkit.report import cellwatch

    # GIVEN a notebook whose one cell sleeps, and a watch that speaks after 0.5 s instead of 20
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.1)
    monkeypatch.setattr(cellwatch, "STILL_S", 0.5)
    nb = _notebook(tmp_path / "nap.ipynb", "import time\ntime.sleep(3)")
    # WHEN labkit report runs it with its progress shown
    assert main(["report", str(nb), "--out", str(tmp_path / "nap.html")]) == 0
    # THEN the terminal heard which cell was still running while it ran
    err = capsys.readouterr().err
    assert re.search(r"labkit report: cell 3 of 3 still running after \d s: import time", err), err


# -- the template's report (made once per session in conftest.py) -----------------------------------------------


@pytest.mark.slow
def test_the_template_runs_as_is_and_reports_its_two_experiments(template_report):
    t = template_report
    assert t.made == 0 and t.code == 0 and t.run.status == "complete" and t.html.exists()
    html = t.html.read_text()
    top = html[:html.index("Below: review.ipynb as it ran")]
    assert "Design review" in top and "<code>QUICK</code>" in top
    titles = [c.title for c in concluded_in(t.run.folder)]
    assert titles == ["batched export, customer 4", "batched export under load, customer 4"]
    assert all(c.measured and c.verdict for c in concluded_in(t.run.folder))
    assert html.count('class="marks"') == 3 and external_resources(html) == []
    # a clean page: no progress bar (they went to the terminal) and no absolute path of this machine in it
    assert not re.search(r"\d+%\|", html) and "round/s" not in html, "a progress bar reached the page"
    assert str(Path(t.run.folder).parent.parent) not in html, "an absolute path reached the page"
    # the record's paths are relative to the run's folder: a copied folder finds its own page and notebook
    kept = json.loads((Path(t.run.folder) / "report.json").read_text())
    assert kept["html"] == f"../{t.html.name}" and kept["folder"] == "." and not Path(kept["notebook"]).is_absolute()
    assert ReportRun.find(t.run.folder).html == str(t.html.resolve())
    assert re.search(r"commit <code>[0-9a-f]{4,}</code>", top)


# -- one real run shared by the parameter, baseline and --render tests (a kernel, ~4 s) --------------------------

TYPED = '''
import labkit
assert isinstance(SIZES, tuple), f"SIZES arrived as {type(SIZES).__name__}: {SIZES!r}"
print("SIZES", type(SIZES).__name__, SIZES)
exp = labkit.Experiment.plan("halved", "the candidate does half the work", predicted_ratio=0.5)
exp.conclude(labkit.compare([100.0, 101.0, 99.0] * 10, [50.0, 51.0, 49.0] * 10)).save()
'''


@pytest.fixture(scope="module")
def typed_run(tmp_path_factory):
    """``labkit report typed.ipynb -p SIZES=5,50,500 --quick`` on a notebook with no kernel metadata."""
    import contextlib
    import io

    from labkit.cli import main

    work = tmp_path_factory.mktemp("typed")
    nb = work / "typed.ipynb"
    nbformat.write(new_notebook(cells=[
        new_markdown_cell("# Does halving the work halve the time?"),
        new_code_cell("QUICK = False\nSIZES = (5, 50)\nLABEL = 'x'", metadata={"tags": ["parameters"]}),
        new_code_cell(TYPED)]), nb)                               # no kernelspec, no language_info
    err = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stderr(err):
        mp.chdir(work)
        mp.setenv("PERFLAB_RESULTS", str(work / "results"))
        code = main(["report", str(nb), "-p", "SIZES=5,50,500", "--quick", "--no-progress"])
    folders = sorted((work / "results" / "reports").glob("typed-*/"))
    return SimpleNamespace(code=code, err=err.getvalue(), nb=nb, work=work,
                           run=ReportRun.find(folders[-1]) if folders else None)


def _copy_run(run: ReportRun, where: Path, **changes) -> Path:
    import shutil

    folder = where / f"copy-{len(list(where.glob('copy-*')))}"
    shutil.copytree(run.folder, folder)
    record = json.loads((folder / "report.json").read_text())
    record.update(changes)
    (folder / "report.json").write_text(json.dumps(record))
    return folder


@pytest.mark.slow
def test_a_tuple_parameter_arrives_as_a_tuple_and_the_page_says_where_each_value_came_from(typed_run):
    t = typed_run
    assert t.code == 0, t.err
    out = "".join(o.get("text", "") for c in nbformat.read(t.run.executed, as_version=4).cells
                  for o in c.get("outputs", []))
    assert "SIZES tuple (5, 50, 500)" in out                                  # ran with the default kernel
    assert t.run.sources == {"SIZES": "passed", "QUICK": "--quick"}
    assert t.run.declared == {"QUICK": "False", "SIZES": "(5, 50)", "LABEL": "'x'"}
    html = Path(t.run.html).read_text()
    table = html[html.index("<th>value used</th>"):]
    table = table[:table.index("</table>")]
    rows = re.findall(r"<code>(\w+)</code></td><td><code>([^<]*)</code></td><td>([^<]*)</td>", table)
    assert rows == [("QUICK", "True", "set by --quick"), ("SIZES", "(5, 50, 500)", "passed (-p)"),
                    ("LABEL", "'x'", "the notebook's default")]
    # every package the kernel imported, with its version; labkit's census cell is not on the page
    import numpy

    imported = json.loads((Path(t.run.folder) / "imported.json").read_text())["packages"]
    assert imported["numpy"] == numpy.__version__ and "ipykernel" in imported
    assert f"numpy {numpy.__version__}" in html[html.index("every package the run imported"):]
    assert "_labkit_imported" not in html


@pytest.mark.slow
def test_a_baseline_of_another_notebook_a_failed_run_or_other_parameters_is_refused(typed_run, tmp_path, capsys,
                                                                                    monkeypatch):
    from labkit.cli import main

    t = typed_run
    monkeypatch.chdir(t.work)
    monkeypatch.setenv("PERFLAB_RESULTS", str(t.work / "results"))
    monkeypatch.setattr("labkit.report.pipeline.execute", lambda *a, **k: pytest.fail("the notebook ran"))
    failed = _copy_run(t.run, tmp_path, status="failed", error="cell 3 of typed.ipynb raised KeyError: 'x'")
    other = _copy_run(t.run, tmp_path, notebook=str(tmp_path / "other.ipynb"))
    cases = [(failed, [], "is a failed run (cell 3 of typed.ipynb raised KeyError"),
             (other, [], "is a run of other.ipynb, not of typed.ipynb"),
             (t.run.folder, ["-p", "SIZES=5,50"], "ran with other parameters (SIZES = [5, 50] now, [5, 50, 500] then)"),
             (t.run.folder, ["-p", "SIZES=5,50,500"], "ran with other parameters (QUICK = False now, True then)")]
    for base, extra, says in cases:
        assert main(["report", str(t.nb), "--quick" if "QUICK" not in says else "--no-progress", *extra,
                     "--baseline", str(base)]) == 2, says
        assert says in capsys.readouterr().err
    # the API says the same, with the error class the CLI maps to exit 2
    from labkit.errors import BaselineError

    with pytest.raises(BaselineError, match="is a failed run"):
        build(t.nb, {"SIZES": [5, 50, 500]}, quick=True, baseline=failed)


@pytest.mark.slow
def test_render_rebuilds_a_finished_runs_page_without_running_it_and_compares_anyway_when_asked(typed_run, tmp_path,
                                                                                               capsys, monkeypatch):
    from labkit.cli import main
    from labkit.report.pipeline import rerender

    t = typed_run
    monkeypatch.setattr("papermill.execute_notebook", lambda *a, **k: pytest.fail("the notebook ran"))
    executed = t.run.executed.read_bytes()
    assert main(["report", "--render", t.run.folder]) == 0
    assert "wrote " + t.run.html in capsys.readouterr().out
    assert t.run.executed.read_bytes() == executed
    other = _copy_run(t.run, tmp_path, parameters={"SIZES": [5, 50]}, notebook=str(tmp_path / "other.ipynb"))
    assert main(["report", "--render", t.run.folder, "--baseline", str(other)]) == 2
    assert "is a run of other.ipynb" in capsys.readouterr().err
    assert main(["report", "--render", t.run.folder, "--baseline", str(other), "--compare-anyway",
                 "--out", str(tmp_path / "anyway.html")]) == 0
    html = (tmp_path / "anyway.html").read_text()
    banner = html[html.index("Against the baseline"):]
    assert "Compared anyway, though the runs differ" in banner
    assert "the baseline is a run of other.ipynb, this one of typed.ipynb" in banner
    assert "parameter SIZES: [5, 50, 500] now, [5, 50] in the baseline" in banner and "1 unchanged" in banner
    run, rendered = rerender(t.run.folder, baseline=t.run.folder)
    assert [c.status for c in rendered.changes] == ["unchanged"] and run.status == "complete"
    with pytest.raises(BadInputError, match="pass no notebook"):
        from labkit.cli.report import main as report_main
        report_main(["--render", t.run.folder, str(t.nb)])


@pytest.mark.slow
def test_a_moved_run_folder_renders_inside_itself_and_out_is_for_this_time_only(typed_run, tmp_path, monkeypatch):
    import os
    import shutil
    import stat

    from labkit.report.pipeline import rerender

    t = typed_run
    monkeypatch.setattr("papermill.execute_notebook", lambda *a, **k: pytest.fail("the notebook ran"))
    # GIVEN a copy of the run's folder somewhere else (a reviewer's download), under a shared host's umask
    moved = tmp_path / "elsewhere" / Path(t.run.folder).name
    shutil.copytree(t.run.folder, moved)
    original = Path(t.run.html).stat().st_mtime_ns
    old = os.umask(0o022)
    try:
        # WHEN it is rendered with --out, then again without
        run, _ = rerender(moved, out=tmp_path / "once.html")
        assert (tmp_path / "once.html").is_file()
        again, _ = rerender(moved)
    finally:
        os.umask(old)
    # THEN --out wrote that file that time only; the plain render writes the copy's own page, beside the copy
    page = moved.parent / f"{moved.name}.html"
    assert page.is_file() and again.html == str(page.resolve())
    assert Path(t.run.html).stat().st_mtime_ns == original   # the original run's page was not touched
    kept = json.loads((moved / "report.json").read_text())
    assert kept["html"] == f"../{moved.name}.html" and kept["folder"] == "."
    # AND the page and the record are readable by others, as the umask says (not mkstemp's 0600)
    for f in (page, moved / "report.json", tmp_path / "once.html"):
        assert stat.S_IMODE(f.stat().st_mode) == 0o644, f


@pytest.mark.slow
def test_progress_bars_reach_the_terminal_and_never_the_page_and_a_save_shows_a_short_name(tmp_path, monkeypatch):
    import subprocess
    import sys

    # GIVEN a review whose cells compare (a bar) and end in .save(), run the way a user runs it: progress on
    nb = tmp_path / "bars.ipynb"
    nbformat.write(new_notebook(cells=[
        new_markdown_cell("# Is the sorted copy faster?"),
        new_code_cell("QUICK = False", metadata={"tags": ["parameters"]}),
        new_code_cell("import labkit\nc = labkit.compare(lambda: sorted(range(3000)), lambda: list(range(3000)), "
                      "rounds=8, max_time=2)\nc"),
        new_code_cell("exp = labkit.Experiment.plan('copy', 'a list copy skips the comparisons sorting makes, "
                      "so it should be several times faster', predicted_ratio=0.3)\nexp.conclude(c)\nexp.save()")],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}), nb)
    env = {**__import__("os").environ, "PERFLAB_RESULTS": str(tmp_path / "results")}
    done = subprocess.run([sys.executable, "-m", "labkit", "report", str(nb)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    # THEN the bar was drawn on the terminal (the command's stderr) …
    assert "A/B rounds" in done.stderr
    # … and is nowhere in the executed notebook or the page, and the saved record shows by its short name
    run = ReportRun.find(next((tmp_path / "results" / "reports").glob("bars-*/")))
    outputs = json.dumps([c.get("outputs", []) for c in json.loads(run.executed.read_text())["cells"]])
    html = Path(run.html).read_text()
    for where, text in (("the executed notebook", outputs), ("the page", html)):
        assert "A/B rounds" not in text and "round/s" not in text, f"a progress bar reached {where}"
        assert str(tmp_path) not in text, f"an absolute path reached {where}"
    assert "saved results/reports/bars-" in outputs and "copy.json" in outputs
    assert not list(Path(run.folder).glob(".progress*"))


@pytest.mark.slow
def test_a_baseline_that_differs_only_in_a_declared_time_budget_is_compared_without_compare_anyway(typed_run,
                                                                                                    tmp_path):
    from labkit.errors import BaselineError
    from labkit.report.params import budget_parameters
    from labkit.report.pipeline import check_baseline

    t = typed_run
    # GIVEN a notebook that declares MAX_TIME a budget (its comment starts "budget") and ROUNDS not
    nb = tmp_path / "typed.ipynb"
    nbformat.write(new_notebook(cells=[new_code_cell(
        "QUICK = False\nSIZES = (5, 50)\nLABEL = 'x'\nMAX_TIME = 3.0   # budget: seconds a comparison may take\n"
        "ROUNDS = 10   # rounds per comparison", metadata={"tags": ["parameters"]})]), nb)
    assert budget_parameters(nb) == {"MAX_TIME"}
    declared = {"QUICK": "False", "SIZES": "(5, 50)", "LABEL": "'x'", "MAX_TIME": "3.0", "ROUNDS": "10"}
    then = {"SIZES": [5, 50, 500], "QUICK": True}
    base = _copy_run(t.run, tmp_path, parameters={**then, "MAX_TIME": 6.0}, declared=declared)
    now = {"QUICK": True, "SIZES": [5, 50, 500], "LABEL": "x", "MAX_TIME": 3.0, "ROUNDS": 10}
    # WHEN only the budget differs THEN the baseline stands, and the page says the budgets differ, neutrally
    assert check_baseline(base, nb, now, declared=declared) == base.resolve()
    # AND a parameter that changes what is measured is still refused
    other = _copy_run(t.run, tmp_path, parameters={**then, "ROUNDS": 20}, declared=declared)
    with pytest.raises(BaselineError, match="ROUNDS = 10 now, 20 then"):
        check_baseline(other, nb, now, declared=declared)


@pytest.mark.slow
def test_repeat_runs_in_fresh_kernels_and_the_decision_says_in_how_many_the_verdict_held(tmp_path, monkeypatch):
    # GIVEN a notebook whose experiment concludes the same way every run
    nb = tmp_path / "rep.ipynb"
    nbformat.write(new_notebook(cells=[
        new_markdown_cell("# Does the copy beat the sort?"),
        new_code_cell("QUICK = False", metadata={"tags": ["parameters"]}),
        new_code_cell("import labkit\nc = labkit.compare([100.0, 101.0, 99.0] * 10, [50.0, 51.0, 49.0] * 10)\n"
                      "labkit.Experiment.plan('halved', 'half the work should take half the time, measured twice',"
                      " predicted_ratio=0.5).conclude(c).save()")]), nb)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PERFLAB_RESULTS", str(tmp_path / "results"))
    # WHEN it is reported with --repeat 2
    run, rendered = build(nb, {}, repeat=2, progress=False, say=lambda line: None)
    # THEN two runs were made, the page's run names the other, and the decision says the verdict held in both
    assert len(run.replicates) == 1 and Path(run.replicates[0]).is_dir() and run.replicates[0] != run.folder
    top = rendered.html[:rendered.html.index("What would change it")]
    assert "held in 2 of 2 runs (fresh kernels)" in top and "1 of 1 other runs inside this run" in top
    assert json.loads((Path(run.folder) / "report.json").read_text())["replicates"][0].startswith("../")
    with pytest.raises(BadInputError, match="1 to 20 times"):
        build(nb, {}, repeat=0)


# -- the template for reviewing your own functions ---------------------------------------------------------------


def test_new_review_kind_function_copies_the_function_template_and_an_unknown_kind_is_refused(tmp_path, capsys,
                                                                                               monkeypatch):
    from labkit.cli import main
    from labkit.report.review import TEMPLATES

    monkeypatch.chdir(tmp_path)
    assert main(["new-review", "parsers", "--kind", "function"]) == 0
    assert "on two example CSV parsers" in capsys.readouterr().out
    assert (tmp_path / "parsers.ipynb").read_bytes() == TEMPLATES["function"].read_bytes()
    assert new_review("shop", tmp_path).read_bytes() == TEMPLATE.read_bytes()       # the default stays toyshop
    with pytest.raises(BadInputError, match="the review templates are toyshop, function"):
        new_review("x", tmp_path, kind="service")
    nb = nbformat.read(TEMPLATES["function"], as_version=4)
    nbformat.validate(nb)
    assert not [c for c in nb.cells if c.cell_type == "code" and (c.outputs or c.execution_count)]
    text = "\n".join(c.source for c in nb.cells)
    for part in ("**Question.**", "make_input", "Experiment.plan", "sweep_sizes", "labkit.compare", "gc=",
                 "rss_peak", "## What would change my mind", "processes=True", ".verdict(\"allocations\")",
                 "for n in SIZES", "# budget:"):
        assert part in text, part


@pytest.mark.slow
def test_the_function_template_runs_as_is_and_its_page_leads_with_the_decision(tmp_path, capsys, monkeypatch):
    from labkit.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["new-review", "parsers", "--kind", "function"]) == 0
    assert main(["report", "parsers.ipynb", "--quick", "--no-progress"]) == 0, capsys.readouterr().err
    [folder] = (tmp_path / "results" / "reports").glob("parsers-*/")
    run = ReportRun.find(folder)
    # the review's three experiments: in this kernel, in fresh processes, and on memory — each concluded
    found = {c.title: c for c in concluded_in(folder)}
    assert set(found) == {"split instead of csv.reader, 5,000 rows", "split instead of csv.reader, 5,000 rows, "
                          "fresh processes", "split instead of csv.reader, 5,000 rows, allocations"}
    assert all(c.measured for c in found.values())
    assert found["split instead of csv.reader, 5,000 rows, allocations"].verdict in ("less", "more", "same",
                                                                                      "inconclusive")
    html = Path(run.html).read_text()
    decision = html[html.index("<h2>Decision</h2>"):html.index("<h2>Experiments")]
    assert "Should it" in decision and "split instead of csv.reader, 5,000 rows" in decision
    assert "not measured" not in decision
    assert "quoted fields" in decision and external_resources(html) == []


def test_a_refused_parameter_suggests_a_value_the_shell_passes_as_it_is(tmp_path):
    import shlex

    from labkit.report.params import parse_parameters, suggest, typed_parameters

    nb = tmp_path / "p.ipynb"
    nbformat.write(new_notebook(cells=[new_code_cell("SIZES = (10, 100, 1000)\nNAME = 'a b'\nRATE = 2.5",
                                                     metadata={"tags": ["parameters"]})]), nb)
    with pytest.raises(BadInputError, match=r"pass e\.g\. -p SIZES=10,100,1000$"):
        typed_parameters(nb, parse_parameters(["SIZES=ten,100"]), raw={"SIZES": "ten,100"})
    # every suggestion survives a shell's word splitting and reads back as the default's value
    for name, default in (("SIZES", (10, 100, 1000)), ("NAME", "a b"), ("RATE", 2.5)):
        words = shlex.split(suggest(name, default))
        assert words[0] == "-p" and len(words) == 2
        back = typed_parameters(nb, parse_parameters([words[1]]), raw={name: words[1].partition("=")[2]})
        assert back[name] == default, (name, words)


def test_the_decision_says_under_each_answer_what_qualifies_it():
    from labkit.report.baseline import Concluded
    from labkit.report.summary import decision_block

    record = {"title": "orjson", "hypothesis": "h", "predicted_ratio": 0.2, "measured_ratio": 0.3, "verdict": "faster",
              "outcome": "confirmed", "measurements": [{"kind": "comparison", "ratio": 0.3, "ci": [0.28, 0.33],
                                                          "warnings": ["max_time=1 s ran out after 27 of the 37 rounds"]}]}
    quiet = {**record, "title": "quiet", "measurements": [{**record["measurements"][0], "warnings": []}]}
    html = decision_block("<p>q</p>", [Concluded.of(record), Concluded.of(quiet)], None)
    first, second = html.split("<b>quiet</b>")
    assert "trust it with care" in first and "max_time=1 s ran out after 27 of the 37 rounds" in first
    assert "trust it with care" not in second
