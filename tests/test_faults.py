"""Faults with clear errors and nothing lost: a port taken, a results folder that cannot be written."""

from __future__ import annotations

import json
import os
import socket

import pytest

from labkit.errors import ResultsError
from labkit.results import write_json_atomic


@pytest.fixture
def taken_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


@pytest.mark.parametrize("flag", ["--port", "--catalog-port"])
def test_labkit_serve_names_the_taken_port_and_how_to_choose_another(taken_port, flag, capsys):
    from labkit.cli.serve import main

    other = ["--catalog-port", "0"] if flag == "--port" else ["--port", "0"]
    assert main([flag, str(taken_port), *other]) == 2
    err = capsys.readouterr().err
    assert f"port {taken_port} on 127.0.0.1 is taken by another process" in err
    assert f"labkit serve {flag} {taken_port + 1} (or {flag} 0 for any free port)" in err


def test_an_unwritable_results_folder_names_the_folder(tmp_path):
    blocker = tmp_path / "results"
    blocker.write_text("a file where the folder should be")  # root ignores permissions; this it cannot ignore
    with pytest.raises(ResultsError, match=f"cannot write results to {blocker}.*PERFLAB_RESULTS"):
        write_json_atomic(blocker / "run.json", {"kind": "bench"})


def test_a_write_that_fails_midway_leaves_the_old_record_and_no_partial_file(tmp_path, monkeypatch):
    # GIVEN a record already saved
    target = write_json_atomic(tmp_path / "run.json", {"kind": "bench", "version": 1})

    def full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)  # WHEN the disk fills while the new version is written
    with pytest.raises(ResultsError, match=f"writing {target} failed: No space left on device"):
        write_json_atomic(target, {"kind": "bench", "version": 2, "samples": list(range(10_000))})
    # THEN the old record is whole and no temporary file is left behind
    assert json.loads(target.read_text()) == {"kind": "bench", "version": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]


def test_an_interrupted_write_leaves_no_half_written_file(tmp_path, monkeypatch):
    import labkit.results

    def half_then_ctrl_c(data, f, **kwargs):
        f.write('{"kind": "ben')
        raise KeyboardInterrupt  # Ctrl-C in the middle of the write

    monkeypatch.setattr(labkit.results.json, "dump", half_then_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        write_json_atomic(tmp_path / "run.json", {"kind": "bench"})
    assert list(tmp_path.iterdir()) == []
