"""toyshop under a fuzzer no one here wrote: schemathesis, driven by the service's own ``/openapi.json``.

Every operation of a running toyshop (``labkit.service.start``: the real order service and catalog processes)
gets a few dozen generated requests, valid ones and invalid ones, and every response is checked for a server
error (5xx: a 502 would mean the catalog failed, a 500 a bug), a status code the schema does not list, a body
that does not match its schema, and a Content-Type the schema does not declare. Path ids are drawn half the
time from the dataset (customers, orders, config keys), so the 200 answers of ``/config/{key}`` and the
exports are checked too, not only their 404s.
"""

from __future__ import annotations

import pytest

schemathesis = pytest.importorskip("schemathesis", reason="pip install -e '.[test]' (schemathesis)")

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.core.failures import Failure, FailureGroup  # noqa: E402
from schemathesis.generation import GenerationMode  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from labkit.service import start  # noqa: E402
from labkit.toyshop.dataset import LADDER, config_key  # noqa: E402
from labkit.toyshop.db import connect  # noqa: E402

pytestmark = pytest.mark.slow

CHECKS = [not_a_server_error, status_code_conformance, response_schema_conformance, content_type_conformance]
EXAMPLES = 40  # per operation and generation mode: 9 operations × 2 modes × 40 ≈ 700 requests, ~10 s


@pytest.fixture(scope="module")
def service():
    with start(size="small") as svc:
        yield svc


def _real_ids(db_path) -> dict[str, list]:
    conn = connect(db_path)
    try:
        orders = [r[0] for r in conn.execute("SELECT id FROM orders ORDER BY id LIMIT 50")]
    finally:
        conn.close()
    return {"customer_id": [*LADDER, 10, 150, 300], "order_id": orders, "key": [config_key(i) for i in range(20)]}


def test_every_operation_conforms_to_the_schema_and_never_errs(service):
    schema = schemathesis.openapi.from_url(f"{service.url}/openapi.json")
    real = _real_ids(service.db_path)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {op.path for op in operations} >= {"/health", "/customers/{customer_id}/export", "/orders/{order_id}",
                                              "/quote", "/config/{key}", "/statement", "/stats", "/cache"}
    failures: list[str] = []
    reached: dict[str, set[int]] = {}

    def fuzz(op, mode):
        strategy = op.as_strategy(generation_mode=mode)

        @given(data=st.data())
        @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                  phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
        def run(data):
            case = data.draw(strategy)
            for name in case.path_parameters or {}:
                if mode is GenerationMode.POSITIVE and name in real and data.draw(st.booleans()):
                    case.path_parameters[name] = data.draw(st.sampled_from(real[name]))
            response = case.call(base_url=service.url, timeout=30)
            reached.setdefault(op.path, set()).add(response.status_code)
            try:
                case.validate_response(response, checks=CHECKS)
            except (Failure, FailureGroup) as exc:  # keep going: report every finding at the end
                failures.append(f"{op.method.upper()} {op.path} ({mode.value}): {exc}"[:1500])

        try:
            run()
        except Unsatisfiable:  # an operation without parameters has no invalid request to make
            assert mode is GenerationMode.NEGATIVE, op.path

    for op in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            fuzz(op, mode)
    assert not failures, f"{len(failures)} findings:\n" + "\n\n".join(failures[:8])
    # THEN the realistic ids reached the answers behind the 404s
    for path in ("/customers/{customer_id}/export", "/orders/{order_id}", "/config/{key}"):
        assert 200 in reached[path] and 404 in reached[path], (path, reached[path])
    assert 400 in reached["/quote"] and 400 in reached["/config/{key}"], reached  # the invalid requests, refused
