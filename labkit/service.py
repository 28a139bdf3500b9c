"""Start and stop toyshop (the order service and its catalog) as child processes on loopback ports.

    with labkit.service.start(size="small", variants={"n1": "batched"}) as svc:
        urllib.request.urlopen(svc.url + "/customers/1/export")

:func:`start` builds the dataset if needed, binds two free ports on 127.0.0.1, starts the catalog and the
order service in parallel, and returns once both answer ``/health`` (about a second), or raises
:class:`labkit.errors.ServiceError` with the tail of the failing process's log. The children never outlive
this process: they are stopped by :meth:`Service.stop`, by the context manager, when the :class:`Service`
is garbage-collected, at interpreter exit, and — when the parent is killed outright (SIGKILL, a crashed
kernel) — by the kernel itself (``PR_SET_PDEATHSIG``) and by a watchdog on a pipe only the parent holds.

The catalog is kept alive: if its process dies while the service runs, a supervisor thread here (its parent,
the one process that can wait for it, reap it and give it the parent-death watchdog) starts it again on the
same port, up to :data:`RESTART_ATTEMPTS` tries with a doubling back-off, and writes each step to the
catalog's log. Requests that need the catalog meanwhile fail fast with 502 (nothing listens: the connection
is refused at once); the order service reports the outage in its ``/health`` (``catalog``) and its log, and
answers again as soon as the new catalog does — the order service is never restarted.

``labkit serve`` runs the same from a shell until Ctrl-C.
"""

from __future__ import annotations

import errno
import functools
import http.client
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from labkit.errors import BadInputError, ServiceError

__all__ = ["Service", "start", "RESTART_ATTEMPTS", "PortInUse"]

#: tries to bring a dead catalog back (per outage), waiting 0.1, 0.2, 0.4… s before each.
RESTART_ATTEMPTS = 5
_FIRST_BACKOFF_S = 0.1

_LABKIT_DIR = str(Path(__file__).resolve().parent)
# Run the child with a bare ``labkit`` package object: the real ``labkit/__init__`` imports the measuring API
# (numpy, the result types, the environment fingerprint), which the service does not need; start-up time is
# what a learner waits for.
_BOOT = ("import sys, types; m = types.ModuleType('labkit'); m.__path__ = [{dir!r}]; sys.modules['labkit'] = m; "
         "from labkit.toyshop.server import main; sys.exit(main(sys.argv[1:]))")


class Service:
    """A running toyshop: ``.url`` (order service), ``.catalog_url``, ``.pid``, ``.catalog_pid``.

    Stop it with :meth:`stop` or use it as a context manager. ``.variants`` holds the process's settings,
    ``.db_path`` the dataset, ``.start_s`` how long start-up took. Keep a reference: a Service that is
    garbage-collected stops its processes.
    """

    def __init__(self, url: str, catalog_url: str, procs: dict[str, subprocess.Popen], log_dir: Path,
                 variants: dict[str, Any], db_path: Path, start_s: float,
                 relaunch: Callable[[], subprocess.Popen] | None = None, postgres: Any = None,
                 redis: Any = None) -> None:
        self.url, self.catalog_url = url, catalog_url
        #: with ``db=postgres``: the :class:`labkit.toyshop.backends.Postgres` the order service queries (stopped
        #: with the service; ``svc.postgres.kill()`` is an outage it recovers from)
        self.postgres = postgres
        #: with ``cache=redis``: the :class:`labkit.toyshop.backends.Redis` the order service caches products in
        #: (stopped with the service; ``svc.redis.kill()`` is an outage the service rides out on the catalog); with
        #: ``store=redis``: the Redis that holds the products (killed, its product reads answer 502 until it is
        #: back, with every product and acknowledged write: it keeps an append-only file)
        self.redis = redis
        self.pid = procs["app"].pid
        self.variants, self.db_path, self.start_s = variants, db_path, start_s
        self.log_dir = log_dir
        self._procs = procs
        self._keeper = _Keeper(procs, log_dir, relaunch, tuple(s for s in (postgres, redis) if s is not None))
        self._finalizer = weakref.finalize(self, self._keeper.stop_all, 5.0)

    @property
    def catalog_pid(self) -> int:
        """The catalog process's pid (a new one after a restart)."""
        return self._procs["catalog"].pid

    @property
    def catalog_restarts(self) -> int:
        """How many times the catalog was started again after it died."""
        return self._keeper.restarts

    @property
    def alive(self) -> bool:
        """True while both processes run."""
        return all(p.poll() is None for p in self._procs.values())

    def stop(self, timeout: float = 5.0) -> None:
        """Stop both processes (SIGTERM, then SIGKILL after ``timeout`` s) and remove their logs. Idempotent."""
        if self._finalizer.alive:
            self._finalizer.detach()
            self._keeper.stop_all(timeout)

    def catalog_client(self, **options: Any) -> Any:
        """A :class:`labkit.toyshop.catalog.CatalogClient` for this service's catalog (for in-process labs:
        ``export_naive(connect(svc.db_path), svc.catalog_client(), 1)``). ``options`` go to the client."""
        from labkit.toyshop.catalog import CatalogClient

        return CatalogClient(self.catalog_url, **options)

    def rss_bytes(self) -> dict[str, int]:
        """Resident memory of each process (``{"app": …, "catalog": …}``), from /proc; 0 if it has exited."""
        return {role: _rss(p.pid) for role, p in self._procs.items()}

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of both processes' logs."""
        return "\n".join(f"--- {role} ---\n{_tail(self.log_dir / f'{role}.log', lines)}" for role in self._procs)

    def __enter__(self) -> Service:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.alive else "stopped"
        return f"<toyshop {state}: {self.url} (pid {self.pid}), catalog {self.catalog_url} (pid {self.catalog_pid})>"


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _tail(path: Path, lines: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) or "(empty log)"
    except OSError:
        return f"(no log at {path})"


class _Keeper:
    """Restarts the catalog when it dies (a thread blocked in ``wait()`` on it: no polling) until stopped."""

    def __init__(self, procs: dict[str, subprocess.Popen], log_dir: Path,
                 relaunch: Callable[[], subprocess.Popen] | None, servers: tuple[Any, ...] = ()) -> None:
        self.procs, self.log_dir, self.relaunch, self.servers = procs, log_dir, relaunch, servers
        self.restarts = 0
        self._stopping = threading.Event()
        self._lock = threading.Lock()  # a restart and a stop never interleave

    def keep(self) -> None:
        """Start watching the catalog (once both processes are healthy: a start-up failure is reported, not
        retried)."""
        if self.relaunch is not None and not self._stopping.is_set():
            threading.Thread(target=self._watch, name="labkit-catalog-keeper", daemon=True).start()

    def _note(self, message: str) -> None:
        try:
            with open(self.log_dir / "catalog.log", "a") as log:
                log.write(f"labkit.service: {message}\n")
        except OSError:
            pass

    def _watch(self) -> None:
        assert self.relaunch is not None
        while not self._stopping.is_set():
            code = self.procs["catalog"].wait()
            if self._stopping.is_set():
                return
            self._note(f"the catalog (pid {self.procs['catalog'].pid}) exited with code {code}; restarting it")
            for attempt in range(RESTART_ATTEMPTS):
                if self._stopping.wait(_FIRST_BACKOFF_S * 2**attempt):
                    return
                with self._lock:
                    if self._stopping.is_set():
                        return
                    try:
                        proc = self.relaunch()
                    except (OSError, ServiceError) as exc:
                        self._note(f"restart {attempt + 1}/{RESTART_ATTEMPTS} failed: {exc}")
                        continue
                    self.procs["catalog"] = proc
                if proc.poll() is None:
                    self.restarts += 1
                    self._note(f"catalog restarted (pid {proc.pid}, restart {self.restarts})")
                    break
                self._note(f"restart {attempt + 1}/{RESTART_ATTEMPTS}: the new catalog exited at once "
                           f"(code {proc.returncode})")
            else:
                self._note(f"gave up after {RESTART_ATTEMPTS} restarts: exports answer 502 until "
                           "labkit.service.start() runs again")
                return

    def stop_all(self, timeout: float) -> None:
        self._stopping.set()
        with self._lock:
            procs = list(self.procs.values())
        _terminate(procs, self.log_dir, timeout)
        for server in self.servers:  # after the order service: no request of its is left to answer
            server.stop(timeout)


def _terminate(procs: list[subprocess.Popen], log_dir: Path | None, timeout: float = 5.0) -> None:
    for p in procs:
        if p.poll() is None:
            try:
                if p.stdin is not None:
                    p.stdin.close()  # the child's watchdog exits on end-of-file
                p.send_signal(signal.SIGTERM)
            except (OSError, ValueError):
                pass
    deadline = time.monotonic() + timeout
    for p in procs:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    if log_dir is not None:
        shutil.rmtree(log_dir, ignore_errors=True)


# PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, not the process. A notebook may
# call start() from a short-lived thread (a widget callback, an executor), so every child is forked from
# one long-lived daemon thread that lasts as long as the process.
_spawn_queue: queue.Queue | None = None
_spawn_lock = threading.Lock()


def _spawner(q: queue.Queue) -> None:
    while True:
        fn, fut = q.get()
        try:
            fut.set_result(fn())
        except BaseException as exc:  # handed back to the caller
            fut.set_exception(exc)


def _spawn(fn: Callable[[], subprocess.Popen]) -> subprocess.Popen:
    global _spawn_queue
    with _spawn_lock:
        if _spawn_queue is None:
            _spawn_queue = queue.Queue()
            threading.Thread(target=_spawner, args=(_spawn_queue,), name="labkit-spawner", daemon=True).start()
        q = _spawn_queue
    fut: Future = Future()
    q.put((fn, fut))
    return fut.result()


def _forget_spawner() -> None:
    global _spawn_queue
    _spawn_queue = None


os.register_at_fork(after_in_child=_forget_spawner)


class PortInUse(ServiceError):
    """A port toyshop was asked to listen on is taken by another process; ``.port`` names it."""

    def __init__(self, message: str, port: int) -> None:
        super().__init__(message)
        self.port = port


def _listen_socket(port: int) -> socket.socket:
    if not isinstance(port, int) or not 0 <= port <= 65535:
        raise BadInputError(f"port must be an integer 0–65535 (0 = any free port), got {port!r}")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortInUse(f"cannot listen on 127.0.0.1:{port}: another process is using that port ({exc}). "
                            "Stop it, or pick another port (port=0: any free one).", port) from exc
        raise ServiceError(f"cannot listen on 127.0.0.1:{port}: {exc}. Pick another port, or port=0 for a "
                           "free one.") from exc
    return sock


def _health(url: str, timeout: float) -> bool:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        conn.request("GET", "/health")
        return conn.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


def start(*, size: str = "small", variants: Mapping[str, Any] | None = None, catalog_delay_ms: float = 0.0,
          port: int = 0, catalog_port: int = 0, io_threads: int = 4, max_connections: int = 1000,
          cpus: Iterable[int] | None = None, db_path: Path | str | None = None, timeout: float = 60.0,
          request_log: Path | str | None = None) -> Service:
    """Start the catalog and the order service and wait until both are healthy.

    Args:
        size: dataset size (``small``, ``default``, ``large``); built on first use.
        variants: the process's switches, ``{name: value}``: defaults for the request switches (a request may
            override them) and the process-only ones. Every switch, its values and default:
            ``docs/switches.md`` (the table: :data:`labkit.toyshop.switches.TABLE`). Three start a real server
            beside the service, stopped with it: ``db=postgres`` a private PostgreSQL loaded with the dataset
            (``svc.postgres``), ``cache=redis`` a private Redis (``svc.redis``) for the product cache, and
            ``store=redis`` a private Redis (``svc.redis``, kept on disk) loaded with the products, which the order
            service then reads in place of the catalog process (:mod:`labkit.toyshop.backends`,
            :mod:`labkit.toyshop.redisstore`).
        catalog_delay_ms: sleep added to every catalog call — an *emulation* of a farther network.
        port, catalog_port: loopback ports (0 = any free port).
        io_threads: catalog calls in flight at once for ``io=concurrent``.
        max_connections: beyond this many open connections the service answers 503 (bounded memory).
        cpus: pin both processes to these CPUs (``os.sched_setaffinity``), e.g. ``{1}``.
        db_path: use this database file instead of the dataset of ``size``. It may be written while the service
            runs (the service takes SQLite's locks and sees what was committed; a request that meets a write in
            progress for longer than :data:`labkit.toyshop.db.BUSY_TIMEOUT_S` answers 503 ``database_busy``),
            whereas a dataset labkit built is read immutable, without locks.
        timeout: seconds to wait for health before giving up.
        request_log: the order service's access log for ``log=sync|queued`` (default: ``requests.log`` in
            the service's log folder, removed by :meth:`Service.stop`; give a path to keep it).

    Returns:
        a running :class:`Service`. Raises :class:`labkit.errors.ServiceError` (with the log tail) if a
        process exits or does not become healthy in time.
    """
    from labkit.toyshop.dataset import ensure
    from labkit.toyshop.switches import resolve

    t0 = time.perf_counter()
    settings = resolve(variants)
    if catalog_delay_ms < 0 or io_threads < 1 or max_connections < 1:
        raise BadInputError("start() needs catalog_delay_ms >= 0, io_threads >= 1 and max_connections >= 1 "
                            f"(got {catalog_delay_ms}, {io_threads}, {max_connections})")
    if catalog_delay_ms and settings["store"] == "redis":
        raise BadInputError(f"catalog_delay_ms={catalog_delay_ms} emulates a farther catalog process, and with "
                            "store=redis the order service reads its products from Redis, not from the catalog: "
                            "leave catalog_delay_ms out")
    db = Path(db_path) if db_path is not None else ensure(size)
    postgres = redis = None
    if settings["db"] == "postgres":  # a private PostgreSQL, loaded with the dataset before the service starts
        from labkit.toyshop.backends import Postgres

        postgres = Postgres.start(settings={"max_connections": str(max(100, settings["pool"] + 20))})
        try:
            postgres.load(db)
        except BaseException:
            postgres.stop(2.0)
            raise
    if "redis" in (settings["cache"], settings["store"]):  # a private Redis: the product cache, or the products
        from labkit.toyshop import redisstore
        from labkit.toyshop.backends import Redis
        from labkit.toyshop.productstore import load_products

        try:
            if settings["store"] == "redis":  # kept on disk, loaded whole before the service reads it
                redis = Redis.start(settings=redisstore.SERVER_SETTINGS)
                with redis.client() as client:
                    redisstore.load(client, load_products(db))
            else:
                redis = Redis.start()
        except BaseException:
            for server in (postgres, redis):
                if server is not None:
                    server.stop(2.0)
            raise
    servers = [s for s in (postgres, redis) if s is not None]
    socks: dict[str, socket.socket] = {}
    try:
        socks["catalog"] = _listen_socket(catalog_port)
        socks["app"] = _listen_socket(port)
    except BaseException:  # a port taken: nothing started is left behind
        for sock in socks.values():
            sock.close()
        for server in servers:
            server.stop(1.0)
        raise
    urls = {role: f"http://127.0.0.1:{s.getsockname()[1]}" for role, s in socks.items()}
    log_dir = Path(tempfile.mkdtemp(prefix="labkit-service-"))
    common = ["--db", str(db), "--parent-pid", str(os.getpid())]
    args = {"catalog": ["--role", "catalog", "--catalog-delay-ms", str(catalog_delay_ms)],
            "app": ["--role", "app", *(["--db-shared"] if db_path is not None else []),
                    "--catalog-url", urls["catalog"], "--variants", json.dumps(settings),
                    "--io-threads", str(io_threads), "--max-connections", str(max_connections),
                    "--request-log", str(Path(request_log) if request_log is not None else log_dir / "requests.log"),
                    *(["--postgres", json.dumps(postgres.conninfo())] if postgres is not None else []),
                    *(["--redis", str(redis.socket)] if redis is not None else [])]}
    cpu_set = set(cpus) if cpus is not None else None
    if cpu_set is not None:
        from labkit.measure.machine import can_pin

        if not can_pin():
            raise BadInputError(f"cpus={sorted(cpu_set)} pins the service's processes with os.sched_setaffinity, which "
                                f"this platform ({sys.platform}) does not offer: leave cpus= out (the processes then "
                                "share every core, and the lab's note says so)")

    def launch(role: str, sock: socket.socket, mode: str = "wb") -> subprocess.Popen:
        cmd = [sys.executable, "-c", _BOOT.format(dir=_LABKIT_DIR), "--fd", str(sock.fileno()),
               *args[role], *common]
        with open(log_dir / f"{role}.log", mode) as log:
            proc = _spawn(functools.partial(
                subprocess.Popen, cmd, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                pass_fds=(sock.fileno(),), start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}))
        if cpu_set is not None:
            os.sched_setaffinity(proc.pid, cpu_set)
        return proc

    def relaunch_catalog() -> subprocess.Popen:
        # the same port: the order service's client keeps its URL and reconnects by itself
        sock = _listen_socket(int(urls["catalog"].rsplit(":", 1)[1]))
        try:
            return launch("catalog", sock, "ab")
        finally:
            sock.close()

    procs: dict[str, subprocess.Popen] = {}
    try:
        for role, sock in socks.items():
            procs[role] = launch(role, sock)
    except BaseException:
        _terminate(list(procs.values()), log_dir, 1.0)
        for server in servers:
            server.stop(1.0)
        raise
    finally:
        for sock in socks.values():
            sock.close()
    service = Service(urls["app"], urls["catalog"], procs, log_dir, settings, db, 0.0, relaunch_catalog, postgres, redis)
    deadline = time.monotonic() + timeout
    pending = dict(urls)
    while pending:
        for role in list(pending):
            if procs[role].poll() is not None:
                tail = _tail(log_dir / f"{role}.log", 30)
                service.stop(1.0)
                raise ServiceError(f"the toyshop {role} process exited with code {procs[role].returncode} during "
                                   f"start-up. Its log ends with:\n{tail}")
            if _health(pending[role], 0.5):
                del pending[role]
        if pending and time.monotonic() > deadline:
            tail = service.log_tail()
            service.stop(1.0)
            raise ServiceError(f"toyshop did not become healthy within {timeout:g} s ({', '.join(pending)} not "
                               f"answering /health). Is the machine overloaded? Logs:\n{tail}")
        if pending:
            time.sleep(0.01)
    service.start_s = time.perf_counter() - t0
    service._keeper.keep()
    return service

