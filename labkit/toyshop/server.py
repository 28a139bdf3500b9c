"""The entry point of a toyshop child process (the order service or the catalog), run by :mod:`labkit.service`.

    python -m labkit.toyshop.server --role app --fd 5 --db PATH --catalog-url URL --parent-pid PID ...

The listening socket is created (bound to 127.0.0.1) by the parent and inherited as ``--fd``, so the port is
known before the child starts and no other process can take it in between. The child dies with its parent,
even when the parent is killed with SIGKILL: it asks the kernel for ``PR_SET_PDEATHSIG`` (Linux) and also
watches its stdin, a pipe whose write end only the parent holds (end of file = the parent is gone).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import socket
import sys
import threading

__all__ = ["main", "die_with_parent"]

_PR_SET_PDEATHSIG = 1
#: called (once) before the process exits, however it stops: write queued log lines, stop background threads
_at_exit: list = []
_exit_lock = threading.Lock()


def _run_exit_hooks() -> None:
    # under the lock throughout: a second caller (SIGTERM's path and the watchdog's race) waits until the
    # first has finished, so neither exits while a hook is still writing
    with _exit_lock:
        hooks = list(_at_exit)
        _at_exit.clear()
        for hook in hooks:
            try:
                hook()
            except Exception as exc:  # a hook that fails must not keep the others from running
                print(f"toyshop: exit hook {hook!r} failed: {exc!r}", file=sys.stderr, flush=True)


def die_with_parent(parent_pid: int) -> None:
    """Make this process die when ``parent_pid`` dies (PDEATHSIG on Linux, plus a stdin-EOF watchdog)."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass  # the stdin watchdog below still covers it
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(3)

    def watch() -> None:
        try:  # os.read, not sys.stdin: a buffered reader's lock would abort interpreter shutdown
            while os.read(0, 4096):
                pass
        except OSError:
            pass
        _run_exit_hooks()  # e.g. the queued access log: nothing lost when the parent stops us
        os._exit(0)  # the parent closed the pipe: it exited or was killed

    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="labkit.toyshop.server")
    p.add_argument("--role", choices=("app", "catalog"), required=True)
    p.add_argument("--fd", type=int, required=True, help="inherited listening socket")
    p.add_argument("--db", required=True)
    p.add_argument("--db-shared", action="store_true", help="the file may be written while read: take SQLite's locks")
    p.add_argument("--parent-pid", type=int, default=0)
    p.add_argument("--catalog-url", default="")
    p.add_argument("--catalog-delay-ms", type=float, default=0.0)
    p.add_argument("--variants", default="{}", help="JSON object of switches")
    p.add_argument("--io-threads", type=int, default=4)
    p.add_argument("--max-connections", type=int, default=1000)
    p.add_argument("--request-log", default=None, help="access-log file for log=sync|queued")
    p.add_argument("--postgres", default=None, help="db=postgres: JSON object of psycopg's connection keywords")
    p.add_argument("--redis", default=None, help="cache=redis: the Unix socket of the Redis to cache in; "
                   "store=redis: of the Redis that holds the products")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run one toyshop process until it is signalled (or its parent dies)."""
    args = _parse(argv)
    if args.parent_pid:
        die_with_parent(args.parent_pid)
    import uvicorn

    if args.role == "catalog":
        from labkit.toyshop.catalog_server import create_app as create_catalog

        app = create_catalog(args.db, delay_ms=args.catalog_delay_ms)
    else:
        from labkit.toyshop.app import create_app
        from labkit.toyshop.catalog import CatalogClient
        from labkit.toyshop.redisstore import RedisCatalog
        from labkit.toyshop.state import apply_gc

        variants = json.loads(args.variants)
        store = variants.get("store") == "redis"  # the Redis holds the products, not a cache of them
        catalog = RedisCatalog(args.redis) if store else CatalogClient(args.catalog_url)
        app = create_app(args.db, catalog, variants=variants, io_threads=args.io_threads,
                         request_log=args.request_log, immutable=not args.db_shared,
                         postgres=json.loads(args.postgres) if args.postgres else None,
                         redis=None if store else args.redis)
        _at_exit.append(app.state.service.close)
    sock = socket.socket(fileno=args.fd)
    config = uvicorn.Config(app, loop="uvloop", http="httptools", lifespan="off", log_level="warning",
                            access_log=False, timeout_keep_alive=300, limit_concurrency=args.max_connections,
                            server_header=False)
    server = uvicorn.Server(config)
    if args.role == "app":
        apply_gc(app.state.service.settings["gc"])
    server.run(sockets=[sock])
    _run_exit_hooks()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
