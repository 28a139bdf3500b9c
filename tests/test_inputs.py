"""The shared argument checks and the one loopback rule: every package that sends a request applies it alike."""

from __future__ import annotations

import pytest

from labkit.client import Endpoint
from labkit.errors import BadInputError
from labkit.inputs import function, integer, loopback_url, number
from labkit.load._options import parse_target
from labkit.queueing import StatsSampler

LOCAL = ["http://127.0.0.1:8000/", "http://127.0.0.2:8000/", "http://127.8.9.10:8000/x?y=1",
         "http://localhost:8000", "http://[::1]:8000/"]
REMOTE = ["http://10.0.0.1:8000/", "http://192.168.1.5:8000/", "http://example.com:8000/",
          "http://[2001:db8::1]:8000/", "http://128.0.0.1:8000/", "http://0.0.0.0:8000/"]
# every place that takes a URL to send requests to, each with the one rule
CHECKS = {
    "loopback_url": lambda url: loopback_url(url, "test"),
    "labkit.load": parse_target,
    "Endpoint": Endpoint,
    "StatsSampler": StatsSampler,
}


@pytest.mark.parametrize("check", CHECKS.values(), ids=CHECKS.keys())
@pytest.mark.parametrize("url", LOCAL)
def test_all_of_127_0_0_0_slash_8_and_ipv6_and_localhost_are_loopback(check, url):
    check(url)   # no error: 127.0.0.2 is as local as 127.0.0.1


@pytest.mark.parametrize("check", CHECKS.values(), ids=CHECKS.keys())
@pytest.mark.parametrize("url", [*REMOTE, "https://127.0.0.1:8000/", "ftp://127.0.0.1:21/"])
def test_anything_else_is_refused_everywhere_with_the_fix(check, url):
    with pytest.raises(BadInputError, match="loopback|http://"):
        check(url)


def test_a_loopback_url_names_where_to_connect():
    assert loopback_url("http://localhost:8000/a?b=1", "t") == ("127.0.0.1", 8000, "localhost:8000", "/a?b=1")
    assert loopback_url("http://[::1]:9/", "t").host == "::1"
    assert loopback_url("http://127.0.0.1/", "t", default_port=80).port == 80
    with pytest.raises(BadInputError, match="names no port"):
        loopback_url("http://127.0.0.1/", "Endpoint")
    with pytest.raises(BadInputError, match="Endpoint.*not a loopback address.*Service.url"):
        loopback_url("http://10.0.0.1:80/", "Endpoint")


@pytest.mark.parametrize(("call", "match"), [
    (lambda: integer(0, "rounds"), r"rounds must be an integer ≥ 1, got 0"),
    (lambda: integer(True, "rounds"), r"got True"),
    (lambda: integer(2.0, "rounds"), r"got 2\.0"),
    (lambda: integer(11, "n", low=0, high=10, hint="e.g. n=5"), r"n must be an integer 0–10, got 11; e\.g\. n=5"),
    (lambda: number(0, "rate"), r"rate must be a finite number > 0, got 0"),
    (lambda: number(float("nan"), "rate"), r"got nan"),
    (lambda: number(-1, "warmup_s", low_ok=True, unit="seconds"), r"warmup_s must be a finite number ≥ 0 seconds"),
    (lambda: number(700, "d", low=0.2, high=600, low_ok=True), r"d must be a finite number from 0\.2 to 600"),
    (lambda: function(3, "fn"), r"fn must be a callable, got int 3 — did you call it"),
])
def test_checks_name_the_argument_what_it_got_and_the_fix(call, match):
    with pytest.raises(BadInputError, match=match):
        call()


def test_checks_return_the_value_converted():
    import numpy as np

    assert integer(np.int64(3), "n") == 3 and type(integer(np.int64(3), "n")) is int
    assert number(1, "x") == 1.0 and type(number(1, "x")) is float
    assert number(0, "x", low_ok=True) == 0.0
    assert function(len, "fn") is len
