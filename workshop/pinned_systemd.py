"""SystemdSpawner with each learner's cores given as a cpuset (``AllowedCPUs=``), which no process can widen.

:class:`pinned.PinnedSpawner` sets an affinity mask, which any process of the learner's may widen again; where
systemd runs the hub, this spawner takes the same block of cores (:func:`pinned.allocate`, same table) and asks
systemd for a transient unit with ``AllowedCPUs=`` (a cgroup v2 cpuset: systemd ≥ 244 with the cpuset controller),
``MemoryMax=`` from ``mem_limit`` and no ``CPUQuota=`` (``cpu_limit`` stays unset).

What is tested here, on a machine without systemd (tests/test_workshop.py): the config selects this class and
it imports; the unit properties it hands to ``systemd-run`` for two learners (disjoint ``AllowedCPUs=``,
``MemoryMax=``, no ``CPUQuota=``); that a full node refuses the next learner and a stopped server frees its
cores. What is not: that systemd starts the unit and the kernel enforces the cpuset — check that on the node
with ``systemctl show jupyter-ada-singleuser -p AllowedCPUs -p MemoryMax`` and ``labkit doctor --hub`` in a
learner's terminal (its "pinned cores" line reads the cgroup's cpuset).
"""

from __future__ import annotations

from pinned import _Pinned
from systemdspawner import SystemdSpawner

__all__ = ["PinnedSystemdSpawner", "unit_properties"]


def unit_properties(block: tuple[int, ...]) -> dict[str, str]:
    """The systemd unit properties that give a server the cores ``block`` to itself."""
    return {"AllowedCPUs": ",".join(map(str, block))}


class PinnedSystemdSpawner(_Pinned, SystemdSpawner):
    """SystemdSpawner (one transient unit per learner) with exclusive cores as a cpuset, no CPU quota."""

    def pin(self) -> tuple[int, ...]:
        block = super().pin()
        self.unit_extra_properties = {**self.unit_extra_properties, **unit_properties(block)}
        return block

    def load_state(self, state):  # type: ignore[no-untyped-def]
        # a hub restarted while units ran: they keep their cores (SystemdSpawner's state names the unit, no pid)
        SystemdSpawner.load_state(self, state)
        if state.get("cores") and state.get("unit_name"):
            _Pinned._taken[self.user.name] = tuple(state["cores"])
