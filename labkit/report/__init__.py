"""Reports for design reviews: run a notebook, keep what it measured, write one HTML file that opens offline.

    $ labkit report notebooks/02_nplusone.ipynb --quick            # run, keep, render: prints where it went
    $ labkit report review.ipynb --baseline results/reports/review-20261130-101500/
    $ labkit report --render results/reports/review-20261201-093000/   # a finished run's page again, not rerun
    $ labkit new-review orjson-export                              # a review notebook to start from

From Python, the same steps::

    run, rendered = labkit.report.build("review.ipynb", {"QUICK": True})   # run + render + write
    rendered = labkit.report.render(executed_ipynb, results=folder)       # an already-executed notebook
    run, rendered = labkit.report.rerender(run_folder, baseline=other)    # a finished run's page, again

Executing (:mod:`~labkit.report.run`, papermill) is kept apart from rendering (:mod:`~labkit.report.html`,
nbconvert with widgets made static by :mod:`~labkit.report.static` and the summary of
:mod:`~labkit.report.summary`); :mod:`~labkit.report.baseline` holds the baseline comparison: within-run ratio
intervals, matched by experiment title, never raw samples across runs; :mod:`~labkit.report.params` types
the parameters by the notebook's defaults. What a report costs in time and bytes
is printed by ``tests/benchmarks/bench_report.py``.
"""

from __future__ import annotations

from labkit.report.baseline import Change, Concluded, concluded_in, diff
from labkit.report.html import Rendered, render, write_html
from labkit.report.pipeline import build, rerender
from labkit.report.review import new_review
from labkit.report.run import ReportRun, execute

__all__ = ["Change", "Concluded", "Rendered", "ReportRun", "build", "concluded_in", "diff", "execute",
           "new_review", "render", "rerender", "write_html"]
