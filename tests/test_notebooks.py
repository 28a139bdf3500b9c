"""Every notebook runs top to bottom with small parameters, and is committed clean.

The small values are injected papermill-style: a cell right after the one tagged ``parameters``.
A notebook without an entry in SMALL fails the suite — every lab must be tested.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

SMALL: dict[str, dict[str, object]] = {
    "index.ipynb": {},
    "00_method.ipynb": {"N": 2_000, "ROUNDS": 6, "REPEAT": 8, "TAIL_CALLS": 1_000},
    "01_latency_numbers.ipynb": {"QUICK": True, "ROUNDS": 5},
    "02_nplusone.ipynb": {"SMALL": True},
}


def ids(paths):
    return [p.name for p in paths]


def test_every_notebook_has_a_test_entry():
    missing = [p.name for p in NOTEBOOKS if p.name not in SMALL]
    assert not missing, f"add small parameters for {missing} to SMALL in tests/test_notebooks.py"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_notebook_is_committed_clean(path):
    nb = json.loads(path.read_text())
    dirty = [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code" and (c.get("outputs") or c.get("execution_count"))]
    assert not dirty, f"{path.name}: cells {dirty} carry outputs; strip them (Edit → Clear Outputs of All Cells)"
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    if code:
        assert any("parameters" in c.get("metadata", {}).get("tags", []) for c in code), \
            f"{path.name} needs a code cell tagged 'parameters'"


def _inject(nb: nbformat.NotebookNode, params: dict[str, object]) -> None:
    if not params:
        return
    lines = [f"{k} = {v!r}" for k, v in params.items()]
    cell = nbformat.v4.new_code_cell("# injected by tests/test_notebooks.py\n" + "\n".join(lines))
    cell.metadata["tags"] = ["injected-parameters"]
    at = next(i for i, c in enumerate(nb.cells) if "parameters" in c.get("metadata", {}).get("tags", []))
    nb.cells.insert(at + 1, cell)


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_notebook_runs_top_to_bottom(path, tmp_path, monkeypatch):
    nb = nbformat.read(path, as_version=4)
    _inject(nb, SMALL.get(path.name, {}))
    monkeypatch.setenv("PERFLAB_RESULTS", str(tmp_path / "results"))
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    # charts must use an offline renderer: never the bare Vega-Lite mimetype (JupyterLab 4 cannot draw v6)
    mimes = {m for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) for m in o.get("data", {})}
    assert not any(m.startswith("application/vnd.vegalite") for m in mimes), mimes
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    assert os.environ["PERFLAB_RESULTS"].startswith(str(tmp_path))
