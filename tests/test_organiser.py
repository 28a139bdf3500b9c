"""`labkit workshop init | add-learners | check`: the organiser's commands for one node, and the learners' copy of
the labs (notebooks only; a learner's edits are never overwritten)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from labkit.errors import BadInputError, ResultsError
from labkit.workshop import handout, organiser

ROOT = Path(__file__).resolve().parents[1]


def _labs(tmp_path: Path) -> Path:
    nb = tmp_path / "notebooks"
    (nb / "instructor").mkdir(parents=True)
    (nb / "00_method.ipynb").write_text('{"v": 1}')
    (nb / "02_nplusone.ipynb").write_text('{"v": 1}')
    (nb / "instructor" / "02_nplusone.md").write_text("the answers")
    return nb


def test_the_labs_copy_holds_the_notebooks_and_never_the_instructor_notes(tmp_path):
    nb = _labs(tmp_path)
    done = handout.hand_out(nb, tmp_path / "ada" / "perflab")
    assert sorted(p.name for p in (tmp_path / "ada" / "perflab").iterdir()) == [
        ".perflab-handout.json", "00_method.ipynb", "02_nplusone.ipynb"]
    assert done.copied == ["00_method.ipynb", "02_nplusone.ipynb"]
    # the real repository too: every top-level notebook, nothing of instructor/
    assert {p.name for p in handout.lab_files(ROOT / "notebooks")} == {p.name for p in (ROOT / "notebooks").glob("*.ipynb")}


def test_running_again_refreshes_untouched_labs_and_keeps_an_edited_one(tmp_path):
    # GIVEN a learner's copy, one lab of which the learner edited
    nb = _labs(tmp_path)
    copy = tmp_path / "ada" / "perflab"
    handout.hand_out(nb, copy)
    (copy / "02_nplusone.ipynb").write_text('{"v": 1, "mine": "my answer"}')
    # WHEN the labs change upstream and the organiser runs it again
    (nb / "00_method.ipynb").write_text('{"v": 2}')
    (nb / "02_nplusone.ipynb").write_text('{"v": 2}')
    done = handout.hand_out(nb, copy)
    # THEN the untouched lab is the new version, the edited one is kept, the new one written beside it, and said so
    assert json.loads((copy / "00_method.ipynb").read_text()) == {"v": 2}
    assert json.loads((copy / "02_nplusone.ipynb").read_text()) == {"v": 1, "mine": "my answer"}
    assert json.loads((copy / "02_nplusone.new.ipynb").read_text()) == {"v": 2}
    assert done.updated == ["00_method.ipynb"] and done.kept == ["02_nplusone.ipynb"]
    assert "kept the learner's edited 02_nplusone.ipynb; the new version is beside it as 02_nplusone.new.ipynb" \
        in done.lines()
    # AND a third run with nothing new changes nothing the learner wrote
    again = handout.hand_out(nb, copy)
    assert json.loads((copy / "02_nplusone.ipynb").read_text())["mine"] == "my answer" and not again.updated


@pytest.mark.parametrize("name", ["Ada", "1bob", "ada smith", "../root", "", "a" * 40, "cy;rm"])
def test_a_learner_name_that_cannot_be_a_user_name_says_what_can(name):
    with pytest.raises(BadInputError, match="is not a valid user name: use a lower-case letter"):
        organiser.check_name(name)


def test_init_states_the_capacity_and_refuses_a_config_that_fits_nobody(tmp_path):
    # GIVEN a node whose pool is one core
    with pytest.raises(BadInputError, match="fits no learner: 2 core.s. per learner from a pool of 1.*--force"):
        organiser.init(tmp_path, "root", 2, [1])
    assert not (tmp_path / "organiser_config.py").exists()
    # WHEN the organiser picks QUICK's one core per learner
    target, cap = organiser.init(tmp_path, "root", 1, [1], contact="Grace")
    # THEN the config is written and the capacity stated, at full settings and with QUICK
    assert cap.full == 0 and cap.quick == 1
    assert "capacity: 0 learner(s) at once at full settings (2 cores each), 1 with QUICK" in cap.lines()[1]
    text = target.read_text()
    assert text.startswith(organiser.MARK) and "allowed_users" in text and "admin_users = {'root'}" in text
    assert "LabApp.news_url=None" in text and "'Grace'" in text
    compile(text, str(target), "exec")


def test_init_will_not_overwrite_a_config_it_did_not_write(tmp_path):
    (tmp_path / "organiser_config.py").write_text("c = get_config()  # an older perflab's, or the organiser's own\n")
    with pytest.raises(ResultsError, match="was not written by this version of `labkit workshop init`"):
        organiser.init(tmp_path, "root", 1, [1])
    assert "older perflab" in (tmp_path / "organiser_config.py").read_text()


def test_the_organiser_config_loads_in_jupyterhub(tmp_path):
    from traitlets.config.loader import PyFileConfigLoader

    ws = tmp_path / "workshop"
    shutil.copytree(ROOT / "workshop", ws)
    organiser.init(ws, "root", 1, [0, 1])
    (ws / "learners.txt").write_text("ada\nbob\n")
    old = dict(os.environ)
    try:
        cfg = PyFileConfigLoader("organiser_config.py", str(ws)).load_config()
    finally:
        os.environ.clear()
        os.environ.update(old)
    assert cfg.Authenticator.allowed_users == {"ada", "bob"} and cfg.Authenticator.admin_users == {"root"}
    assert cfg.Spawner.cores_per_learner == 1 and cfg.Spawner.cores == [0, 1]
    assert "--LabApp.news_url=None" in cfg.Spawner.args


@pytest.fixture
def system_learner():
    if os.geteuid() != 0 or not shutil.which("useradd"):
        pytest.skip("making system users needs root and useradd")
    name = f"pl{uuid.uuid4().hex[:8]}"
    yield name
    subprocess.run(["userdel", "-r", name], capture_output=True)


def test_add_learners_makes_the_user_and_hands_out_the_labs_owned_by_them(tmp_path, system_learner):
    import pwd

    nb = _labs(tmp_path)
    (tmp_path / "ws").mkdir()
    [(name, password, lines)] = organiser.add_learners([system_learner], tmp_path / "ws", nb)
    pw = pwd.getpwnam(system_learner)
    copy = Path(pw.pw_dir) / "perflab"
    assert name == system_learner and password and lines == ["copied: 00_method.ipynb, 02_nplusone.ipynb"]
    assert (copy / "02_nplusone.ipynb").stat().st_uid == pw.pw_uid and not (copy / "instructor").exists()
    assert (tmp_path / "ws" / "learners.txt").read_text().split() == [system_learner]
    # running again: the user exists (no new password), the labs are up to date
    [(_, again, lines)] = organiser.add_learners([system_learner], tmp_path / "ws", nb)
    assert again is None and lines == ["already up to date"]


def test_check_names_a_learner_who_does_not_exist_and_how_to_add_them():
    with pytest.raises(BadInputError, match="there is no user 'nosuchlearner9' on this node: add them with "
                                            "`labkit workshop add-learners nosuchlearner9`"):
        organiser.check("nosuchlearner9", ROOT)


def test_check_as_a_learner_says_what_to_fix(system_learner, tmp_path):
    from labkit.workshop.sharing import blocked_for_others

    subprocess.run(["useradd", "-m", "-s", "/bin/bash", system_learner], check=True)
    results = organiser.check(system_learner, ROOT)
    assert len(results) == 3 and all(fix for _, _, fix in results)
    blocked = blocked_for_others(Path(sys.executable))
    if blocked:  # this machine's venv is under a home others cannot enter: check must say so, with the fix
        ok, what, fix = results[0]
        assert not ok and blocked in what and "PYTHON=/usr/bin/python3 make setup" in fix
