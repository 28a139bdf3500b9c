"""Lab 08's tools: one endpoint taken from the baseline through every fix, each step measured and kept.

    from labkit import capstone
    w = capstone.stage_times(shop, "/customers/4/export?preset=baseline", "baseline")  # median Server-Timing stages
    capstone.waterfall_chart([w, w2, ...])         # every step so far laid end to end, one row each
    capstone.payoff_chart(frame)                   # fixes ranked by what they bought, beside what they cost
    capstone.micro_vs_e2e_chart(frame, e2e_ms)     # the sum of micro wins against the end-to-end gain
    capstone.kept_diff(kept_load, new_load)        # the kept baseline beside today's run, percentile by percentile

The service's side — the product cache, the access log, the ``preset`` switch — lives in :mod:`labkit.toyshop`
(``productcache``, ``reqlog``, ``switches``).
"""

from typing import Any

from labkit.capstone.steps import STAGES, StageTimes, disagreement, kept_diff, source_lines, stage_times

__all__ = ["STAGES", "StageTimes", "stage_times", "disagreement", "kept_diff", "source_lines", "waterfall_chart", "payoff_chart",
           "micro_vs_e2e_chart"]

_CHARTS = {"waterfall_chart", "payoff_chart", "micro_vs_e2e_chart"}


def __getattr__(name: str) -> Any:
    # the chart builders need Altair, slow to import: loaded on first use
    if name in _CHARTS:
        from labkit.capstone import render

        return getattr(render, name)
    raise AttributeError(f"module 'labkit.capstone' has no attribute {name!r}")
