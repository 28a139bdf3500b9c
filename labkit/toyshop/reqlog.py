"""The order service's access log, as a per-request switch: ``log=off|sync|queued``.

* ``off`` (the default, so no other lab's measurement moves): nothing is written.
* ``sync``: the line is formatted and written through a ``logging.FileHandler`` on the request path — the
  handler flushes every record, so each request pays a ``write`` system call before its response leaves
  (seed 003: a debug line written synchronously on every request took a P99 from 300 to 900 µs).
* ``queued``: the request only puts the record on a queue (``logging.handlers.QueueHandler``); a listener
  thread (``QueueListener``) formats it and writes it through the same file handler. The request pays an
  append to a queue; the formatting and the system call happen off its path.

Nothing is lost on an orderly stop: :meth:`RequestLog.close` stops the listener, which first writes every
record still queued (a test counts the lines); records logged after that are written directly. A process
killed outright (SIGKILL) loses what was still queued — the price of taking the write off the request path.

Each line: local time, method, path with query, status, and the milliseconds the request had taken when it
was logged (``time.perf_counter_ns``: a monotonic clock for durations; the wall clock only for the stamp).
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import queue
import tempfile
import threading
from pathlib import Path

__all__ = ["RequestLog", "MODES"]

MODES = ("off", "sync", "queued")
_FORMAT = "%(asctime)s %(message)s"


class _LazyQueueHandler(logging.handlers.QueueHandler):
    """A QueueHandler that leaves formatting to the listener: the stock ``prepare`` formats the message on
    the caller's thread, which is the work we want off the request path. Safe here because every argument
    of an access-log record is an immutable str or number."""

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
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
        self._queued: logging.Logger | None = None
        self._listener: logging.handlers.QueueListener | None = None
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

    def _logger(self, mode: str) -> logging.Logger:
        with self._lock:
            if mode == "sync" and self._sync is None:
                self._sync = _private_logger(f"sync.{id(self)}", self._file_handler())
            elif mode == "queued" and self._queued is None:
                q: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()  # unbounded: nothing dropped
                self._listener = logging.handlers.QueueListener(q, self._file_handler())
                self._listener.start()
                self._queued = _private_logger(f"queued.{id(self)}", _LazyQueueHandler(q))
            logger = self._sync if mode == "sync" else self._queued
        assert logger is not None
        return logger

    def write(self, mode: str, method: str, target: str, status: int, elapsed_ns: int) -> None:
        """Log one request in ``mode`` (``off`` does nothing; ``queued`` after :meth:`close` writes directly)."""
        if mode == "off":
            return
        if mode not in ("sync", "queued"):
            raise ValueError(f"log mode must be one of {', '.join(MODES)}, got {mode!r}")
        if mode == "queued" and self._closed:
            mode = "sync"
        logger = (self._sync if mode == "sync" else self._queued) or self._logger(mode)
        logger.info("%s %s %d %.3f ms", method, target, status, elapsed_ns / 1e6)

    def close(self) -> None:
        """Write every queued record, then flush (idempotent). The file is removed only if it was temporary."""
        with self._lock:
            self._closed = True
            listener, self._listener = self._listener, None
        if listener is not None:
            listener.stop()  # puts a sentinel after the queued records and joins: every one is written first
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
