"""Content negotiation: Accept picks the format (q-values, specificity, */* → JSON), codec= picks the code."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from labkit.errors import BadInputError
from labkit.toyshop.negotiate import NotAcceptable, choose, choose_coding, parse_accept, parse_accept_encoding

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


@pytest.mark.parametrize("accept_encoding, requested, want", [
    (None, "gzip", "none"),                          # the client named no coding: never guess one
    (None, "zstd", "none"),
    ("", "gzip", "none"),                            # empty: no content coding wanted (RFC 9110 §12.5.3)
    ("identity", "gzip", "none"),
    ("gzip, deflate", "zstd", "none"),               # httpx's default header: zstd not accepted
    ("gzip, deflate", "gzip", "gzip"),
    ("gzip, deflate", "none", "none"),               # the switch off: nothing compressed
    ("zstd", "zstd", "zstd"),
    ("x-gzip", "gzip", "gzip"),                      # §8.4.1.3
    ("GZIP;q=0.5", "gzip", "gzip"),
    ("gzip;q=0", "gzip", "none"),                    # refused
    ("*", "zstd", "zstd"),
    ("*;q=0.1, zstd;q=0", "zstd", "none"),           # the specific entry wins over *
    ("gzip;q=abc", "gzip", "none"),                  # a q that does not parse: entry skipped
    ("identity;q=0, gzip", "none", "gzip"),          # identity refused: the client's coding, switch off or not
    ("identity;q=0, gzip;q=0.4, zstd;q=0.8", "none", "zstd"),
    ("identity;q=0, gzip, zstd", "none", "gzip"),    # tie: gzip
    ("identity;q=0, gzip", "zstd", "gzip"),
    ("*;q=0, zstd", "gzip", "zstd"),                 # * refuses identity too
    ("*;q=0, identity", "gzip", "none"),
])
def test_accept_encoding_picks_the_coding(accept_encoding, requested, want):
    assert choose_coding(accept_encoding, requested) == want


@pytest.mark.parametrize("accept_encoding", ["identity;q=0", "*;q=0", "br, identity;q=0", "identity;q=0, gzip;q=0"])
def test_a_client_refusing_identity_and_every_coding_gets_406(accept_encoding):
    with pytest.raises(NotAcceptable) as err:
        choose_coding(accept_encoding, "gzip")
    assert err.value.supported == ("identity", "gzip", "zstd") and "refuses identity" in str(err.value)


def test_parse_accept_encoding_reads_q_values_and_skips_junk():
    assert parse_accept_encoding("gzip;q=0.5, x-gzip, br;q=2, ,zstd ; Q=0.25, a b, *;q=0") == {
        "gzip": 0.5, "zstd": 0.25, "*": 0.0}


@given(st.one_of(st.none(), st.text(max_size=60)), st.sampled_from(["none", "gzip", "zstd"]))
def test_any_accept_encoding_gives_an_accepted_coding_or_a_406(header, requested):
    try:
        got = choose_coding(header, requested)
    except NotAcceptable:
        return
    if got != "none":  # a coding is sent only to a client that accepts it
        weights = parse_accept_encoding(header)
        assert weights.get(got, weights.get("*", 0.0)) > 0
