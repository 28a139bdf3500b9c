"""workshop/z2jh-values.yaml as zero-to-jupyterhub chart 4.4.0 reads it, offline: merged over the chart's defaults
and validated against its values schema the way Helm does (both vendored unchanged in workshop/z2jh/), then the
learner's pod rendered the way the chart's hub config and KubeSpawner 7.0.0 build it, for the parts that matter
(image, command, volumes and mounts, resources, security context, environment, start hook). No Helm, no cluster:
what only a cluster shows (exclusive cores, the volume's first start, py-spy's permissions) is in docs/workshop.md."""

from __future__ import annotations

import copy
import re
import subprocess
from pathlib import Path

import jsonschema  # the test extra installs both (pyproject.toml)
import yaml

ROOT = Path(__file__).resolve().parents[1]
VENDORED = ROOT / "workshop" / "z2jh"
CHART = {"version": "4.4.0", "hub": "5.5.0",
         "blobs": {"values.schema.yaml": "bf546f66e82ad9dfcf22e49c3213dd12e3e672dd",
                   "values.yaml": "9b86ffdcc70d2a164d47344d0b21dcc7980081df"}}


def _load(path: Path):
    return yaml.safe_load(path.read_text())


def coalesce(defaults: dict, user: dict) -> dict:
    """Helm's merge of user values over a chart's: maps merge key by key, anything else replaces."""
    out = copy.deepcopy(defaults)
    for k, v in user.items():
        out[k] = coalesce(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
    return out


def errors(values: dict) -> list[str]:
    schema = _load(VENDORED / "values.schema.yaml")
    merged = coalesce(_load(VENDORED / "values.yaml"), values)
    return sorted(f"{'.'.join(map(str, e.path)) or '(top)'}: {e.message}"
                  for e in jsonschema.Draft7Validator(schema).iter_errors(merged))


def _bytes(s) -> int | None:
    if s is None:
        return None
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGT]?)", str(s))
    return int(float(m.group(1)) * 1024 ** " KMGT".index(m.group(2) or " "))


def render_pod(values: dict, user: str = "ada") -> dict:
    """The notebook container and pod volumes as chart 4.4.0's hub config (files/hub/jupyterhub_config.py: singleuser.*
    to KubeSpawner traits, then hub.config.* over them) and KubeSpawner 7.0.0's make_pod build them."""
    v = coalesce(_load(VENDORED / "values.yaml"), values)
    su = v["singleuser"]
    ks = {"image": f"{su['image']['name']}:{su['image']['tag']}", "cmd": su["cmd"], "uid": su["uid"],
          "fs_gid": su["fsGid"], "allow_privilege_escalation": su["allowPrivilegeEscalation"],
          "environment": su["extraEnv"], "lifecycle_hooks": su["lifecycleHooks"], "working_dir": None,
          "cpu_limit": su["cpu"]["limit"], "cpu_guarantee": su["cpu"]["guarantee"],
          "mem_limit": su["memory"]["limit"], "mem_guarantee": su["memory"]["guarantee"],
          "container_security_context": {}, "extra_container_config": {}, "init_containers": []}
    if su["cloudMetadata"]["blockWithIptables"]:
        ks["init_containers"].append({"name": "block-cloud-metadata", "resources": su["networkTools"]["resources"]})
    vol = su["storage"]["dynamic"]["volumeNameTemplate"].format(user_server=user)
    assert su["storage"]["type"] == "dynamic"
    ks["volumes"] = [{"name": vol, "persistentVolumeClaim": {"claimName": f"claim-{user}"}}]
    ks["volume_mounts"] = [{"mountPath": su["storage"]["homeMountPath"], "name": vol}]
    ks.update(v["hub"]["config"].get("KubeSpawner", {}))
    cmd = ks["cmd"] if isinstance(ks["cmd"], list) else [ks["cmd"]]
    sc = {"runAsUser": ks["uid"], "allowPrivilegeEscalation": ks["allow_privilege_escalation"],
          **ks["container_security_context"]}
    res = {"limits": {}, "requests": {}}
    for key, trait, conv in (("cpu", "cpu", float), ("memory", "mem", _bytes)):
        if ks[f"{trait}_limit"] is not None:
            res["limits"][key] = conv(ks[f"{trait}_limit"])
        if ks[f"{trait}_guarantee"] is not None:
            res["requests"][key] = conv(ks[f"{trait}_guarantee"])
    container = {"name": "notebook", "image": ks["image"], "args": cmd, "workingDir": ks["working_dir"],
                 "env": dict(ks["environment"]), "volumeMounts": ks["volume_mounts"], "resources": res,
                 "securityContext": sc, "lifecycle": ks["lifecycle_hooks"], **ks["extra_container_config"]}
    return {"containers": [container], "initContainers": ks["init_containers"], "volumes": ks["volumes"],
            "securityContext": {"fsGroup": ks["fs_gid"]}, "hub": v["hub"]["config"]}


VALUES = _load(ROOT / "workshop" / "z2jh-values.yaml")


def test_the_vendored_chart_files_are_upstreams_unchanged():
    for name, blob in CHART["blobs"].items():
        got = subprocess.run(["git", "hash-object", str(VENDORED / name)], capture_output=True, text=True,
                             check=True).stdout.strip()
        assert got == blob, f"workshop/z2jh/{name} differs from chart {CHART['version']}'s: copy it again"
    note = (VENDORED / "README.md").read_text()
    assert f"tag `{CHART['version']}`" in note and all(b in note for b in CHART["blobs"].values())


def test_the_schema_catches_what_helm_would_refuse():
    # a key the chart does not have, and a wrong type: Helm refuses both (the old file had the first)
    assert any("extraContainerConfig" in e for e in errors({"singleuser": {"extraContainerConfig": {}}}))
    assert any(e.startswith("cull.timeout") for e in errors({"cull": {"timeout": "3600"}}))
    assert errors({}) == []


def test_the_values_pass_the_charts_schema():
    assert errors(VALUES) == []


def test_the_docs_pin_the_chart_and_the_image_runs_its_hubs_version():
    docs = (ROOT / "docs" / "workshop.md").read_text()
    assert f"--version {CHART['version']}" in docs and f"--version {CHART['version']}" in (
        ROOT / "workshop" / "z2jh-values.yaml").read_text()
    assert f"jupyterhub=={CHART['hub']}" in (ROOT / "binder" / "environment.yml").read_text(), \
        f"the image's jupyterhub must be chart {CHART['version']}'s hub version, {CHART['hub']}"


def test_a_login_is_needed_and_the_organiser_is_admin():
    from jupyterhub.authenticators.shared import SharedPasswordAuthenticator
    from traitlets.config import Config

    hub = render_pod(VALUES)["hub"]
    assert hub["JupyterHub"]["authenticator_class"] == "shared-password"
    assert "user_password" not in hub["SharedPasswordAuthenticator"], "passwords go in --set-string, not the file"
    # GIVEN the values' authenticator config plus the passwords the install command sets
    c = Config({k: dict(v) for k, v in hub.items() if k != "JupyterHub"})
    c.SharedPasswordAuthenticator.user_password = "room-pass-1"
    c.SharedPasswordAuthenticator.admin_password = "o" * 32
    auth = SharedPasswordAuthenticator(config=c)
    import asyncio

    def login(name, pw):
        return asyncio.run(auth.get_authenticated_user(None, {"username": name, "password": pw}))

    # THEN a learner with the room password gets in, a wrong password does not, and the organiser is admin
    assert login("ada", "room-pass-1")["name"] == "ada"
    assert login("ada", "guess") is None
    assert login("organiser", "o" * 32)["admin"] is True
    assert login("organiser", "room-pass-1") is None  # an admin name needs the admin password


def test_the_pod_gets_guaranteed_integer_cores_the_image_and_its_command():
    pod = render_pod(VALUES)
    nb = pod["containers"][0]
    assert nb["resources"]["requests"] == nb["resources"]["limits"] == {"cpu": 2.0, "memory": 2 * 2**30}
    assert float(nb["resources"]["limits"]["cpu"]).is_integer()
    for c in pod["initContainers"]:  # every container must be Guaranteed for the pod to be
        assert c["resources"].get("requests") and c["resources"]["requests"] == c["resources"].get("limits")
    assert nb["image"] == "registry.example.org/perflab:0.1.0"
    assert nb["args"][0] == "jupyterhub-singleuser" and "--MappingKernelManager.cull_idle_timeout=0" in nb["args"]
    assert nb["env"]["PERFLAB_CULL_TIMEOUT"] == "3600" and nb["env"]["PERFLAB_HOME"].startswith("/home/jovyan/")


def test_the_home_volume_hides_nothing_the_image_needs_and_the_labs_reach_it():
    nb = render_pod(VALUES)["containers"][0]
    mounts = [m["mountPath"] for m in nb["volumeMounts"]]
    assert mounts == ["/home/jovyan"]
    text = (ROOT / "workshop" / "z2jh-values.yaml").read_text()
    repo = "/srv/perflab"
    assert f"--target-repo-dir {repo}" in text and f"--target-repo-dir {repo}" in (
        ROOT / "docs" / "workshop.md").read_text(), "the image must keep the repository out of the home volume"
    assert not any(repo == m or repo.startswith(m + "/") for m in mounts)
    assert nb["workingDir"] == "/home/jovyan"  # the server's root is the volume, not the image's WORKDIR
    hook = " ".join(nb["lifecycle"]["postStart"]["exec"]["command"])
    assert f"-C {repo}/notebooks --exclude=./instructor" in hook and "--skip-old-files" in hook


def test_no_capability_is_claimed_for_a_non_root_learner():
    # Kubernetes gives a non-root container's processes no effective capabilities: SYS_PTRACE would do nothing
    nb = render_pod(VALUES)["containers"][0]
    assert nb["securityContext"] == {"runAsUser": 1000, "allowPrivilegeEscalation": False}
    assert "ptrace_scope" in (ROOT / "workshop" / "z2jh-values.yaml").read_text()


def test_the_old_values_fail():
    old = {"singleuser": {"extraContainerConfig": {"securityContext": {"capabilities": {"add": ["SYS_PTRACE"]}}}}}
    assert errors(old)
    assert render_pod({})["hub"]["JupyterHub"]["authenticator_class"] == "dummy"  # the chart's own default
