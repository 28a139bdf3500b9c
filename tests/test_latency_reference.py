"""The reference CSV keeps its schema and its sources; measured vs reference gives ratio = measured / reference."""

from __future__ import annotations

import pandas as pd
import pytest

import labkit
from labkit.latency import PROBES, REFERENCE_CSV, LatencyTable, Samples, references, side_by_side
from labkit.latency.reference import REFERENCE_COLUMNS


def test_csv_schema():
    raw = pd.read_csv(REFERENCE_CSV)
    assert tuple(raw.columns) == REFERENCE_COLUMNS
    assert (raw["value_ns"] > 0).all()
    assert raw["source"].notna().all() and raw["operation"].notna().all()
    dated = raw["year"].notna()
    assert raw.loc[dated, "year"].between(1990, 2100).all()
    # only the seed articles are undated (docs/references.md: they carry no date), and they say so
    assert raw.loc[~dated, "source"].str.startswith("seed ").all()
    assert raw.loc[~dated, "note"].str.contains("undated").all()


def test_csv_attributes_the_classic_table_to_where_each_row_first_appeared_and_has_a_newer_source():
    df = references()
    # Norvig's essay (2001), Dean's talks (2009), and the widely copied 2012 posting (the SSD rows)
    assert ((df["source"] == "Norvig") & (df["year"] == 2001)).sum() >= 5
    assert ((df["source"] == "Dean") & (df["year"] == 2009)).sum() >= 2
    ssd = df[df["probe_key"] == "disk_random_read_4k"]
    assert (ssd["year"] == 2012).any() and not ((df["source"] == "Dean") & (df["year"] == 2012)).any()
    assert (df.loc[df["source"].str.startswith("napkin-math"), "year"] >= 2020).any()


def test_every_probe_key_names_a_real_row():
    known = {k for keys, _ in PROBES.values() for k in keys}
    used = set(references()["probe_key"]) - {""}
    assert used <= known, used - known


def test_side_by_side_ratio():
    t = LatencyTable(rows=(Samples("mem_l1", "L1", "cpu", (1.0, 1.0, 1.0)),
                           Samples("syscall", "syscall", "os", ())))
    df = side_by_side(t)
    norvig = df[(df["probe_key"] == "mem_l1") & (df["source"] == "Norvig")].iloc[0]
    assert norvig["reference_ns"] == 0.5 and norvig["ratio"] == pytest.approx(2.0)
    assert "syscall" not in set(df["probe_key"])  # unavailable rows are left out, not compared as NaN


def test_missing_csv_names_the_path(tmp_path):
    from labkit.errors import ResultsError

    with pytest.raises(ResultsError, match="nope.csv"):
        references(tmp_path / "nope.csv")


def test_ladder_chart_builds_with_references():

    t = LatencyTable(rows=(Samples("mem_l1", "L1", "cpu", (2.0, 2.1)),
                           Samples("mem_dram", "DRAM", "cpu", (150.0, 160.0))))
    spec = labkit.latency.ladder_chart(t, references()).to_dict()
    assert spec["layer"][1]["encoding"]["x"]["scale"]["domain"] == [1, 1e9]
