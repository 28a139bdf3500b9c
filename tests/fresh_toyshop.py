"""Answers from toyshop processes that have served nothing before (tests/test_statement_service.py's isolation test).

    python tests/fresh_toyshop.py < urls.txt     # one URL per line in; one pickled (status, body) per URL out

This process builds the app once (start-up state: no request served), then forks a child per URL; the child
serves that one request, sends its answer back through a pipe, and exits. So every answer comes from a
process no other request has touched — the reference against which a warm service's answers are compared.
"""

from __future__ import annotations

import os
import pickle
import sys
import warnings
from typing import BinaryIO, TextIO

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Using `httpx`")
    from starlette.testclient import TestClient

from labkit.toyshop.app import create_app
from labkit.toyshop.catalog import FakeCatalog
from labkit.toyshop.dataset import ensure


def answer(app: object, url: str) -> tuple[int, bytes]:
    """Serve ``url`` once and return its status and body."""
    resp = TestClient(app, raise_server_exceptions=False).get(url)
    return resp.status_code, resp.content


def serve_forked(urls: TextIO, out: BinaryIO) -> None:
    """For each URL read, fork, answer it in the child, and write the pickled answer, length-prefixed."""
    db = ensure("small", quiet=True)
    app = create_app(db, FakeCatalog.from_db(db))
    for line in urls:
        url = line.strip()
        if not url:
            continue
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: one request, then gone
            os.close(r)
            try:
                data = pickle.dumps(answer(app, url))
            except BaseException as e:  # reported to the parent, never lost
                data = pickle.dumps((-1, repr(e).encode()))
            with os.fdopen(w, "wb") as f:
                f.write(data)
            os._exit(0)
        os.close(w)
        with os.fdopen(r, "rb") as f:
            data = f.read()
        os.waitpid(pid, 0)
        out.write(len(data).to_bytes(8, "big") + data)
        out.flush()


def fresh_answers(urls: list[str]) -> list[tuple[int, bytes]]:
    """Run this file as a subprocess and collect one fresh-process answer per URL."""
    import subprocess

    proc = subprocess.run([sys.executable, __file__], input="\n".join(urls).encode(), capture_output=True,
                          timeout=300, check=True)
    data, out = proc.stdout, []
    while data:
        n = int.from_bytes(data[:8], "big")
        out.append(pickle.loads(data[8:8 + n]))
        data = data[8 + n:]
    return out


if __name__ == "__main__":
    serve_forked(sys.stdin, sys.stdout.buffer)
