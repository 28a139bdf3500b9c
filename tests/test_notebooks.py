"""Every notebook runs top to bottom with ``QUICK = True`` (papermill), within its time budget, and is committed clean.

The budget (tests/README.md): each lab's QUICK run ≤ 90 s on a 2-core machine, each lab executed at most twice
per suite run, the whole suite ≤ 10 minutes (docs/labs.md). The run is made once per session by ``notebook_runs``
(conftest.py) and shared: this module checks it and renders its report from it (``labkit report``, issue 16),
test_browser.py opens it in JupyterLab — neither executes the lab again. A notebook not registered in BUDGET_S
fails the suite — every lab must be tested. The slowest runs are printed at the end of the session (see
conftest.py), with any over budget marked; a test never fails on speed.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from labkit.labs import QUICK_BUDGET_S

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

#: seconds each notebook's QUICK run may take on a 2-core machine, declared once (doctor reads it too)
BUDGET_S = QUICK_BUDGET_S


def ids(paths):
    return [p.name for p in paths]


def _has_parameters(nb: dict) -> bool:
    return any("parameters" in c.get("metadata", {}).get("tags", []) for c in nb["cells"] if c["cell_type"] == "code")


def test_every_notebook_has_a_budget_and_a_quick_knob():
    missing = [p.name for p in NOTEBOOKS if p.name not in BUDGET_S]
    assert not missing, f"register {missing} in QUICK_BUDGET_S in labkit/labs.py (its QUICK run's time budget)"
    for p in NOTEBOOKS:
        nb = json.loads(p.read_text())
        params = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
        if any(c["cell_type"] == "code" for c in nb["cells"]):
            assert params and "QUICK = False" in "".join(params[0]["source"]), \
                f"{p.name}: its parameters cell must set QUICK = False (the one knob every lab has)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_notebook_is_committed_clean(path):
    nb = json.loads(path.read_text())
    dirty = [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code" and (c.get("outputs") or c.get("execution_count"))]
    assert not dirty, f"{path.name}: cells {dirty} carry outputs; strip them (Edit → Clear Outputs of All Cells)"
    if any(c["cell_type"] == "code" for c in nb["cells"]):
        assert _has_parameters(nb), f"{path.name} needs a code cell tagged 'parameters'"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_notebook_runs_top_to_bottom(path, notebook_runs, request):
    run = notebook_runs.get(path)  # papermill, QUICK = True: this session's one run of it (conftest.py)
    request.node.user_properties.append(("perflab_notebook_time", (path.name, run.secs, BUDGET_S[path.name])))
    run.check()
    nb = json.loads(run.executed.read_text())
    cells = [c for c in nb["cells"] if c["cell_type"] == "code"]
    # charts must use an offline renderer: never the bare Vega-Lite mimetype (JupyterLab 4 cannot draw v6)
    mimes = {m for c in cells for o in c.get("outputs", []) for m in o.get("data", {})}
    assert not any(m.startswith("application/vnd.vegalite") for m in mimes), mimes
    assert not [o for c in cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    _assert_reportable(run.executed, run.results, nb)
    _assert_wrong_predictions_refuted(path, run.results)


def _assert_wrong_predictions_refuted(path: Path, results: Path) -> None:
    """The run typed a wrong answer into every guess and plan (tests/typed.py): every record concluded on such a
    prediction says refuted, with the range it was judged by — never confirmed, never a silent inconclusive."""
    from typed import WRONG_RATIO

    from labkit.learner.record import Experiment

    records = [Experiment.load(f) for f in sorted(results.glob("*.json"))
               if json.loads(f.read_text()).get("kind") == Experiment.KIND]
    judged = [r for r in records if r.predicted_ratio == WRONG_RATIO and r.outcome is not None]
    assert all(r.outcome == "refuted" and r.judgement.startswith("refuted") for r in judged), \
        [(r.title, r.predicted_ratio, r.measured_ci, r.judgement) for r in judged if r.outcome != "refuted"]
    # lab 01's plan takes its ratio from two typed times (1.0 here, not WRONG_RATIO): refuted too, checked here
    if path.name == "01_latency_numbers.ipynb":
        mine = [r for r in records if r.title.endswith("(mine)") and r.outcome is not None]
        assert mine and all(r.outcome == "refuted" for r in mine), [(r.title, r.judgement) for r in mine]
    # the index plans nothing
    if path.name not in ("01_latency_numbers.ipynb", "index.ipynb"):
        assert judged, f"{path.name}: no plan typed with predicted_ratio={WRONG_RATIO} was concluded and saved"


@pytest.mark.slow
def test_a_lab_as_committed_runs_with_every_guess_skipped(notebook_runs):
    """The suite's runs type wrong answers in; lab 00 also runs as committed — Run All with nothing written —
    where every guess is reported skipped and no plan is saved with its template's TODO."""
    run = notebook_runs.get(ROOT / "notebooks" / "00_method.ipynb", typed=False).check()
    nb = json.loads(run.executed.read_text())
    outputs = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "".join("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert "PREDICTIONS SKIPPED" in text or "skipped" in text


def _assert_reportable(executed: Path, results: Path, nb: dict) -> None:
    """The lab's report (issue 16), built from this run — no second execution: every chart drawn as SVG, every
    experiment record in the table, the first cell on top as the question, nothing fetched from outside."""
    from labkit.report import render, write_html
    from labkit.report.static import WIDGET_VIEW, external_resources

    rendered = render(executed, results=results)
    write_html(executed.with_suffix(".html"), rendered.html)
    state = nb["metadata"].get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    charts = [o for c in nb["cells"] for o in c.get("outputs", []) if WIDGET_VIEW in o.get("data", {})
              and state.get(o["data"][WIDGET_VIEW]["model_id"], {}).get("state", {}).get("_anywidget_id", "")
              .endswith("JupyterChart")]
    assert rendered.counts["charts"] >= len(charts) and rendered.html.count('class="marks"') >= len(charts)
    # the notebook file itself shows every chart where its widget cannot load (GitHub, VS Code): its picture
    unseen = ["".join(o["data"]["text/plain"])[:60] for o in charts
              if "<svg" not in "".join(o["data"].get("image/svg+xml", ""))]  # stored as a list of lines
    assert not unseen, f"charts saved with no picture beside their widget: {unseen}"
    records = sorted(p.name for p in results.glob("*.json") if '"kind": "experiment"' in p.read_text())
    assert sorted(Path(e.path).name for e in rendered.experiments) == records
    top = html.unescape(re.sub(r"<[^>]+>", "", rendered.html.split("as it ran, every output kept", 1)[0]))
    assert "".join(nb["cells"][0]["source"]).splitlines()[0].lstrip("# ") in top
    assert external_resources(rendered.html) == []
