"""Pure rules: path validation, percent-decoding once, stored-name sanitiser, audience strings."""

from __future__ import annotations

import re
from urllib.parse import quote_from_bytes

import pytest
from hypothesis import given
from hypothesis import strategies as st

from a2a.protocol.models import AgentCard, AgentInterface
from roost.core import peerpaths as paths
from roost.services.peer.audience import AudienceError, audience, audience_from_card, host_port
from roost.services.peer.storage import clean_name, hint_from_token, stored_path

path_text = st.text(alphabet=st.sampled_from([*list("ab./%2eEfF0\x00\\é"), "�"]), max_size=40)


@pytest.mark.parametrize(
    ("raw", "decoded"),
    [
        (b"a%2fb", b"a/b"),
        (b"%2E%2e", b".."),
        (b"100%", b"100%"),
        (b"%zz", b"%zz"),
        (b"%4", b"%4"),
        (b"%%41", b"%A"),
        (b"%252e", b"%2e"),  # once only
        (b"%00", b"\x00"),
    ],
)
def test_percent_decode(raw: bytes, decoded: bytes) -> None:
    assert paths.percent_decode(raw) == decoded


@given(st.binary(max_size=64))
def test_percent_decode_inverts_quote(data: bytes) -> None:
    assert paths.percent_decode(quote_from_bytes(data, safe="").encode()) == data


@given(st.text(max_size=40).filter(lambda s: "%" not in s))
def test_percent_decode_is_identity_without_percent(text: str) -> None:
    raw = text.encode("utf-8", "surrogatepass")
    assert paths.percent_decode(raw) == raw


COMPONENT = "empty, '.' or '..' component"


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ("", "empty path"),
        ("/", "absolute path"),
        ("/etc/passwd", "absolute path"),
        ("..", COMPONENT),
        ("../x", COMPONENT),
        ("a/../b", COMPONENT),
        ("a/./b", COMPONENT),
        (".", COMPONENT),
        ("a//b", COMPONENT),
        ("//a", "absolute path"),
        ("a\x00b", "NUL byte"),
        ("%00", "NUL byte"),
        ("%2e%2e", COMPONENT),
        ("%2e%2e%2fsecret", COMPONENT),
        ("%2fetc", "absolute path"),
        ("%ff", "not UTF-8"),
        ("\udcff", "not UTF-8"),
        ("a/..", COMPONENT),
        ("./a", COMPONENT),
    ],
)
def test_refused_paths(bad: str, reason: str) -> None:
    """Every refusal is ``outside_root`` on the wire; the reason names the rule that refused it."""
    with pytest.raises(paths.PathRefused) as ei:
        paths.mint_components(bad)
    assert str(ei.value) == reason


@pytest.mark.parametrize(
    ("good", "parts"),
    [
        ("a", ("a",)),
        ("a/b/", ("a", "b")),
        ("a%2fb", ("a", "b")),
        ("..a/b..", ("..a", "b..")),
        ("é", ("é",)),
        ("100%2541.txt", ("100%41.txt",)),
        ("a b", ("a b",)),
        ("...", ("...",)),
    ],
)
def test_accepted_paths(good: str, parts: tuple[str, ...]) -> None:
    assert paths.mint_components(good) == parts


@given(path_text)
def test_components_are_plain_and_canonical_is_stable(text: str) -> None:
    try:
        parts = paths.mint_components(text)
    except paths.PathRefused:
        return
    assert parts
    for part in parts:
        assert part not in ("", ".", "..") and "/" not in part and "\x00" not in part
        part.encode("utf-8")  # valid UTF-8
    canon = paths.canonical(parts)
    assert not canon.startswith("/")
    # redeem re-validates without decoding: the same components come back
    assert paths.handle_components(canon) == parts


@given(st.text(alphabet=st.sampled_from(list("ab.%2eE/")), min_size=1, max_size=30))
def test_decoded_once_only(text: str) -> None:
    """A path percent-encoded once more mints to exactly the original text, literally."""
    encoded = quote_from_bytes(text.encode(), safe="")
    try:
        expected = paths.handle_components(text)
    except paths.PathRefused:
        with pytest.raises(paths.PathRefused):
            paths.mint_components(encoded)
        return
    assert paths.mint_components(encoded) == expected


@given(path_text)
def test_handle_components_never_decode(text: str) -> None:
    try:
        parts = paths.handle_components(text)
    except paths.PathRefused:
        return
    assert paths.canonical(parts) == text.removesuffix("/")


# -- stored names ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hint", "name"),
    [
        ("report.md", "report.md"),
        ("../../etc/passwd", "passwd"),
        ("..", "file"),
        ("", "file"),
        (None, "file"),
        ("a b;rm -rf.md", "a_b_rm_-rf.md"),
        ("x/", "file"),
        ("é.txt", "_.txt"),
        ("a" * 200, "a" * 120),
    ],
)
def test_clean_name(hint: str | None, name: str) -> None:
    assert clean_name(hint) == name
    assert stored_path("0123456789abcdef", hint) == f"peer-in/0123456789abcdef-{name}"


@given(st.one_of(st.none(), st.text(max_size=300)))
def test_clean_name_property(hint: str | None) -> None:
    name = clean_name(hint)
    assert re.fullmatch(r"[A-Za-z0-9._-]{1,120}", name)
    assert name not in (".", "..")


def test_hint_from_token() -> None:
    from roost.core import tokens

    tok = tokens.mint_handle(b"k" * 32, iss="ses_x", path="dir/report.md", exp_ms=1, audience="a@b:1")
    assert hint_from_token(tok) == "dir/report.md"
    assert hint_from_token("garbage") is None
    assert hint_from_token("mh1.!!!!.x") is None


# -- audience -------------------------------------------------------------------------------------


def test_audience_rules() -> None:
    assert host_port("http://localhost:41234/") == "localhost:41234"
    assert host_port("https://h:1/x/y") == "h:1"
    assert host_port("HTTP://h:1") == "HTTP:"  # case-sensitive prefix, as upstream
    assert audience("Reporter", "http://localhost:41234/") == "reporter@localhost:41234"
    with pytest.raises(AudienceError):
        audience("  ", "http://h:1")
    with pytest.raises(AudienceError):
        audience("x", "http://")
    card = AgentCard(name=" Echo ", url="http://127.0.0.1:5/")
    assert audience_from_card(card) == "echo@127.0.0.1:5"
    card = AgentCard(name="Echo", supported_interfaces=[AgentInterface(url="http://127.0.0.1:6")])
    assert audience_from_card(card) == "echo@127.0.0.1:6"
    with pytest.raises(AudienceError):
        audience_from_card(AgentCard(name="Echo"))
