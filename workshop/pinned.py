"""A JupyterHub spawner that gives each learner's server cores of its own and no CPU quota.

JupyterHub's local spawners start every server on every core and enforce ``cpu_limit`` (where they enforce it
at all) as a CFS quota, which throttles the bursts the labs measure. :class:`PinnedSpawner` instead takes the
next free block of ``cores_per_learner`` cores from ``cores`` when a server starts, sets the server's affinity
to it before the server's first instruction (``os.sched_setaffinity`` in the child, so every kernel and every
process the learner starts inherits it), and frees it when the server stops. When every block is taken, the
next learner is told so instead of being packed onto someone else's cores.

Affinity is a mask a process may widen again (any process may call ``sched_setaffinity``); a cgroup cpuset
cannot be widened from inside. On a node where systemd runs, prefer SystemdSpawner with ``AllowedCPUs=`` (see
docs/workshop.md); this spawner is the one that works without it (and is tested on a 2-core machine).

``PinnedSpawner`` runs servers as the learners' system users (LocalProcessSpawner); ``PinnedSimpleSpawner``
runs them as the hub's own user with homes under ``home_dir_template`` — for tests and demos only.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from jupyterhub.spawner import LocalProcessSpawner, SimpleLocalProcessSpawner
from tornado import web
from traitlets import Integer, List, Unicode
from traitlets.config import LoggingConfigurable

__all__ = ["PinnedSpawner", "PinnedSimpleSpawner", "allocate", "capacity", "capacity_line", "NoFreeCores"]


class NoFreeCores(web.HTTPError):
    """Every block of cores is held by a running server (or the pool holds none).

    A ``web.HTTPError`` (503) carrying ``jupyterhub_message``: JupyterHub shows the learner that message on the
    spawn page and in the REST API's answer, and logs the organiser's text (``log_message``) without a
    traceback — not "500 : Unhandled error starting server".
    """

    def __init__(self, log_message: str, learner_message: str) -> None:
        super().__init__(503, log_message.replace("%", "%%"), reason="No free seat")
        self.jupyterhub_message = learner_message

    def __str__(self) -> str:
        return self.log_message or ""


def capacity(pool: Iterable[int], n: int) -> int:
    """How many learners' servers ``pool`` holds at once with ``n`` cores each."""
    return len(set(pool)) // max(n, 1)


def capacity_line(pool: Iterable[int], n: int) -> str:
    """What the hub's log says at start: the pool, the block size and how many learners fit."""
    cores = sorted(set(pool))
    fits = capacity(cores, n)
    line = (f"perflab: {n} core(s) per learner from cores {_span(cores)}: room for {fits} learner(s) at once")
    if not fits:
        line += (f" — no learner can start a server. Give the pool at least {n} core(s) (PERFLAB_HUB_CORES) or "
                 "lower PERFLAB_HUB_CORES_PER_LEARNER (QUICK labs run on 1)")
    return line


def _span(cores: list[int]) -> str:
    return f"{cores[0]}-{cores[-1]}" if cores else "(none)"


def allocate(taken: dict[str, tuple[int, ...]], pool: Iterable[int], n: int, user: str,
             contact: str = "the workshop's organiser") -> tuple[int, ...]:
    """The first block of ``n`` consecutive cores from ``pool`` that no other user holds (a user's own block
    is given back to them: a restart keeps its cores).

    Raises:
        NoFreeCores: for the log, how many learners the pool holds and what to change; for the learner, that
            the seats are taken and whom to ask (``contact``).
    """
    if user in taken:
        return taken[user]
    cores = sorted(set(pool))
    held = {c for u, cs in taken.items() if u != user for c in cs}
    for i in range(0, len(cores) - n + 1, n):
        block = tuple(cores[i:i + n])
        if not held & set(block):
            return block
    fits = capacity(cores, n)
    if not fits:
        raise NoFreeCores(
            f"no seat at all: the pool (cores {_span(cores)}, {len(cores)} core(s)) is smaller than one "
            f"learner's {n} core(s). Give the pool more cores (PERFLAB_HUB_CORES) or lower "
            "PERFLAB_HUB_CORES_PER_LEARNER (QUICK labs run on 1)",
            f"This hub has no seats set up yet: it cannot give anyone the {n} core(s) a learner gets. "
            f"Please tell {contact}.")
    raise NoFreeCores(
        f"all {fits} blocks of {n} core(s) on cores {_span(cores)} are held by running servers "
        f"({', '.join(sorted(taken))}): {fits} learners at once is this node's capacity. Stop an idle server, or "
        "lower cores_per_learner (QUICK labs run on 1), or add a node (docs/workshop.md, capacity)",
        f"All {fits} seats on this node are taken: every learner gets cores of their own, and all of them are in "
        f"use. Ask {contact} for a seat, or try again when someone stops their server.")


class _Pinned(LoggingConfigurable):
    """The pinning, shared by both spawners: a class-wide table of who holds which cores."""

    cores_per_learner = Integer(2, config=True, help="cores each learner's server gets to itself")
    cores = List(Integer(), config=True, help="the cores learners' servers may take (default: every core but "
                 "the first, which stays with the hub, the proxy and the system)")
    contact = Unicode("the workshop's organiser", config=True,
                      help="whom a learner who finds every seat taken should ask (a name, a room, a chat channel)")
    _taken: dict[str, tuple[int, ...]] = {}

    def _pool(self) -> list[int]:
        return list(self.cores) or list(range(1, os.cpu_count() or 1)) or [0]

    def pin(self) -> tuple[int, ...]:
        """Take this user's block of cores (see :func:`allocate`) and put it in the server's environment."""
        block = allocate(_Pinned._taken, self._pool(), self.cores_per_learner, self.user.name, self.contact)
        _Pinned._taken[self.user.name] = block
        self.environment = {**self.environment, "PERFLAB_CORES": ",".join(map(str, block))}
        return block

    def release(self) -> None:
        """Free this user's cores."""
        _Pinned._taken.pop(self.user.name, None)

    def pinned_preexec(self, inner: Callable[[], None] | None) -> Callable[[], None]:
        block = set(_Pinned._taken[self.user.name])

        def preexec() -> None:
            os.sched_setaffinity(0, block)  # before the server's first instruction: everything it starts inherits
            if inner is not None:
                inner()

        return preexec

    async def start(self):  # type: ignore[no-untyped-def]
        self.pin()
        try:
            return await super().start()  # type: ignore[misc]
        except BaseException:
            self.release()
            raise

    async def stop(self, now: bool = False):  # type: ignore[no-untyped-def]
        try:
            return await super().stop(now=now)  # type: ignore[misc]
        finally:
            self.release()

    def get_state(self):  # type: ignore[no-untyped-def]
        state = super().get_state()  # type: ignore[misc]
        if self.user.name in _Pinned._taken:
            state["cores"] = list(_Pinned._taken[self.user.name])
        return state

    def load_state(self, state):  # type: ignore[no-untyped-def]
        # a hub restarted while servers ran: they keep their cores, and nobody else is given them
        super().load_state(state)  # type: ignore[misc]
        if state.get("cores") and state.get("pid"):
            _Pinned._taken[self.user.name] = tuple(state["cores"])

    def make_preexec_fn(self, name: str) -> Callable[[], None]:
        return self.pinned_preexec(super().make_preexec_fn(name))  # type: ignore[misc]


class PinnedSpawner(_Pinned, LocalProcessSpawner):
    """LocalProcessSpawner (servers run as the learners' system users) with exclusive cores per learner."""


class PinnedSimpleSpawner(_Pinned, SimpleLocalProcessSpawner):
    """SimpleLocalProcessSpawner (no system users; homes under ``home_dir_template``) with exclusive cores —
    for tests and demos only: it gives learners no isolation from one another beyond their cores."""
