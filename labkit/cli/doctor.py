"""``labkit doctor``: run every check of :mod:`labkit.workshop.doctor` and print what to do where one fails."""

from __future__ import annotations

import argparse

from labkit.workshop import doctor

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Print every check; exit 1 when any failed. On a JupyterHub server (or with ``--hub``) the hub checks too."""
    parser = argparse.ArgumentParser(prog="labkit doctor", description=doctor.__doc__)
    parser.add_argument("--hub", action="store_true", help="also check what a hub gives this server: CPU quota, "
                        "throttling, pinned cores, neighbours, steal, CPU_LIMIT/CPU_GUARANTEE/MEM_LIMIT, culler "
                        "(on by default inside a JupyterHub server)")
    args = parser.parse_args(argv)
    from labkit.workshop import hub

    results = doctor.run_checks()
    if args.hub or hub.on_hub():
        results += doctor.run_checks((hub.checks,))
    mark = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL"}
    for c in results:
        print(f"[{mark[c.status]}] {c.name}: {c.detail}")
        if c.fix and c.status != "ok":
            print(f"       what to do: {c.fix}")
    counts = {s: sum(c.status == s for c in results) for s in ("ok", "warn", "fail")}
    print(f"{counts['ok']} ok, {counts['warn']} warning(s), {counts['fail']} failed")
    return 1 if counts["fail"] else 0
