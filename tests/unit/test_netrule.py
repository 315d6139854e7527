"""roost.core.netrule: entry grammar, destination matching and coverage (the spawn and peer-fetch tables)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roost.core.envelope import Envelope, violation
from roost.core.netrule import NetworkAllowRule, Target, allows, covers

R = NetworkAllowRule


def rule(entry: str) -> NetworkAllowRule:
    parsed = R.parse(entry)
    assert parsed is not None, entry
    return parsed


def envelope_covers(parent_entries: list[str], child_entry: str) -> bool:
    """The spawn envelope's network axis: some valid parent entry covers the (valid) child entry."""
    parent, child = Envelope(network_allow=tuple(parent_entries)), Envelope(network_allow=(child_entry,))
    return violation(parent, child) is None


# ---- parse -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ("example.com", R(None, "example.com", None, False)),
        ("  Example.COM \n", R(None, "example.com", None, False)),
        ("example.com:8443", R(None, "example.com", 8443, True)),
        ("localhost:1", R(None, "localhost", 1, True)),
        ("localhost:65535", R(None, "localhost", 65535, True)),
        ("127.0.0.1", R(None, "127.0.0.1", None, False)),
        ("[::1]", R(None, "[::1]", None, False)),
        ("[::1]:8080", R(None, "[::1]", 8080, True)),
        ("https://example.com", R("https", "example.com", 443, False)),
        ("https://example.com/", R("https", "example.com", 443, False)),
        ("http://example.com", R("http", "example.com", 80, False)),
        ("HTTP://Example.com", R("http", "example.com", 80, False)),
        ("https://EXAMPLE.com", R("https", "example.com", 443, False)),
        ("https://example.com:443", R("https", "example.com", 443, True)),
        ("https://example.com:8443/", R("https", "example.com", 8443, True)),
        ("http://[::1]:8080", R("http", "[::1]", 8080, True)),
        ("http://my_host-1.internal", R("http", "my_host-1.internal", 80, False)),
    ],
)
def test_parse_valid(entry: str, expected: NetworkAllowRule) -> None:
    assert R.parse(entry) == expected


@pytest.mark.parametrize(
    "entry",
    [
        "",
        "   ",
        "ftp://example.com",
        "file:///etc/passwd",
        "ws://example.com",
        "https://",
        "https:///path",
        "://example.com",
        "https://example.com/path",
        "https://example.com//",
        "https://example.com?",
        "https://example.com?q=1",
        "https://example.com#",
        "https://example.com#frag",
        "https://example.com/?q",
        "https://user@example.com",
        "https://user:pw@example.com",
        "https://example.com:",
        "https://example.com:0",
        "https://example.com:65536",
        "https://example.com:99999",
        "https://example.com:8a",
        "https://example.com:-1",
        "https://exa mple.com",
        "example.com/",
        "example.com/path",
        "example.com:",
        "example.com:0",
        "example.com:65536",
        "example.com:123456",
        "example.com:+80",
        "example.com:80:90",
        "::1",
        "[::1",
        "[::1]x",
        "*.example.com",
        "exämple.com",
        "example..com",
        ".example.com",
        "example.com?x",
        "http:example.com",
    ],
)
def test_parse_invalid(entry: str) -> None:
    assert R.parse(entry) is None


@pytest.mark.parametrize("entry", ["example.com", "example.com:8443", "https://example.com", "http://h:81"])
def test_str_round_trips(entry: str) -> None:
    r = rule(entry)
    assert R.parse(str(r)) is not None
    assert rule(str(r)).covers(r) and r.covers(rule(str(r)))


# ---- coverage tables -------------------------------------------------------------------------

# (ceiling, candidate, covered) — upstream's pinned coverage cases, spawn and peer fetch alike.
PINNED = [
    ("example.com", "https://example.com", True),
    ("https://example.com", "example.com", False),
    ("example.com", "example.com", True),
    ("https://example.com", "https://example.com", True),
    ("https://example.com", "http://example.com", False),
    ("example.com:8443", "example.com:8443", True),
    ("example.com:8443", "example.com:9000", False),
    ("example.com", "other.example.com", False),
]


@pytest.mark.parametrize(("parent", "child", "covered"), PINNED)
def test_pinned_coverage(parent: str, child: str, covered: bool) -> None:
    assert covers(rule(parent), rule(child)) is covered
    assert envelope_covers([parent], child) is covered


@pytest.mark.parametrize(("parent", "child", "covered"), PINNED)
def test_pinned_coverage_reversed(parent: str, child: str, covered: bool) -> None:
    """The reverse direction: equal entries cover both ways, otherwise coverage is one-way at most."""
    reverse = covers(rule(child), rule(parent))
    if parent == child:
        assert reverse
    elif rule(parent).host != rule(child).host:
        assert not reverse
    elif covered:
        assert not reverse  # strictly wider parent
    # ("https", "http") and (8443, 9000) are refused both ways:
    if (parent, child) in {
        ("https://example.com", "http://example.com"),
        ("example.com:8443", "example.com:9000"),
    }:
        assert not reverse
    if (parent, child) == ("https://example.com", "example.com"):
        assert reverse  # bare covers scheme-bound


@pytest.mark.parametrize(
    ("parent", "child", "covered"),
    [
        ("example.com", "example.com:8443", True),
        ("example.com", "http://example.com:8080", True),
        ("example.com:443", "https://example.com", True),
        ("example.com:443", "http://example.com", False),
        ("example.com:80", "http://example.com", True),
        ("example.com:443", "example.com", False),
        ("https://example.com", "https://example.com:443", True),
        ("https://example.com:443", "https://example.com", True),
        ("https://example.com", "https://example.com:8443", False),
        ("https://example.com", "example.com:443", False),
        ("EXAMPLE.com", "https://example.COM/", True),
        ("localhost", "127.0.0.1", False),
        ("example.com", "example.com.", False),
        ("sub.example.com", "example.com", False),
    ],
)
def test_more_coverage(parent: str, child: str, covered: bool) -> None:
    assert covers(rule(parent), rule(child)) is covered


def test_envelope_coverage_of_invalid_entries() -> None:
    assert not envelope_covers(["example.com"], "example.com/path")  # invalid child is uncovered
    assert not envelope_covers(["example.com/path"], "example.com/path")
    assert not envelope_covers(["ftp://example.com", "*"], "example.com")  # invalid parents grant nothing
    assert envelope_covers(["garbage entry", "example.com"], "https://example.com")
    assert not envelope_covers([], "example.com")


# ---- destination matching ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("localhost:41234", Target("http", "localhost", 41234)),
        ("LocalHost", Target("http", "localhost", 80)),
        ("https://Peer.Internal/path?q=1#f", Target("https", "peer.internal", 443)),
        ("HTTPS://peer:8443", Target("https", "peer", 8443)),
        ("http://[::1]:9/", Target("http", "[::1]", 9)),
        ("http://peer/a/b?next=/c#d/e", Target("http", "peer", 80)),
        ("http://peer/x?u=https://evil.example", Target("http", "peer", 80)),
        ("http://XPEER:81", Target("http", "xpeer", 81)),
    ],
)
def test_target_parse(url: str, expected: Target) -> None:
    assert Target.parse(url) == expected


@pytest.mark.parametrize("url", ["", "ftp://x", "http://", "http://user@x", "x:0", "x:70000", "http://a b", "://x"])
def test_target_parse_invalid(url: str) -> None:
    assert Target.parse(url) is None


@pytest.mark.parametrize(
    ("entries", "url", "ok"),
    [
        (["localhost:41234"], "http://localhost:41234", True),
        (["localhost:41234"], "https://localhost:41234", True),
        (["localhost:41234"], "localhost:41235", False),
        (["localhost"], "localhost:9999", True),
        (["localhost"], "https://localhost", True),
        (["https://peer.internal"], "https://peer.internal/x", True),
        (["https://peer.internal"], "https://peer.internal:8443", False),
        (["https://peer.internal"], "http://peer.internal", False),
        (["https://peer.internal"], "peer.internal:443", False),  # no scheme = http
        (["localhost"], "127.0.0.1", False),
        (["example.com"], "sub.example.com", False),
        (["bad entry", "example.com:80"], "example.com", True),
        ([], "example.com", False),
        (["example.com"], "ftp://example.com", False),
    ],
)
def test_allows(entries: list[str], url: str, ok: bool) -> None:
    assert allows(entries, url) is ok


# ---- properties ------------------------------------------------------------------------------

label = st.from_regex(r"[a-z0-9][a-z0-9-]{0,8}", fullmatch=True)
hosts = st.lists(label, min_size=1, max_size=3).map(".".join)
ports = st.integers(1, 65535)


@st.composite
def entries(draw: st.DrawFn, host: st.SearchStrategy[str] = hosts) -> str:
    h = draw(host)
    form = draw(st.sampled_from(["bare", "bare_port", "url", "url_port", "url_slash"]))
    if form == "bare":
        return h
    if form == "bare_port":
        return f"{h}:{draw(ports)}"
    scheme = draw(st.sampled_from(["http", "https", "HTTPS"]))
    if form == "url":
        return f"{scheme}://{h}"
    if form == "url_slash":
        return f"{scheme}://{h}/"
    return f"{scheme}://{h}:{draw(ports)}"


@given(entries())
def test_valid_entries_parse_and_are_reflexive(entry: str) -> None:
    r = rule(entry)
    assert covers(r, r)
    assert envelope_covers([entry], entry)


@settings(max_examples=300)
@given(st.data())
def test_covers_is_transitive(data: st.DataObject) -> None:
    h = data.draw(st.sampled_from(["a.example", "b.example"]))
    small_ports = st.sampled_from([80, 443, 8443])

    @st.composite
    def near(draw: st.DrawFn) -> str:
        form = draw(st.sampled_from(["bare", "bare_port", "url", "url_port"]))
        if form == "bare":
            return h
        if form == "bare_port":
            return f"{h}:{draw(small_ports)}"
        scheme = draw(st.sampled_from(["http", "https"]))
        return f"{scheme}://{h}" if form == "url" else f"{scheme}://{h}:{draw(small_ports)}"

    a, b, c = (rule(data.draw(near())) for _ in range(3))
    if covers(a, b) and covers(b, c):
        assert covers(a, c)


@given(hosts, entries())
def test_bare_host_covers_every_variant_of_itself(host: str, entry: str) -> None:
    child = rule(entry)
    variant = NetworkAllowRule(child.scheme, host, child.port, child.port_explicit)
    assert covers(rule(host), variant)


@given(entries(), entries())
def test_never_covers_a_different_host(parent: str, child: str) -> None:
    p, c = rule(parent), rule(child)
    if p.host != c.host:
        assert not covers(p, c)
        assert not envelope_covers([parent], child)


@given(entries(), st.sampled_from(["http", "https"]), ports)
def test_matches_agrees_with_covers(entry: str, scheme: str, port: int) -> None:
    """A rule allows a concrete target iff it covers the fully-bound rule for that target."""
    r = rule(entry)
    t = Target(scheme, r.host, port)
    assert r.matches(t) == covers(r, NetworkAllowRule(scheme, r.host, port, True))


@given(st.text(max_size=40))
def test_parse_never_raises(text: str) -> None:
    r = NetworkAllowRule.parse(text)
    if r is not None:
        assert covers(r, r)
    Target.parse(text)
