"""Published latency tables (Norvig 2001, Dean 2009, the 2012 posting, napkin-math 2026…) beside the measured one.

The references live in ``datasets/latency_reference.csv``: one row per published figure with its
``source``, ``year``, ``operation``, ``value_ns``, the ``probe_key`` of the row it compares with (empty when
nothing here measures it), a ``url`` and a ``note`` on how comparable the two are.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from labkit.latency.ladder import LatencyTable

__all__ = ["REFERENCE_CSV", "REFERENCE_COLUMNS", "references", "side_by_side"]

REFERENCE_CSV = Path(__file__).resolve().parents[2] / "datasets" / "latency_reference.csv"
REFERENCE_COLUMNS = ("source", "year", "operation", "value_ns", "probe_key", "url", "note")


def references(path: str | os.PathLike[str] | None = None) -> Any:
    """The reference table as a DataFrame (columns :data:`REFERENCE_COLUMNS`).

    Raises:
        ResultsError: the CSV is missing or lacks a column, naming the path.
    """
    import pandas as pd

    from labkit.errors import ResultsError

    p = Path(path) if path is not None else REFERENCE_CSV
    try:
        df = pd.read_csv(p, dtype={"probe_key": "string", "url": "string", "note": "string"})
    except FileNotFoundError as e:
        raise ResultsError(f"no reference table at {p}: it ships in the repository's datasets/ folder; "
                           "run from a checkout or pass path=") from e
    missing = [c for c in REFERENCE_COLUMNS if c not in df.columns]
    if missing:
        raise ResultsError(f"{p} lacks column(s) {missing}; expected {', '.join(REFERENCE_COLUMNS)}")
    df["year"] = df["year"].astype("Int64")  # an undated source (a seed article) has none
    return df.fillna({"probe_key": "", "url": "", "note": ""})


def side_by_side(measured: LatencyTable, refs: Any = None) -> Any:
    """Each reference figure next to the matching measured row, with ``ratio = measured / reference``.

    A ratio of 3 means this machine took three times the published figure; 0.1 means it was ten times
    faster. References without a probe, and rows measured as unavailable, are left out.
    """
    import pandas as pd

    refs = references() if refs is None else refs
    by_key = {r.key: r for r in measured.rows if r.available}
    out = []
    for ref in refs.itertuples(index=False):
        row = by_key.get(ref.probe_key)
        if row is None:
            continue
        out.append({"probe_key": ref.probe_key, "measured": row.label, "measured_ns": row.median_ns,
                    "source": ref.source, "year": None if pd.isna(ref.year) else int(ref.year),
                    "reference": ref.operation,
                    "reference_ns": float(ref.value_ns), "ratio": row.median_ns / float(ref.value_ns),
                    "caveat": ref.note})
    return pd.DataFrame(out, columns=["probe_key", "measured", "measured_ns", "source", "year", "reference",
                                      "reference_ns", "ratio", "caveat"])
