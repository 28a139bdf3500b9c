"""``labkit workshop init | add-learners NAME… | --count N | check [LEARNER]``: one node's room, for the organiser.

The work is in :mod:`labkit.workshop.organiser`; this parses arguments and prints.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from labkit.errors import BadInputError

__all__ = ["main"]


def _repo() -> Path:
    from labkit.paths import repo_root

    root = repo_root()
    if root is None:
        raise BadInputError("labkit workshop runs from a perflab checkout (its workshop/ and notebooks/): clone "
                            "the repository, `make setup`, and run .venv/bin/labkit workshop …")
    return root


def _cores(spec: str) -> list[int]:
    try:
        out: list[int] = []
        for part in filter(None, spec.split(",")):
            lo, _, hi = part.partition("-")
            out += range(int(lo), int(hi or lo) + 1)
        return out
    except ValueError as e:
        raise BadInputError(f"--cores {spec!r}: give cores as 1-7 or 1,2,5") from e


def _init(args: argparse.Namespace) -> int:
    from labkit.workshop.organiser import init
    from labkit.workshop.sharing import PROFILE

    profile = PROFILE if os.geteuid() == 0 and not args.no_profile else None
    target, cap = init(_repo() / "workshop", args.admin, args.cores_per_learner,
                       _cores(args.cores) if args.cores else None, args.mem_gib, args.contact, args.force, profile)
    for line in cap.lines():
        print(line)
    print(f"wrote {target}" + (f" and {profile}" if profile else " (not root: no /etc/profile.d snippet)"))
    print(f"next: labkit workshop add-learners NAME… ; then jupyterhub -f {target}")
    return 0


def _add(args: argparse.Namespace) -> int:
    from labkit.workshop.organiser import add_learners

    names = list(args.names) + [f"{args.prefix}{i:02d}" for i in range(1, (args.count or 0) + 1)]
    if not names:
        raise BadInputError("name the learners (add-learners ada bob) or give --count N")
    repo = _repo()
    print("credentials (hand each learner their line; nobody else needs it):")
    for name, password, done in add_learners(names, repo / "workshop", repo / "notebooks"):
        print(f"  {name:<16} {password if password else '(existing user: password unchanged)'}")
        for line in done:
            print(f"      labs: {line}")
    return 0


def _check(args: argparse.Namespace) -> int:
    from labkit.workshop.organiser import check

    repo = _repo()
    names = [args.learner] if args.learner else (repo / "workshop" / "learners.txt").read_text().split()
    failed = 0
    for name in names:
        for ok, what, fix in check(name, repo):
            print(f"[{'ok  ' if ok else 'FAIL'}] {name}: {what}")
            if not ok:
                failed += 1
                print(f"       what to do: {fix}")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    """Run one of the organiser's commands; exit 1 when ``check`` found something to fix."""
    parser = argparse.ArgumentParser(prog="labkit workshop", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="action", required=True)
    i = sub.add_parser("init", help="write the organiser's hub config and say how many learners this node holds")
    i.add_argument("--admin", default=os.environ.get("SUDO_USER") or "root", help="the hub's admin user")
    i.add_argument("--cores-per-learner", type=int, default=2, help="2 for full-size labs, 1 for QUICK")
    i.add_argument("--cores", help="the cores learners may take, e.g. 1-63 (default: all but core 0)")
    i.add_argument("--mem-gib", type=float, default=2.0, help="memory per learner (stated, not enforced)")
    i.add_argument("--contact", default="the workshop's organiser", help="whom a learner with no seat asks")
    i.add_argument("--force", action="store_true", help="write even a config that fits no learner, or replace "
                   "an organiser_config.py not written by this command")
    i.add_argument("--no-profile", action="store_true", help="do not write /etc/profile.d/perflab.sh")
    i.set_defaults(run=_init)
    a = sub.add_parser("add-learners", help="make learners' system users and hand them the labs (edits kept)")
    a.add_argument("names", nargs="*", metavar="NAME")
    a.add_argument("--count", type=int, help="add learner01 … learnerNN")
    a.add_argument("--prefix", default="learner", help="the names --count makes (default: learner)")
    a.set_defaults(run=_add)
    c = sub.add_parser("check", help="run, as a learner, what their server needs, and say what to fix")
    c.add_argument("learner", nargs="?", help="one learner (default: everyone add-learners made)")
    c.set_defaults(run=_check)
    args = parser.parse_args(argv)
    return int(args.run(args))
