"""labkit room collect: learners' records on one offline page; bad and foreign files named and skipped."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os

import pytest

from labkit import Comparison, cli
from labkit.cli import room as room_cli
from labkit.learner.record import Experiment
from labkit.report.static import external_resources
from labkit.workshop import room

QUIET = {"load_average": [0.2, 0.2, 0.2], "cores_usable": 2, "cpu_throttled_us": 1000}


def _record(folder, title, ratio, ci, verdict="faster", plan_fp=QUIET, measure_fp=QUIET, predicted=0.5):
    exp = Experiment.plan(title, "the batched query removes 200 round trips, so about half the time",
                          predicted_ratio=predicted)
    exp = dataclasses.replace(exp, fingerprint=plan_fp)
    cmp = Comparison("naive", "batched", (1.0, 1.1), (0.5, 0.55), ratio, ci, 0.001, verdict, True,
                     fingerprint=measure_fp)
    exp = exp.conclude(cmp)
    exp = dataclasses.replace(exp, measurements=({**exp.measurements[-1], "fingerprint": measure_fp},))
    return exp.save(folder)


@pytest.fixture
def home(tmp_path):
    """GIVEN a hub's /home: ada quiet, bob busy, cy throttled and noisy, plus bad files."""
    h = tmp_path / "home"
    _record(h / "ada" / "results", "batched export", 0.48, (0.46, 0.50))
    _record(h / "bob" / "results", "batched export", 0.8, (0.72, 0.88),
            plan_fp={"load_average": [3.5, 3, 3], "cores_usable": 2})
    _record(h / "cy" / "results", "batched export", 0.9, (0.5, 1.4), verdict="inconclusive",
            measure_fp={**QUIET, "cpu_throttled_us": 251_000, "cpu_quota_cores": 0.5})
    _record(h / "ada" / "results", "orjson", 0.3, (0.29, 0.31), predicted=0.7)
    Experiment.plan("planned only", "nothing measured yet but a hypothesis").save(h / "bob" / "results")
    bad = h / "bob" / "results"
    (bad / "truncated.json").write_text('{"kind": "experiment", "title": ')
    (bad / "foreign.json").write_text(json.dumps({"kind": "comparison", "version": 2}))
    (bad / "package.json").write_text(json.dumps({"name": "x"}))
    (bad / "list.json").write_text("[1, 2]")
    (bad / "damaged.json").write_text(json.dumps({"kind": "experiment", "version": 1, "title": "x"}))
    (bad / "binary.json").write_bytes(b"\xff\xfe\x00garbage")
    os.symlink(bad / "nowhere.json", bad / "dangling.json")
    (h / "ada" / ".ipynb_checkpoints").mkdir()
    (h / "ada" / ".ipynb_checkpoints" / "hidden.json").write_text("not looked at")
    (h / "ada" / "perflab").mkdir()
    (h / "ada" / "perflab" / ".perflab-handout.json").write_text('{"files": {}}')  # the labs' handout manifest
    return h


def test_collect_reads_every_record_and_names_every_skipped_file(home):
    r = room.collect(home)
    assert sorted((e.learner, e.title) for e in r.entries) == [
        ("ada", "batched export"), ("ada", "orjson"), ("bob", "batched export"), ("bob", "planned only"),
        ("cy", "batched export")]
    skipped = {os.path.basename(p): why for p, why in r.skipped}
    assert set(skipped) == {"truncated.json", "foreign.json", "package.json", "list.json", "damaged.json",
                            "binary.json", "dangling.json"}
    assert "'comparison' result, not an experiment record" in skipped["foreign.json"]
    assert "without a 'kind'" in skipped["package.json"]
    assert "damaged experiment" in skipped["damaged.json"]


def test_noise_is_read_from_fingerprints_and_spread(home):
    noise = {(e.learner, e.title): (e.noise, e.why) for e in room.collect(home).entries}
    assert noise[("ada", "batched export")][0] == "quiet"
    assert noise[("bob", "batched export")] == ("busy", "load 1.75 per core before measuring")
    kind, why = noise[("cy", "batched export")]
    assert kind == "throttled" and "throttled 250 ms" in why and "quota 0.5 cores" in why
    assert "verdict inconclusive" in why
    assert noise[("bob", "planned only")][0] == "not measured"


def test_the_page_is_offline_and_shows_the_room(home, tmp_path):
    out = tmp_path / "room.html"
    assert cli.main(["room", "collect", str(home), "--out", str(out)]) == 0
    html = out.read_text()
    # the ratios, the noise map, and a forest plot for the experiment measured on more than one machine
    assert html.count("<svg") == 3 and not external_resources(html)
    assert "Did it hold across the room?" in html and "batched export: pooled ratio" in html
    assert "5 experiment record(s) from 3 learner(s); 7 file(s) skipped" in html
    assert "dangling.json" in html and "orjson" in html and "throttled" in html


def test_the_cli_names_skipped_files_on_the_terminal(home, tmp_path, capsys):
    assert room_cli.main(["collect", str(home), "--out", str(tmp_path / "r.html")]) == 0
    out = capsys.readouterr().out
    assert "skipped " in out and "truncated.json" in out and "5 record(s) and 0 grading(s) from 3 learner(s), 7 file(s) skipped" in out


def test_handed_in_files_in_one_folder_belong_to_its_name(tmp_path):
    _record(tmp_path / "ada-handin", "batched export", 0.5, (0.45, 0.55))
    assert [e.learner for e in room.collect(tmp_path / "ada-handin").entries] == ["ada-handin"]


def test_an_empty_room_still_writes_a_page(tmp_path):
    html = room.render(room.collect(tmp_path))
    assert "0 experiment record(s)" in html and "No measured experiments yet" in html


def test_a_missing_folder_is_an_error_that_says_what_to_pass(tmp_path):
    assert cli.main(["room", "collect", str(tmp_path / "nope")]) == 1


def test_to_frame_has_a_row_per_record(home):
    assert len(room.collect(home).to_frame()) == 5


def test_a_busy_hub_node_is_not_a_busy_learner_by_itself(tmp_path):
    # the load average is the node's: 10 runnable tasks on 64 cores is a quiet node, whatever the learner's 2 cores
    node = {"load_average": [10.0, 10, 10], "cores_logical": 64, "cores_usable": 2}
    _record(tmp_path / "ada", "batched export", 0.5, (0.48, 0.52), plan_fp=node, measure_fp=node)
    assert [e.noise for e in room.collect(tmp_path).entries] == ["quiet"]


def test_a_folder_that_cannot_be_listed_is_named(tmp_path, monkeypatch):
    _record(tmp_path / "ada", "batched export", 0.5, (0.48, 0.52))
    real = os.walk

    def walk(top, onerror=None, **kw):
        onerror(PermissionError(13, "Permission denied", str(tmp_path / "bob")))
        yield from real(top, onerror=onerror, **kw)

    monkeypatch.setattr(room.os, "walk", walk)
    r = room.collect(tmp_path)
    assert [e.learner for e in r.entries] == ["ada"]
    assert r.skipped == ((str(tmp_path / "bob"), "folder not readable (Permission denied): its records were not read"),)


def _graded(home, learner, fix, experiment=True):
    """A real grading of lab 00's exercise, recorded where the learner's results go."""
    import pytest as _pytest

    from labkit.exercises import lab00

    with _pytest.MonkeyPatch.context() as mp:
        mp.setenv("PERFLAB_RESULTS", str(home / learner / "results"))
        plan = Experiment.plan("dict keeps order", "dict.fromkeys is one hash insert per item instead of a list "
                               "scan, so it should be far faster", predicted_ratio=0.05) if experiment else None
        return lab00.check(fix, plan, rounds=6, save=False)


def _fast(items):
    return list(dict.fromkeys(items))


def _also_fast(values):
    # the same fix, laid out and named otherwise
    return list(
        dict.fromkeys(values))


def _slow(items):
    seen = []
    for item in items:
        if item not in seen:
            seen.append(item)
    return seen


@pytest.mark.slow
def test_gradings_become_a_grid_a_gradebook_and_a_gallery_anonymous_by_default(tmp_path):
    from labkit.workshop.gradebook import COLUMNS, anonymous, gallery, gradebook_csv, grid

    home = tmp_path / "home"
    assert _graded(home, "ada_l", _slow).passed is False       # ada first fails on speed …
    assert _graded(home, "ada_l", _fast).passed                  # … then passes: the latest shows, 2 attempts
    assert _graded(home, "bob_r", _also_fast).passed
    assert not _graded(home, "cy_m", _fast, experiment=False).passed  # no prediction: fails at the prediction
    (home / "dan_w" / "results" / "gradings").mkdir(parents=True)
    (home / "dan_w" / "results" / "gradings" / "half.json").write_text('{"kind": "grading", "version": 1, "lab"')
    r = room.collect(home)
    assert len(r.gradings) == 4 and any("half.json" in p for p, _ in r.skipped)  # a half-written record is named
    # THEN the grid: passed (after 2 attempts), failed at the prediction item, not tried for dan
    html = grid(r)
    assert "2 attempts, the latest shown" in html and "failed at item 2 (prediction): no experiment planned" in html
    assert "ada_l" not in html and anonymous("ada_l") in html and anonymous("ada_l") != anonymous("bob_r")
    assert "ada_l" in grid(r, names=True)
    # AND the gradebook has the documented columns, one row per learner and exercise
    rows = list(csv.reader(io.StringIO(gradebook_csv(r))))
    assert tuple(rows[0]) == COLUMNS and len(rows) == 4
    by = {row[0]: row for row in rows[1:]}
    assert by[anonymous("ada_l")][3] == "yes" and by[anonymous("ada_l")][8] == "2"
    assert by[anonymous("cy_m")][3] == "no" and by[anonymous("cy_m")][5] == "prediction"
    # AND the gallery shows the passing fixes once each, without names or paths
    page = gallery(r)
    assert page.count("<pre>") == 1 and "2 learners wrote this fix" in page and "× faster" in page
    assert "ada_l" not in page and str(tmp_path) not in page
    # AND the room page is anonymous and shows no home path
    full = room.render(r)
    assert str(tmp_path) not in full and "Who passed which exercise" in full and "ada_l" not in full


def test_a_room_measuring_at_once_on_pinned_cores_is_not_busy_but_a_neighbour_on_ones_core_is(tmp_path):
    # GIVEN two learners pinned to one core each of a 2-core node, measuring at the same time (the walk's room)
    room_load = {"load_average": [2.2, 1, 1], "cores_logical": 2, "cores_usable": 1}
    planned = {"load_average": [1.1, 1, 1], "cores_logical": 2, "cores_usable": 1}
    _record(tmp_path / "ada", "batched export", 0.5, (0.48, 0.52), plan_fp=planned, measure_fp=room_load)
    # AND one whose core also ran a third busy process
    crowded = {"load_average": [3.2, 1, 1], "cores_logical": 2, "cores_usable": 1}
    _record(tmp_path / "bob", "batched export", 0.5, (0.48, 0.52), plan_fp=planned, measure_fp=crowded)
    noise = {e.learner: (e.noise, e.why) for e in room.collect(tmp_path).entries}
    # THEN the room's own work is not "busy"; the load beyond it is
    assert noise["ada"][0] == "quiet"
    assert noise["bob"] == ("busy", "load 1.20 per core besides the measurement")
