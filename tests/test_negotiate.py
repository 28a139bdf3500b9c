"""Content negotiation: Accept picks the format (q-values, specificity, */* → JSON), codec= picks the code."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from labkit.errors import BadInputError
from labkit.toyshop.negotiate import NotAcceptable, choose, parse_accept

SCHEMA = ("json", "msgpack", "protobuf")


@pytest.mark.parametrize("accept, want", [
    (None, ("json", "json")),
    ("", ("json", "json")),
    ("*/*", ("json", "json")),
    ("application/*", ("json", "json")),
    ("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", ("json", "json")),
    ("application/msgpack", ("msgpack", "msgpack")),
    ("application/x-msgpack", ("msgpack", "msgpack")),
    ("application/json;q=0.5, application/msgpack", ("msgpack", "msgpack")),
    ("application/json;q=0.5, application/msgpack;q=0.4", ("json", "json")),
    ("application/msgpack;q=0, */*", ("json", "json")),
    ("application/json;q=0, */*;q=0.3", ("msgpack", "msgpack")),
    ("APPLICATION/X-PROTOBUF", ("protobuf", "protobuf")),
    ("application/protobuf;q=1, application/json;q=0.9", ("protobuf", "protobuf")),
    ("garbage, application/msgpack", ("msgpack", "msgpack")),
    ("application/json;q=abc, application/msgpack;q=0.1", ("msgpack", "msgpack")),
])
def test_accept_picks_the_format(accept, want):
    assert choose(accept, SCHEMA) == want


def test_codec_is_an_override_that_accept_chooses_within():
    assert choose("*/*", SCHEMA, codec="orjson") == ("orjson", "json")
    assert choose(None, SCHEMA, codec="msgspec") == ("msgspec", "json")
    assert choose("application/msgpack", SCHEMA, codec="msgspec") == ("msgspec", "msgpack")
    assert choose("*/*", SCHEMA, codec="msgpack") == ("msgpack", "msgpack")
    with pytest.raises(NotAcceptable, match="codec=msgpack produces only msgpack") as e:
        choose("application/json", SCHEMA, codec="msgpack")
    assert e.value.supported == ("application/msgpack",)


def test_the_process_default_codec_is_used_for_the_formats_it_produces():
    assert choose(None, SCHEMA, default_codec="orjson") == ("orjson", "json")
    assert choose("application/msgpack", SCHEMA, default_codec="orjson") == ("msgpack", "msgpack")
    assert choose("application/msgpack", SCHEMA, default_codec="msgspec") == ("msgspec", "msgpack")


def test_schema_bound_formats_only_where_a_schema_exists():
    with pytest.raises(NotAcceptable, match="application/json, application/msgpack") as e:
        choose("application/x-protobuf", ("json", "msgpack"))
    assert "protobuf" not in " ".join(e.value.supported)
    with pytest.raises(BadInputError, match="no schema") as e2:
        choose(None, ("json", "msgpack"), codec="protobuf")
    assert not isinstance(e2.value, NotAcceptable)
    with pytest.raises(BadInputError, match="not served"):
        choose(None, SCHEMA, codec="pickle")


def test_parse_accept_reads_q_values_and_skips_junk():
    assert parse_accept("a/b;q=0.5, c/d ;level=1, x, */*;q=2") == [("a", "b", 0.5), ("c", "d", 1.0)]


@given(st.text(max_size=60), st.sampled_from([None, "json", "orjson", "msgspec", "msgpack"]))
def test_any_accept_header_gives_a_choice_or_a_406(accept, codec):
    try:
        c, f = choose(accept, SCHEMA, codec=codec)
    except NotAcceptable as e:
        assert e.supported
    else:
        assert f in SCHEMA and (codec is None or c == codec)
