"""toyshop's one table of switches: what reads it (checks, start-up, presets, the core's view, /openapi.json) agrees
with it, and the reference page for users is the table."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest

with warnings.catch_warnings():  # Starlette 1.x nudges towards httpx2; httpx still works for TestClient
    warnings.filterwarnings("ignore", message="Using `httpx`")
    from starlette.testclient import TestClient

from labkit.errors import BadInputError
from labkit.toyshop.app import create_app
from labkit.toyshop.catalog import FakeCatalog
from labkit.toyshop.core import VARIANTS
from labkit.toyshop.dataset import ensure
from labkit.toyshop.switches import PRESETS, REQUEST_SWITCHES, SWITCHES, TABLE, check, reference_page, resolve

ROOT = Path(__file__).resolve().parents[1]


def test_reference_page_is_the_table():
    page = ROOT / "docs" / "switches.md"
    assert page.read_text(encoding="utf-8") == reference_page(), (
        "docs/switches.md differs from the switch table; regenerate it: "
        ".venv/bin/python -m labkit.toyshop.switches > docs/switches.md")
    for s in TABLE:  # each switch has its row, with its default and its lesson's notebook
        assert f"| `{s.name}` |" in page.read_text(encoding="utf-8")
        assert (ROOT / "notebooks" / f"{s.lesson}.ipynb").is_file(), s


def test_every_switch_has_a_scope_a_default_among_its_values_and_one_line():
    for s in TABLE:
        assert s.scope in ("request", "process") and s.does and "\n" not in s.does
        assert check(s.name, s.default, SWITCHES, "toyshop's") == s.default
        if s.range is not None:
            # an integer switch's default is in its range, or one of the named values it takes beside (queue)
            assert s.default in s.values if s.values else s.range[0] <= s.default <= s.range[1]
            assert s.scope == "process"  # a query parameter is a string of an enum: request switches are choices
        else:
            assert s.default == s.values[0] and len(set(s.values)) == len(s.values)


def test_presets_set_request_switches_only_to_their_allowed_values():
    assert SWITCHES["preset"].values == ("none", *PRESETS)
    for preset in PRESETS.values():
        for name, value in preset.items():
            assert name != "preset" and SWITCHES[name].scope == "request" and check(name, value) == value


def test_the_core_view_is_the_switches_marked_core_and_imports_no_service():
    assert dict(VARIANTS) == {s.name: s.values for s in TABLE if s.core}
    assert set(VARIANTS) <= set(REQUEST_SWITCHES)
    code = ("import sys, labkit.toyshop.core as core; core.check_variant('layout', 'soa'); "
            "bad = [m for m in sys.modules if m.startswith(('starlette', 'uvicorn', 'labkit.toyshop.app', "
            "'labkit.toyshop.state', 'labkit.service'))]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=60)


def test_start_up_fills_every_default_and_checks_each_kind_of_switch():
    assert resolve() == {s.name: s.default for s in TABLE}
    assert list(resolve()) == [s.name for s in TABLE]  # the order X-Variant and /health list them in
    assert resolve({"pool": "3", "queue": 2, "gc": "tuned"})["pool"] == 3
    assert resolve({"alloc": "census"})["pool"] == 1  # the census serves one request at a time
    # queue names what it means: unbounded (the default) or at most N waiting, 0 included
    assert resolve()["queue"] == "unbounded" and resolve({"queue": "0"})["queue"] == 0
    assert resolve({"queue": "unbounded"})["queue"] == "unbounded"
    for bad, says in [({"pool": 0}, "pool=0: must be an integer 1–1024, default 40"),
                      ({"pool": True}, "pool=True"), ({"queue": "-1"}, "queue='-1': must be unbounded, or an integer 0–1000000, default unbounded"),
                      ({"gc": "x"}, "use one of default, frozen, threshold, tuned (default 'default')"),
                      ({"n1": "x"}, "use one of naive, batched, join (default 'naive')"),
                      ({"nplus1": "join"}, "unknown variant switch 'nplus1'; toyshop's switches are n1, io")]:
        with pytest.raises(BadInputError, match=says.replace("(", r"\(").replace(")", r"\)")):
            resolve(bad)
    with pytest.raises(BadInputError, match="unknown variant switch 'pool'; per-request switches are n1"):
        check("pool", "2")  # a process switch is not a query parameter


def test_openapi_lists_every_switch_with_its_values():
    with TestClient(create_app(ensure("small", quiet=True), FakeCatalog({}))) as c:
        schema = c.get("/openapi.json").json()
    health = schema["paths"]["/health"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    listed = health["properties"]["variants"]["properties"]
    assert list(listed) == [s.name for s in TABLE]
    for s in TABLE:
        if s.range is None:
            assert listed[s.name]["enum"] == list(s.values) and listed[s.name]["default"] == s.default
        elif s.values:  # named values beside the integers (queue: unbounded, or N)
            named, number = listed[s.name]["oneOf"]
            assert named["enum"] == list(s.values) and listed[s.name]["default"] == s.default
            assert (number["type"], number["minimum"], number["maximum"]) == ("integer", *s.range)
        else:
            assert (listed[s.name]["minimum"], listed[s.name]["maximum"], listed[s.name]["default"]) == (
                *s.range, s.default)
    for path in ("/health", "/customers/{customer_id}/export", "/orders/{order_id}", "/quote", "/config/{key}",
                 "/statement"):
        params = {p["name"]: p for p in schema["paths"][path]["get"]["parameters"] if p["in"] == "query"}
        for name, values in REQUEST_SWITCHES.items():
            assert params[name]["schema"]["enum"] == list(values), (path, name)
            assert SWITCHES[name].does in params[name]["description"]


def _reads() -> dict[str, set[str]]:
    """Which module of labkit/toyshop reads each switch: a string constant equal to the switch's name used as a
    subscript key (``sw["n1"]``, ``settings["pool"]``) or as the first argument of ``check_variant`` or ``.get``
    (``check_variant("layout", layout)``, ``variants.get("gc")``) — every way the service reads a switch's value
    today. switches.py (the table itself) and the generated protobuf module are left out."""
    import ast

    names, found = set(SWITCHES), {}
    base = ROOT / "labkit" / "toyshop"
    for path in sorted(base.rglob("*.py")):
        if path.name == "switches.py" or "proto" in path.parts:
            continue
        module = ".".join(path.relative_to(base).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text())):
            key = None
            if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
                key = node.slice.value
            elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
                f = node.func
                if (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")) in ("check_variant", "get"):
                    key = node.args[0].value
            if isinstance(key, str) and key in names:
                found.setdefault(key, set()).add(module)
    return found


def test_each_switch_names_the_modules_that_read_it_and_no_other_module_does():
    reads = _reads()
    for s in TABLE:
        # THEN every module the row names reads the switch, and no module it does not name does
        assert s.acts_in, f"switch {s.name!r} names no module that reads it (acts_in=)"
        assert set(s.acts_in) == reads.get(s.name, set()), (
            f"switch {s.name!r}: its row says it is read in {sorted(s.acts_in)}, the code reads it in "
            f"{sorted(reads.get(s.name, set()))}: correct acts_in in labkit/toyshop/switches.py")
        for module in s.acts_in:
            assert (ROOT / "labkit" / "toyshop" / f"{module.replace('.', '/')}.py").is_file(), module
