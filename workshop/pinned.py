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
from traitlets import Integer, List
from traitlets.config import LoggingConfigurable

__all__ = ["PinnedSpawner", "PinnedSimpleSpawner", "allocate", "NoFreeCores"]


class NoFreeCores(RuntimeError):
    """Every block of cores is held by a running server."""


def allocate(taken: dict[str, tuple[int, ...]], pool: Iterable[int], n: int, user: str) -> tuple[int, ...]:
    """The first block of ``n`` consecutive cores from ``pool`` that no other user holds (a user's own block
    is given back to them: a restart keeps its cores).

    Raises:
        NoFreeCores: naming how many learners the pool holds and what to change.
    """
    if user in taken:
        return taken[user]
    cores = sorted(set(pool))
    held = {c for u, cs in taken.items() if u != user for c in cs}
    for i in range(0, len(cores) - n + 1, n):
        block = tuple(cores[i:i + n])
        if not held & set(block):
            return block
    raise NoFreeCores(
        f"all {len(cores) // max(n, 1)} blocks of {n} core(s) on cores {cores[0]}-{cores[-1]} are held by running "
        f"servers: {len(taken)} learners at once is this node's capacity. Stop an idle server, or lower "
        "cores_per_learner (QUICK labs run on 1), or add a node (docs/workshop.md, capacity)")


class _Pinned(LoggingConfigurable):
    """The pinning, shared by both spawners: a class-wide table of who holds which cores."""

    cores_per_learner = Integer(2, config=True, help="cores each learner's server gets to itself")
    cores = List(Integer(), config=True, help="the cores learners' servers may take (default: every core but "
                 "the first, which stays with the hub, the proxy and the system)")
    _taken: dict[str, tuple[int, ...]] = {}

    def _pool(self) -> list[int]:
        return list(self.cores) or list(range(1, os.cpu_count() or 1)) or [0]

    def pin(self) -> tuple[int, ...]:
        """Take this user's block of cores (see :func:`allocate`) and put it in the server's environment."""
        block = allocate(_Pinned._taken, self._pool(), self.cores_per_learner, self.user.name)
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
