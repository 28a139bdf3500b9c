"""Can other users use this install? The checks behind ``make setup``'s warning and ``labkit workshop check``.

A hub's learners run the organiser's venv as their own system users. That fails when the venv's interpreter
sits under a home other users cannot enter (a pyenv under ``/root``, mode 700): the spawner then reports
``Permission denied trying to run '…/jupyterhub-singleuser'``. :func:`blocked_for_others` names the first
folder on a path that a user who is neither its owner nor in its group cannot pass.

    python -m labkit.workshop.sharing .venv     # make setup runs this: a warning (exit 0) naming the fix
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

__all__ = ["blocked_for_others", "venv_problems", "PROFILE", "profile_snippet", "write_profile", "main"]

#: where a login shell (a learner's JupyterLab terminal is one) picks up the venv's PATH
PROFILE = Path("/etc/profile.d/perflab.sh")


def blocked_for_others(path: Path) -> str | None:
    """Why a user who is not the owner (nor in the group) cannot reach and use ``path`` (symlinks resolved), or
    None when they can: every folder on the way must be searchable (``o+x``), the file itself readable
    (``o+r``), and executable when it is a program."""
    real = Path(os.path.realpath(path))
    parts = [real, *real.parents]
    for p in reversed(parts[1:]):
        try:
            mode = p.stat().st_mode
        except OSError as e:
            return f"{p} cannot be read ({e.strerror})"
        if not mode & stat.S_IXOTH:
            return f"{p} (mode {stat.S_IMODE(mode):o}) cannot be entered by other users"
    try:
        mode = real.stat().st_mode
    except OSError as e:
        return f"{real} cannot be read ({e.strerror})"
    if not mode & stat.S_IROTH:
        return f"{real} (mode {stat.S_IMODE(mode):o}) cannot be read by other users"
    if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
        return f"{real} (mode {stat.S_IMODE(mode):o}) cannot be entered by other users"
    return None


def venv_problems(venv: Path) -> list[str]:
    """What stops other users from running ``venv``'s Python (its interpreter, the venv folder itself)."""
    problems = []
    for path in (venv / "bin" / "python", venv / "pyvenv.cfg"):
        why = blocked_for_others(path)
        if why:
            problems.append(f"{path} → {why}")
    return problems


def profile_snippet(venv_bin: Path) -> str:
    """The ``/etc/profile.d`` snippet that puts ``venv_bin`` first on every login shell's PATH (once)."""
    b = str(Path(venv_bin).absolute())
    return (f"# written by `labkit workshop init`: perflab's shared venv on every learner's PATH (login shells)\n"
            f'case ":$PATH:" in *":{b}:"*) ;; *) PATH="{b}:$PATH"; export PATH ;; esac\n')


def write_profile(venv_bin: Path, target: Path = PROFILE) -> Path:
    """Write :func:`profile_snippet` to ``target`` (mode 644) and return it.

    Raises:
        ResultsError: the file cannot be written (``/etc/profile.d`` needs root), naming it.
    """
    from labkit.errors import ResultsError

    try:
        target.write_text(profile_snippet(venv_bin), encoding="utf-8")
        target.chmod(0o644)
    except OSError as e:
        raise ResultsError(f"cannot write {target}: {e.strerror or e}; run `labkit workshop init` as root, or "
                           f"add {Path(venv_bin).absolute()} to PATH in the learners' ~/.profile") from e
    return target


def main(argv: list[str] | None = None) -> int:
    """Warn (on stderr, exit 0) when the venv given would be unusable by other users, naming the fix."""
    args = sys.argv[1:] if argv is None else argv
    venv = Path(args[0] if args else ".venv")
    problems = venv_problems(venv)
    if problems:
        print("warning: other users cannot run this venv, so a hub's learners could not start their servers "
              "with it (fine if you alone use it):", file=sys.stderr)
        for p in problems:
            print(f"  {p}", file=sys.stderr)
        print(f"  fix for a shared install: build it from an interpreter everyone can run, e.g. "
              f"rm -rf {venv} && PYTHON=/usr/bin/python3 make setup", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
