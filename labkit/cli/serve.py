"""``labkit serve``: run toyshop (the order service and its catalog) in the foreground until Ctrl-C."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any

from labkit.errors import BadInputError, ServiceError
from labkit.service import PortInUse, start

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run toyshop in the foreground until Ctrl-C (or SIGTERM); exit 2 on bad arguments, 1 if a process dies."""
    from labkit.toyshop.dataset import SIZES

    p = argparse.ArgumentParser(prog="labkit serve", description="Run toyshop (order service + catalog) on "
                                "127.0.0.1 until Ctrl-C.")
    p.add_argument("--size", choices=list(SIZES), default="small")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--catalog-port", type=int, default=0)
    p.add_argument("--catalog-delay-ms", type=float, default=0.0,
                   help="sleep added per catalog call: an emulation of a farther network")
    p.add_argument("--variant", action="append", default=[], metavar="SWITCH=VALUE",
                   help="process default for a switch, e.g. n1=batched, gc=tuned, pool=1 (repeatable; "
                        "every switch: docs/switches.md)")
    p.add_argument("--cpus", default=None, help="pin to these CPUs, e.g. 1 or 0,1")
    a = p.parse_args(argv)
    variants: dict[str, Any] = {}
    for item in a.variant:
        key, sep, value = item.partition("=")
        if not sep:
            p.error(f"--variant takes SWITCH=VALUE, got {item!r}")
        variants[key] = value
    try:
        cpus = {int(c) for c in a.cpus.split(",")} if a.cpus else None
        svc = start(size=a.size, variants=variants, catalog_delay_ms=a.catalog_delay_ms, port=a.port,
                    catalog_port=a.catalog_port, cpus=cpus)
    except PortInUse as exc:
        flag = "--port" if exc.port == a.port else "--catalog-port"
        print(f"labkit serve: port {exc.port} on 127.0.0.1 is taken by another process (is a toyshop already "
              f"running? `ss -ltnp 'sport = :{exc.port}'` names it). Stop it, or choose another port: "
              f"labkit serve {flag} {exc.port + 1} (or {flag} 0 for any free port).", file=sys.stderr)
        return 2
    except (BadInputError, ServiceError, ValueError) as exc:
        print(f"labkit serve: {exc}", file=sys.stderr)
        return 2
    # Ctrl-C (SIGINT) and SIGTERM stop it, whatever this process inherited: a shell that starts a job in the
    # background with `&` (no job control) starts it with SIGINT ignored, and Python then leaves it ignored
    stop = threading.Event()
    before = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with svc:
            print(f"toyshop is up in {svc.start_s:.2f} s: {svc.url} (pid {svc.pid}); catalog {svc.catalog_url} "
                  f"(pid {svc.catalog_pid}). Try {svc.url}/customers/1/export — Ctrl-C stops it.", flush=True)
            while not stop.wait(0.5):
                if not svc.alive:
                    print(f"labkit serve: a toyshop process exited.\n{svc.log_tail()}", file=sys.stderr)
                    return 1
    finally:
        for sig, handler in before.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)  # None: not set from Python
    return 0

