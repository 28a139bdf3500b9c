# A benchmark-grade JupyterHub on one large node: `jupyterhub -f workshop/jupyterhub_config.py`
# (docs/workshop.md explains every choice and the capacity arithmetic).
#
# Each learner's server gets cores of its own (workshop/pinned.py: affinity set before the server starts) and no
# CPU quota; memory per learner is stated to the server (MEM_LIMIT, which `labkit doctor` checks) — enforced
# with PERFLAB_HUB_SPAWNER=systemd (below) where systemd runs; the idle culler gives long measurements an hour.
#
# The numbers come from the environment so one file serves the node and the test (tests/test_hub.py):
#   PERFLAB_HUB_CORES_PER_LEARNER  cores per learner (2 for full-size labs, 1 for QUICK)      default 2
#   PERFLAB_HUB_CORES              cores learners may take, e.g. "2-63" (leave some to the hub) default 1..n-1
#   PERFLAB_HUB_MEM_GIB            memory per learner                                         default 2
#   PERFLAB_HUB_CONTACT            whom a learner finding every seat taken should ask   "the workshop's organiser"
#   PERFLAB_CULL_TIMEOUT           seconds of no activity before a server is stopped          default 3600
#   PERFLAB_HUB_GROUP / _LEARNERS / _ADMINS  who may log in: a group, names, admins    perflab / - / -
#   PERFLAB_HUB_IP / _PORT         where the hub listens                                      127.0.0.1:8000
#   PERFLAB_HUB_SPAWNER            "pinned" (system users, PAM: affinity), "systemd" (cpuset:
#                                  AllowedCPUs=, MemoryMax=; where systemd runs) or "simple"
#                                  (demo/test only)                                           default pinned
import os
import sys
from pathlib import Path

c = get_config()  # noqa: F821  (provided by JupyterHub when it loads this file)

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def _cores(spec: str) -> list[int]:
    out: list[int] = []
    for part in filter(None, spec.split(",")):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


PER_LEARNER = int(os.environ.get("PERFLAB_HUB_CORES_PER_LEARNER", "2"))
CORES = _cores(os.environ.get("PERFLAB_HUB_CORES", "")) or list(range(1, os.cpu_count() or 1)) or [0]
MEM_GIB = float(os.environ.get("PERFLAB_HUB_MEM_GIB", "2"))
CULL_TIMEOUT = int(os.environ.get("PERFLAB_CULL_TIMEOUT", "3600"))

c.JupyterHub.ip = os.environ.get("PERFLAB_HUB_IP", "127.0.0.1")
c.JupyterHub.port = int(os.environ.get("PERFLAB_HUB_PORT", "8000"))
c.JupyterHub.hub_ip = "127.0.0.1"
# who may log in (PAM: the node's system users): members of PERFLAB_HUB_GROUP and anyone in PERFLAB_HUB_LEARNERS;
# PERFLAB_HUB_ADMINS (comma-separated) are admins. Without an allow list JupyterHub lets nobody in.
c.Authenticator.allowed_users = set(filter(None, os.environ.get("PERFLAB_HUB_LEARNERS", "").split(",")))
c.Authenticator.admin_users = set(filter(None, os.environ.get("PERFLAB_HUB_ADMINS", "").split(",")))
c.PAMAuthenticator.allowed_groups = {os.environ.get("PERFLAB_HUB_GROUP", "perflab")}

# --- exclusive cores, no quota -----------------------------------------------------------------------------
SPAWNERS = {"pinned": "pinned.PinnedSpawner", "simple": "pinned.PinnedSimpleSpawner",
            "systemd": "pinned_systemd.PinnedSystemdSpawner"}
c.JupyterHub.spawner_class = SPAWNERS[os.environ.get("PERFLAB_HUB_SPAWNER", "pinned")]
c.Spawner.cores_per_learner = PER_LEARNER
c.Spawner.cores = CORES
c.Spawner.contact = os.environ.get("PERFLAB_HUB_CONTACT", "the workshop's organiser")  # named to a learner with no seat

from pinned import capacity, capacity_line  # noqa: E402
from traitlets.config import Application  # noqa: E402

if Application.initialized():  # the hub's log says at start how many learners this node holds (a warning: none)
    _log = Application.instance().log
    (_log.info if capacity(CORES, PER_LEARNER) else _log.warning)(capacity_line(CORES, PER_LEARNER))

c.Spawner.cpu_limit = None  # a CFS quota throttles the bursts the labs measure: exclusive cores instead
c.Spawner.cpu_guarantee = float(PER_LEARNER)  # what the learner has: stated so `labkit doctor --hub` can say so
c.Spawner.mem_limit = f"{int(MEM_GIB * 1024)}M"
c.Spawner.mem_guarantee = f"{int(MEM_GIB * 1024)}M"
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = 60
c.Spawner.http_timeout = 60

# --- long measurements stay alive -------------------------------------------------------------------------
# labkit's long runs print progress at least every 30 s; the server reports activity to the hub every minute,
# and the culler stops a server only after CULL_TIMEOUT seconds of none. The server itself culls nothing.
c.Spawner.environment = {
    "PERFLAB_CULL_TIMEOUT": str(CULL_TIMEOUT),  # read by `labkit doctor --hub`
    # everything labkit writes (records, a dataset built for them, locks, caches) goes to the learner's own
    # folder, beside their copy of the labs; the shared install stays read-only (labkit/paths.py)
    "PERFLAB_HOME": "~/perflab",  # records in ~/perflab/results: `labkit room collect /home`
    # the venv first, and none of the hub's own PATH (a login shell's PATH: /etc/profile.d/perflab.sh, written
    # by `labkit workshop init`)
    "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"]),
    "JUPYTERHUB_ACTIVITY_INTERVAL": os.environ.get("PERFLAB_HUB_ACTIVITY_INTERVAL", "60"),
}
c.Spawner.args = ["--ServerApp.shutdown_no_activity_timeout=0", "--MappingKernelManager.cull_idle_timeout=0"]
if c.JupyterHub.spawner_class == "pinned.PinnedSimpleSpawner" and os.geteuid() == 0:
    c.Spawner.args.append("--ServerApp.allow_root=True")  # the demo spawner runs servers as the hub's user
c.JupyterHub.last_activity_interval = int(os.environ.get("PERFLAB_HUB_ACTIVITY_INTERVAL", "60"))
c.JupyterHub.load_roles = [{"name": "idle-culler", "scopes": ["list:users", "read:users:activity",
                                                               "read:servers", "delete:servers"],
                            "services": ["idle-culler"]}]
c.JupyterHub.services = [{
    "name": "idle-culler",
    "command": [sys.executable, "-m", "jupyterhub_idle_culler", f"--timeout={CULL_TIMEOUT}",
                f"--cull-every={max(CULL_TIMEOUT // 12, 1)}"],
}]

# --- where systemd runs: PERFLAB_HUB_SPAWNER=systemd (pip install jupyterhub-systemdspawner) ----------------
# workshop/pinned_systemd.py: the same blocks of cores, given as AllowedCPUs= (a cpuset the learner cannot widen),
# mem_limit enforced as MemoryMax=, no CPUQuota=. Its unit properties are tested here; systemd itself is not
# (docs/workshop.md says what to check on the node).
