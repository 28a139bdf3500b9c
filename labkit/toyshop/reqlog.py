"""The order service's access log, as a per-request switch: ``log=off|sync|queued``.

* ``off`` (the default, so no other lab's measurement moves): nothing is written.
* ``sync``: the line is formatted and written through a ``logging.FileHandler`` on the request path — the
  handler flushes every record, so each request pays a ``write`` system call before its response leaves
  (seed 003: a debug line written synchronously on every request took a P99 from 300 to 900 µs).
* ``queued``: the request only puts the line's fields (and the wall-clock time) on a queue; a listener
  thread makes the log record, formats it and writes it through the same file handler. The request pays a
  tuple and an append; making the ``LogRecord`` (a dozen attributes: thread, process, caller…), formatting and
  the system call happen off its path. The listener does not wait on the queue: it wakes every
  :data:`DRAIN_S` seconds and writes what has arrived. A listener blocked on the queue would be woken by every
  line — a system call, and on a busy core a switch to the listener thread and back — on the request's path,
  the cost the queue is there to remove. A line reaches the file within ``DRAIN_S``.

Nothing is lost on an orderly stop: :meth:`RequestLog.close` stops the listener, which first writes every
record still queued (a test counts the lines); records logged after that are written directly. A process
killed outright (SIGKILL) loses what was still queued — the price of taking the write off the request path.

Each line: local time, method, path with query, status, and the milliseconds the request had taken when it
was logged (``time.perf_counter_ns``: a monotonic clock for durations; the wall clock only for the stamp).
"""

from __future__ import annotations

import logging
import os
import queue
import tempfile
import threading
import time
from pathlib import Path

__all__ = ["RequestLog", "MODES", "DRAIN_S"]

MODES = ("off", "sync", "queued")
DRAIN_S = 0.05  #: how often the queued log's listener writes what has arrived (seconds)
_FORMAT = "%(asctime)s %(message)s"
_MESSAGE = "%s %s %d %.3f ms"


class _Listener(threading.Thread):
    """Every ``interval`` seconds, writes each line queued so far through ``handler``; :meth:`stop` writes the
    rest and returns. It sleeps on an event, never on the queue, so putting a line wakes no thread."""

    def __init__(self, handler: logging.Handler, name: str, interval: float) -> None:
        super().__init__(name=f"request-log-{name}", daemon=True)
        self.queue: queue.SimpleQueue[tuple[float, str, str, int, int]] = queue.SimpleQueue()  # unbounded
        self.handler, self.logger_name, self.interval = handler, name, interval
        self._stopping = threading.Event()

    def run(self) -> None:
        while not self._stopping.wait(self.interval):
            self.drain()
        self.drain()

    def drain(self) -> None:
        """Write every line queued so far (on the calling thread)."""
        while True:
            try:
                item = self.queue.get_nowait()
            except queue.Empty:
                return
            self.handler.handle(_record(self.logger_name, *item))

    def stop(self) -> None:
        self._stopping.set()
        self.join()


def _record(name: str, created: float, method: str, target: str, status: int, elapsed_ns: int) -> logging.LogRecord:
    record = logging.LogRecord(name, logging.INFO, __file__, 0, _MESSAGE, (method, target, status, elapsed_ns / 1e6),
                               None)
    record.created, record.msecs = created, (created - int(created)) * 1000 // 1  # the request's time, not now
    return record


class RequestLog:
    """One access-log file written ``sync`` or ``queued`` (see the module docstring).

    Args:
        path: the log file (appended to); default: a new temporary file, removed by :meth:`close`.
    """

    def __init__(self, path: Path | str | None = None) -> None:
        self._owned = path is None
        self.path = Path(path) if path is not None else None
        self._handler: logging.FileHandler | None = None
        self._sync: logging.Logger | None = None
        self._listener: _Listener | None = None
        self._lock = threading.Lock()
        self._closed = False

    def _file_handler(self) -> logging.FileHandler:
        if self._handler is None:
            if self.path is None:
                fd, name = tempfile.mkstemp(prefix="toyshop-requests-", suffix=".log")
                os.close(fd)
                self.path = Path(name)
            self._handler = logging.FileHandler(self.path, encoding="utf-8")  # flushes after every record
            self._handler.setFormatter(logging.Formatter(_FORMAT))
        return self._handler

    def _sync_logger(self) -> logging.Logger:
        with self._lock:
            if self._sync is None:
                self._sync = _private_logger(f"sync.{id(self)}", self._file_handler())
            return self._sync

    def _start_listener(self) -> _Listener:
        with self._lock:
            if self._listener is None:
                self._listener = _Listener(self._file_handler(), f"queued.{id(self)}", DRAIN_S)
                self._listener.start()
            return self._listener

    def write(self, mode: str, method: str, target: str, status: int, elapsed_ns: int) -> None:
        """Log one request in ``mode`` (``off`` does nothing; ``queued`` after :meth:`close` writes directly)."""
        if mode == "off":
            return
        if mode == "queued" and not self._closed:
            listener = self._listener or self._start_listener()
            listener.queue.put((time.time(), method, target, status, elapsed_ns))
            return
        if mode not in ("sync", "queued"):
            raise ValueError(f"log mode must be one of {', '.join(MODES)}, got {mode!r}")
        (self._sync or self._sync_logger()).info(_MESSAGE, method, target, status, elapsed_ns / 1e6)

    def close(self) -> None:
        """Write every queued record, then flush (idempotent). The file is removed only if it was temporary."""
        with self._lock:
            self._closed = True
            listener, self._listener = self._listener, None
        if listener is not None:
            listener.stop()  # writes every line queued so far, then returns
            listener.drain()  # a line put while it stopped (a request racing the close)
        if self._handler is not None:
            self._handler.flush()
            if self._owned and self.path is not None:
                self._handler.close()
                self._handler = None
                self.path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"RequestLog({str(self.path) if self.path else 'not opened yet'})"


def _private_logger(name: str, handler: logging.Handler) -> logging.Logger:
    # a logger outside logging's registry: no propagation to the root logger, no global state
    logger = logging.Logger(f"toyshop.requests.{name}", logging.INFO)
    logger.propagate = False
    logger.addHandler(handler)
    return logger
