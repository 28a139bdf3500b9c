"""The organiser's commands for one node: ``labkit workshop init | add-learners | check``.

* :func:`init` writes ``workshop/organiser_config.py`` beside the shipped hub config (which it loads): the allow
  list (read at each hub start from ``workshop/learners.txt``, which ``add-learners`` keeps), an admin, cores
  and memory per learner, whom a learner with no seat should ask, JupyterLab's news prompt off; it states this
  node's capacity (full settings: 2 cores per learner; QUICK: 1) and refuses a config that fits no learner
  unless told to. As root it also writes ``/etc/profile.d/perflab.sh`` (the venv on a login shell's PATH).
* :func:`add_learners` makes system users with homes, returns their credentials for the organiser's sheet, and
  hands each the labs (:mod:`labkit.workshop.handout`: notebooks only, edits kept).
* :func:`check` runs, as the learner, what their server will need, and says what to fix.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from labkit.errors import BadInputError, LabkitError, ResultsError

__all__ = ["MARK", "NAME_RE", "Capacity", "node_capacity", "config_text", "init", "check_name", "add_learners",
           "check"]

MARK = "# perflab organiser config v1"
#: Debian's useradd default (NAME_REGEX): a lower-case letter, then lower-case letters, digits, - and _
NAME_RE = re.compile(r"^[a-z][-a-z0-9_]{0,31}$")


@dataclass(frozen=True)
class Capacity:
    """How many learners this node holds at once, at full settings and with QUICK."""

    cores: tuple[int, ...]
    full: int
    quick: int
    mem_gib: float
    mem_fits: int

    def lines(self) -> list[str]:
        """What init prints."""
        pool = f"cores {self.cores[0]}-{self.cores[-1]}" if self.cores else "no cores"
        return [f"learners' pool: {pool} ({len(self.cores)} core(s); core 0 stays with the hub and the system)",
                f"capacity: {self.full} learner(s) at once at full settings (2 cores each), {self.quick} with "
                f"QUICK = True (1 core each); memory for {self.mem_fits} at {self.mem_gib:g} GiB each"]


def node_capacity(cores: list[int] | None = None, mem_gib: float = 2.0) -> Capacity:
    """This node's capacity (default pool: every core this process may use but core 0)."""
    pool = sorted(cores) if cores is not None else sorted(c for c in os.sched_getaffinity(0) if c != 0)
    try:
        avail = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30 - 2  # ~2 GiB: hub, proxy, system
    except (ValueError, OSError):
        avail = 0.0
    return Capacity(tuple(pool), len(pool) // 2, len(pool), mem_gib, max(int(avail // mem_gib), 0))


def config_text(admin: str, per_learner: int, cores: list[int], mem_gib: float, contact: str) -> str:
    """The organiser's hub config (``jupyterhub -f workshop/organiser_config.py``)."""
    return f'''{MARK}: written by `labkit workshop init`; run `jupyterhub -f workshop/organiser_config.py`.
# Loads the shipped workshop/jupyterhub_config.py and adds what one node's room needs. Rerun init to change it.
import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
os.environ.setdefault("PERFLAB_HUB_CORES_PER_LEARNER", "{per_learner}")
os.environ.setdefault("PERFLAB_HUB_CORES", "{",".join(map(str, cores))}")
os.environ.setdefault("PERFLAB_HUB_MEM_GIB", "{mem_gib:g}")
os.environ.setdefault("PERFLAB_HUB_CONTACT", {contact!r})
c = get_config()  # noqa: F821
load_subconfig(str(HERE / "jupyterhub_config.py"))  # noqa: F821

# who may log in: the learners `labkit workshop add-learners` made (one name a line), and the organiser
_listed = HERE / "learners.txt"
c.Authenticator.allowed_users = set(_listed.read_text().split()) if _listed.exists() else set()
c.Authenticator.admin_users = {{{admin!r}}}
# JupyterLab's "official Jupyter news?" prompt off for every learner
c.Spawner.args = [*c.Spawner.args, "--LabApp.news_url=None",
                  "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
c.Spawner.default_url = "/lab/tree/perflab/index.ipynb"  # the copy of the labs add-learners handed out
'''


def init(workshop: Path, admin: str, per_learner: int = 2, cores: list[int] | None = None, mem_gib: float = 2.0,
         contact: str = "the workshop's organiser", force: bool = False,
         profile: Path | None = None) -> tuple[Path, Capacity]:
    """Write ``workshop/organiser_config.py`` and return it with the node's capacity.

    Raises:
        BadInputError: the settings fit no learner (unless ``force``), or the admin is not a valid user name.
        ResultsError: a config not written by this command is in the way (unless ``force``), or a file cannot
            be written.
    """
    check_name(admin)
    cap = node_capacity(cores, mem_gib)
    fits = len(cap.cores) // max(per_learner, 1)
    if not fits and not force:
        raise BadInputError(
            f"this config fits no learner: {per_learner} core(s) per learner from a pool of {len(cap.cores)}. "
            f"Use --cores-per-learner 1 (QUICK labs), give more cores (--cores), or pass --force to write it anyway")
    target = workshop / "organiser_config.py"
    if target.exists() and not target.read_text(encoding="utf-8").startswith(MARK) and not force:
        raise ResultsError(f"{target} exists and was not written by this version of `labkit workshop init` (an "
                           "older perflab, or your own): move it aside and rerun, or pass --force to replace it")
    try:
        target.write_text(config_text(admin, per_learner, list(cap.cores), mem_gib, contact), encoding="utf-8")
        (workshop / "learners.txt").touch()
    except OSError as e:
        raise ResultsError(f"cannot write {target}: {e.strerror or e}") from e
    if profile is not None:
        from labkit.workshop.sharing import write_profile

        write_profile(Path(sys.executable).parent, profile)
    return target, cap


def check_name(name: str) -> str:
    """Return ``name`` if it can be a system user name, else raise a BadInputError saying what is allowed."""
    if not NAME_RE.match(name):
        raise BadInputError(f"{name!r} is not a valid user name: use a lower-case letter, then lower-case "
                            "letters, digits, '-' or '_' (at most 32 characters), e.g. ada or learner07")
    return name


def _exists(name: str) -> bool:
    import pwd

    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def add_learners(names: list[str], workshop: Path, notebooks: Path) -> list[tuple[str, str | None, list[str]]]:
    """Make each learner a system user (if new) and hand out the labs to ``~NAME/perflab``.

    Returns:
        ``(name, password or None for a user who already existed, what the labs copy did)`` per learner.

    Raises:
        BadInputError: a name is not a valid user name (checked for all before anyone is made).
        LabkitError: useradd/chpasswd failed (not root?), with their message.
    """
    import pwd

    from labkit.workshop.handout import hand_out

    for n in names:
        check_name(n)
    if os.geteuid() != 0:
        raise LabkitError("making system users needs root: run `sudo labkit workshop add-learners …`")
    out = []
    listed = workshop / "learners.txt"
    known = set(listed.read_text().split()) if listed.exists() else set()
    for n in names:
        password = None
        if not _exists(n):
            password = secrets.token_urlsafe(9)
            for cmd, stdin in ((["useradd", "--create-home", "--shell", "/bin/bash", n], None),
                               (["chpasswd"], f"{n}:{password}\n")):
                r = subprocess.run(cmd, input=stdin, capture_output=True, text=True)
                if r.returncode:
                    raise LabkitError(f"{cmd[0]} failed for {n}: {r.stderr.strip()}")
        pw = pwd.getpwnam(n)
        done = hand_out(notebooks, Path(pw.pw_dir) / "perflab", (pw.pw_uid, pw.pw_gid))
        out.append((n, password, done.lines()))
        known.add(n)
    listed.write_text("".join(f"{k}\n" for k in sorted(known)), encoding="utf-8")
    return out


def check(name: str, repo: Path) -> list[tuple[bool, str, str]]:
    """Run, as learner ``name``, what their server needs; ``(ok, what, how to fix)`` per check."""
    from labkit.toyshop.dataset import db_path
    from labkit.workshop.sharing import PROFILE, blocked_for_others

    check_name(name)
    if not _exists(name):
        raise BadInputError(f"there is no user {name!r} on this node: add them with `labkit workshop add-learners "
                            f"{name}`")
    venv_bin = Path(sys.executable).parent
    results: list[tuple[bool, str, str]] = []
    why = blocked_for_others(venv_bin / "python")
    results.append((why is None, f"the venv's Python ({venv_bin / 'python'}) can be run by {name}"
                    + (f": {why}" if why else ""),
                    "rebuild the venv from an interpreter everyone can run: rm -rf .venv && "
                    "PYTHON=/usr/bin/python3 make setup"))

    def as_learner(script: str) -> subprocess.CompletedProcess:
        return subprocess.run(["runuser", "-l", name, "-c", script], capture_output=True, text=True, timeout=60)

    r = as_learner("command -v labkit")
    results.append((r.returncode == 0 and r.stdout.strip().startswith(str(venv_bin)),
                    f"labkit on a login shell's PATH (what a JupyterLab terminal runs): {r.stdout.strip() or 'not found'}",
                    f"run `labkit workshop init` as root: it writes {PROFILE}"))
    code = ("import os; os.environ.setdefault('PERFLAB_HOME', os.path.expanduser('~/perflab'))\n"
            "from labkit.toyshop import dataset; from labkit import paths\n"
            "print(dataset.ensure('small', quiet=True))\n"
            "print(paths.writable(paths.user_cache(), 'PERFLAB_HOME', 'caches'))\n"
            "print(paths.writable(paths.home() / 'results', 'PERFLAB_HOME', 'records'))\n")
    r = as_learner(f"{venv_bin / 'python'} -c \"{code}\"")
    results.append((r.returncode == 0, "the dataset readable and ~/perflab's data, cache and results writable"
                    + (f": {r.stdout.split()[0]}" if r.returncode == 0 and r.stdout.split() else
                       f": {(r.stderr.strip().splitlines() or ['no output'])[-1]}"),
                    "make the venv runnable first (above)" if why else
                    f"build the dataset as root (`labkit data build`, it goes to {db_path('small')}) and make "
                    f"~{name}/perflab the learner's own"))
    return results
