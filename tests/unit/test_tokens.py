"""roost.core.tokens: known answers, strict shape, tamper resistance, cross-family refusal, order."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from roost.core import tokens
from roost.core.ids import token_id
from roost.core.tokens import (
    ApprovalExpired,
    HandleExpired,
    Malformed,
    TokenError,
    Unauthenticated,
)

KEY_A = bytes(range(32))
KEY_B = bytes(range(1, 33))
NOW = 1_755_950_000_000
B64_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def by_hand(key: bytes, tag: str, domain: str, payload: bytes, *bound: str) -> str:
    """Independent reference implementation of the grammar."""
    seg = b64(payload)
    msg = domain.encode() + b"\x1f" + seg.encode()
    for b in bound:
        msg += b"\x1f" + b.encode()
    return f"{tag}.{seg}.{b64(hmac.new(key, msg, hashlib.sha256).digest())}"


def approval_payload(**over: object) -> bytes:
    p: dict[str, object] = {
        "v": 1,
        "sid": "ses_a",
        "name": "worker-a",
        "version": "0.1.0",
        "digest": "ab" * 32,
        "depth": 2,
        "exp": NOW + 60_000,
        "jti": "0" * 32,
    }
    p.update(over)
    return json.dumps(p, separators=(",", ":")).encode()


def keeper_payload(**over: object) -> bytes:
    p: dict[str, object] = {"v": 1, "node": "node-a", "n": "2" * 32}
    p.update(over)
    return json.dumps(p, separators=(",", ":")).encode()


def keeper_token(key: bytes = KEY_A, payload: bytes | None = None) -> str:
    return by_hand(key, "mnk1", "mur-roost-node-keeper-v1", keeper_payload() if payload is None else payload)


def approval_token(key: bytes = KEY_A, **over: object) -> str:
    return by_hand(key, "msa1", "murmur-spawn-approval-v1", approval_payload(**over))


def handle_token(key: bytes = KEY_A, audience: str = "reporter@localhost:41234", **over: object) -> str:
    p: dict[str, object] = {"v": 1, "iss": "ses_m", "p": "report.md", "exp": NOW + 1000, "n": "1" * 32}
    p.update(over)
    payload = json.dumps(p, separators=(",", ":")).encode()
    return by_hand(key, "mh1", "murmur-peer-handle-v1", payload, audience)


# ---- known answers -------------------------------------------------------------------------


def test_credential_known_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens, "nonce_hex", lambda: "f" * 32)
    tok, claims = tokens.mint_credential(KEY_A, "ses_01")
    payload = b'{"v":1,"sid":"ses_01","n":"ffffffffffffffffffffffffffffffff"}'
    assert tok == by_hand(KEY_A, "msc1", "murmur-spawn-credential-v1", payload)
    assert claims == tokens.CredentialClaims("ses_01", "f" * 32)
    assert tokens.verify_credential(KEY_A, tok) == claims


def test_approval_known_answer() -> None:
    tok, claims = tokens.mint_approval(
        KEY_A,
        sid="ses_a",
        name="worker-a",
        version="0.1.0",
        digest="ab" * 32,
        depth=2,
        exp_ms=NOW + 60_000,
        jti="0" * 32,
    )
    assert tok == approval_token()
    assert claims == tokens.ApprovalClaims("ses_a", "worker-a", "0.1.0", "ab" * 32, 2, NOW + 60_000, "0" * 32)
    assert tokens.verify_approval(KEY_A, tok, now_ms=NOW) == claims


def test_handle_known_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens, "nonce_hex", lambda: "1" * 32)
    tok = tokens.mint_handle(
        KEY_A, iss="ses_m", path="report.md", exp_ms=NOW + 1000, audience="reporter@localhost:41234"
    )
    assert tok == handle_token()
    claims = tokens.verify_handle(KEY_A, tok, audience="reporter@localhost:41234", iss="ses_m", now_ms=NOW)
    assert claims == tokens.HandleClaims("ses_m", "report.md", NOW + 1000, "1" * 32)


def test_fixed_vector_literal() -> None:
    """A literal vector, so a change in both implementations at once is still caught."""
    tok = by_hand(b"\x00" * 32, "msc1", "murmur-spawn-credential-v1", b'{"v":1,"sid":"s","n":"n"}')
    assert tok.startswith("msc1.eyJ2IjoxLCJzaWQiOiJzIiwibiI6Im4ifQ.")
    assert tokens.verify_credential(b"\x00" * 32, tok) == tokens.CredentialClaims("s", "n")


def test_minted_nonces_are_fresh_hex() -> None:
    a = tokens.verify_credential(KEY_A, tokens.mint_credential(KEY_A, "s")[0])
    b = tokens.verify_credential(KEY_A, tokens.mint_credential(KEY_A, "s")[0])
    assert a.n != b.n
    assert len(a.n) == 32 and int(a.n, 16) >= 0 and a.n == a.n.lower()
    _, claims = tokens.mint_approval(KEY_A, sid="s", name="n", version="1", digest="d", depth=0, exp_ms=NOW)
    assert len(claims.jti) == 32


def test_non_ascii_round_trip() -> None:
    tok, claims = tokens.mint_approval(
        KEY_A, sid="ses_ü", name="wörker", version="1", digest="d", depth=0, exp_ms=NOW + 1
    )
    seg = tok.split(".")[1]
    raw = base64.urlsafe_b64decode(seg + "=" * (-len(seg) % 4))
    assert "wörker".encode() in raw  # raw UTF-8, like serde (ensure_ascii=False)
    assert tokens.verify_approval(KEY_A, tok, now_ms=NOW) == claims
    h = tokens.mint_handle(KEY_A, iss="ses_ü", path="bericht/ä.md", exp_ms=NOW + 1, audience="né@h:1")
    assert tokens.verify_handle(KEY_A, h, audience="né@h:1", iss="ses_ü", now_ms=NOW).p == "bericht/ä.md"


def test_exception_tree() -> None:
    assert issubclass(Malformed, Unauthenticated)
    assert issubclass(Unauthenticated, TokenError)
    assert issubclass(ApprovalExpired, TokenError)
    assert issubclass(HandleExpired, TokenError)
    assert not issubclass(ApprovalExpired, Unauthenticated)


@pytest.mark.parametrize(
    ("make", "text"),
    [
        (TokenError, "the token was refused"),
        (Unauthenticated, "the token is not valid"),
        (Malformed, "the token is not well-formed"),
        (
            lambda: ApprovalExpired(tokens.ApprovalClaims("s", "n", "v", "d", 0, 1, "j")),
            "the spawn approval has expired",
        ),
        (lambda: HandleExpired(tokens.HandleClaims("i", "p", 1, "n")), "the handle has expired"),
    ],
)
def test_refusal_texts_are_fixed(make: Callable[[], TokenError], text: str) -> None:
    exc = make()  # built here, not at collection, so the text is the one the code under test sets
    assert str(exc) == text and exc.args == (text,)


# ---- shape ---------------------------------------------------------------------------------


def _cred() -> str:
    return tokens.mint_credential(KEY_A, "ses_x")[0]


def _noncanonical_last(seg: str) -> str:
    """Same decoded bytes under a lenient decoder, but non-zero unused bits in the last char."""
    last = seg[-1]
    idx = B64_ALPHABET.index(last)
    unused = {2: 4, 3: 2}[len(seg) % 4]  # chars in last quantum -> unused low bits
    assert idx % (1 << unused) == 0
    return seg[:-1] + B64_ALPHABET[idx + 1]


def _shape_variants(tok: str) -> list[str]:
    tag, seg, mac = tok.split(".")
    variants = [
        "",
        tag,
        f"{tag}.{seg}",
        f"{tag}.{seg}.{mac}.",
        f"{tag}.{seg}.{mac}.x",
        f"{tag}..{mac}",
        f"{tag}.{seg}.",
        f".{seg}.{mac}",
        f"{tag.upper()}.{seg}.{mac}",
        f"{tag}.{seg}=.{mac}",
        f"{tag}.{seg}.{mac}=",
        f"{tag}.{seg}.{mac}==",
        f"{tag}.{seg}.{mac}\n",
        f"{tag}.{seg}\n.{mac}",
        f" {tag}.{seg}.{mac}",
        f"{tag}.{seg}.{mac[:-2]}+/",
        f"{tag}.{seg}.{mac[:41]}",  # 41 % 4 == 1: impossible length
        f"{tag}.{seg[:1]}.{mac}",  # one char decodes to nothing
    ]
    if len(seg) % 4 in (2, 3):
        variants.append(f"{tag}.{_noncanonical_last(seg)}.{mac}")
    variants.append(f"{tag}.{seg}.{_noncanonical_last(mac)}")
    return variants


def test_split_rejects_bad_shapes() -> None:
    tok = handle_token()
    for bad in _shape_variants(tok):
        with pytest.raises(Malformed):
            tokens.split(bad, "mh1")


def test_noncanonical_is_really_lenient_decodable() -> None:
    """Guard the test itself: Python's lenient decoder accepts the non-canonical form."""
    mac = _cred().split(".")[2]
    bad = _noncanonical_last(mac)
    assert base64.urlsafe_b64decode(bad + "=") == base64.urlsafe_b64decode(mac + "=")


def test_credential_shape_failures_are_plain_unauthenticated() -> None:
    for bad in _shape_variants(_cred()):
        with pytest.raises(Unauthenticated) as ei:
            tokens.verify_credential(KEY_A, bad)
        assert type(ei.value) is Unauthenticated


def test_approval_shape_failures_are_plain_unauthenticated() -> None:
    for bad in _shape_variants(approval_token()):
        with pytest.raises(Unauthenticated) as ei:
            tokens.verify_approval(KEY_A, bad, now_ms=NOW)
        assert type(ei.value) is Unauthenticated


def test_short_mac_is_invalid_not_malformed() -> None:
    tag, seg, mac = handle_token().split(".")
    short = f"{tag}.{seg}.{b64(base64.urlsafe_b64decode(mac + '=')[:16])}"
    parts = tokens.split(short, "mh1")  # shape passes
    assert len(parts.mac) == 16
    with pytest.raises(Unauthenticated) as ei:
        tokens.verify_handle(KEY_A, short, audience="reporter@localhost:41234", iss="ses_m", now_ms=NOW)
    assert type(ei.value) is Unauthenticated


def test_split_returns_parts_and_hides_mac_in_repr() -> None:
    tok = handle_token()
    parts = tokens.split(tok, "mh1")
    assert parts.payload_segment == tok.split(".")[1]
    assert json.loads(parts.payload_bytes)["iss"] == "ses_m"
    assert len(parts.mac) == 32
    assert tok.split(".")[2] not in repr(parts) and repr(parts.mac) not in repr(parts)


# ---- tamper / cross-family / wrong key -------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_any_single_char_tamper_is_refused(data: st.DataObject) -> None:
    tok = approval_token()
    pos = data.draw(st.integers(0, len(tok) - 1))
    repl = data.draw(st.characters(codec="utf-8").filter(lambda c: c != tok[pos]))
    bad = tok[:pos] + repl + tok[pos + 1 :]
    with pytest.raises(Unauthenticated):
        tokens.verify_approval(KEY_A, bad, now_ms=NOW)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_any_single_char_tamper_of_handle_is_refused(data: st.DataObject) -> None:
    tok = handle_token()
    pos = data.draw(st.integers(0, len(tok) - 1))
    repl = data.draw(st.sampled_from(B64_ALPHABET + ".=+/ ").filter(lambda c: c != tok[pos]))
    bad = tok[:pos] + repl + tok[pos + 1 :]
    with pytest.raises(Unauthenticated):  # Malformed or bare Unauthenticated
        tokens.verify_handle(KEY_A, bad, audience="reporter@localhost:41234", iss="ses_m", now_ms=NOW)


@settings(max_examples=200, deadline=None)
@given(pos=st.integers(0, 10_000), bit=st.integers(0, 7))
def test_any_payload_bit_flip_with_reencoding_is_refused(pos: int, bit: int) -> None:
    """Tamper the decoded payload (re-encoded canonically) so only the MAC can catch it."""
    tag, seg, mac = approval_token().split(".")
    raw = bytearray(base64.urlsafe_b64decode(seg + "=" * (-len(seg) % 4)))
    raw[pos % len(raw)] ^= 1 << bit
    with pytest.raises(Unauthenticated):
        tokens.verify_approval(KEY_A, f"{tag}.{b64(bytes(raw))}.{mac}", now_ms=NOW)


def test_cross_family_is_refused() -> None:
    cred = _cred()
    appr = approval_token()
    handle = handle_token()
    with pytest.raises(Unauthenticated):
        tokens.verify_approval(KEY_A, cred, now_ms=NOW)
    with pytest.raises(Unauthenticated):
        tokens.verify_credential(KEY_A, appr)
    with pytest.raises(Malformed):
        tokens.verify_handle(KEY_A, cred, audience="a", iss="ses_x", now_ms=NOW)
    with pytest.raises(Unauthenticated):
        tokens.verify_credential(KEY_A, handle)
    # Retagging keeps the segments but the domain differs, so the MAC fails.
    retagged = "msa1." + ".".join(cred.split(".")[1:])
    with pytest.raises(Unauthenticated):
        tokens.verify_approval(KEY_A, retagged, now_ms=NOW)
    retagged = "msc1." + ".".join(appr.split(".")[1:])
    with pytest.raises(Unauthenticated):
        tokens.verify_credential(KEY_A, retagged)


def test_wrong_key_is_refused() -> None:
    with pytest.raises(Unauthenticated):
        tokens.verify_credential(KEY_B, _cred())
    with pytest.raises(Unauthenticated):
        tokens.verify_approval(KEY_B, approval_token(), now_ms=NOW)
    with pytest.raises(Unauthenticated) as ei:
        tokens.verify_handle(KEY_B, handle_token(), audience="reporter@localhost:41234", iss="ses_m", now_ms=NOW)
    assert type(ei.value) is Unauthenticated


@pytest.mark.parametrize("other", ["b@h:1", "A@h:1", "a@h:1 ", "", "a@h:1\x1f"])
def test_handle_audience_is_bound(other: str) -> None:
    tok = handle_token(audience="a@h:1")
    assert tokens.verify_handle(KEY_A, tok, audience="a@h:1", iss="ses_m", now_ms=NOW)
    with pytest.raises(Unauthenticated) as ei:
        tokens.verify_handle(KEY_A, tok, audience=other, iss="ses_m", now_ms=NOW)
    assert type(ei.value) is Unauthenticated


def test_handle_without_audience_differs_from_with() -> None:
    """The bound value is in the MAC input: a handle minted unbound is not one minted bound."""
    payload = b'{"v":1,"iss":"ses_m","p":"x","exp":9999999999999,"n":"n"}'
    unbound = by_hand(KEY_A, "mh1", "murmur-peer-handle-v1", payload)
    parts = tokens.split(unbound, "mh1")
    assert tokens.mac_ok(KEY_A, "murmur-peer-handle-v1", parts.payload_segment, parts.mac)
    assert not tokens.mac_ok(KEY_A, "murmur-peer-handle-v1", parts.payload_segment, parts.mac, "")


def test_mac_ok_over_a_domain_outside_the_three_families() -> None:
    """The domain prefix is computed for any domain, not only the cached ones."""
    payload = b'{"v":1}'
    tok = by_hand(KEY_A, "x1", "some-other-domain-v1", payload, "bound")
    parts = tokens.split(tok, "x1")
    assert tokens.mac_ok(KEY_A, "some-other-domain-v1", parts.payload_segment, parts.mac, "bound")
    assert not tokens.mac_ok(KEY_A, "some-other-domain-v2", parts.payload_segment, parts.mac, "bound")


def test_a_bound_value_decoded_from_non_utf8_bytes_macs_as_those_bytes() -> None:
    """aiohttp hands a non-UTF-8 header over as surrogate escapes; the MAC covers the raw bytes."""
    audience = "rep\udcffx@h:1"  # the header's bytes were b"rep\xffx@h:1"
    tok = tokens.mint_handle(KEY_A, iss="ses_m", path="p", exp_ms=NOW + 1, audience=audience)
    assert tokens.verify_handle(KEY_A, tok, audience=audience, iss="ses_m", now_ms=NOW).p == "p"
    parts = tokens.split(tok, "mh1")
    msg = b"murmur-peer-handle-v1\x1f" + parts.payload_segment.encode() + b"\x1frep\xffx@h:1"
    assert parts.mac == hmac.new(KEY_A, msg, hashlib.sha256).digest()


def test_mac_ok_unencodable_bound_is_false() -> None:
    parts = tokens.split(handle_token(), "mh1")
    assert not tokens.mac_ok(KEY_A, "murmur-peer-handle-v1", parts.payload_segment, parts.mac, "\ud800")


# ---- payload parsing (valid MAC, bad content) -----------------------------------------------


@pytest.mark.parametrize(
    "over",
    [
        {"v": 2},
        {"v": 0},
        {"v": True},
        {"v": "1"},
        {"v": 1.0},
        {"v": 256},
        {"v": None},
        {"depth": True},
        {"depth": False},
        {"depth": -1},
        {"depth": "2"},
        {"depth": 2.0},
        {"depth": 2**32},
        {"exp": -1},
        {"exp": 2**64},
        {"exp": True},
        {"exp": str(NOW + 60_000)},
        {"sid": 1},
        {"name": None},
        {"digest": ["x"]},
        {"jti": 5},
    ],
)
def test_approval_bad_payload_types(over: dict[str, Any]) -> None:
    with pytest.raises(Unauthenticated) as ei:
        tokens.verify_approval(KEY_A, approval_token(**over), now_ms=NOW)
    assert type(ei.value) is Unauthenticated


@pytest.mark.parametrize("missing", ["v", "sid", "name", "version", "digest", "depth", "exp", "jti"])
def test_approval_missing_field(missing: str) -> None:
    p = json.loads(approval_payload())
    del p[missing]
    tok = by_hand(KEY_A, "msa1", "murmur-spawn-approval-v1", json.dumps(p).encode())
    with pytest.raises(Unauthenticated):
        tokens.verify_approval(KEY_A, tok, now_ms=NOW)


def test_approval_depth_bounds_accepted() -> None:
    assert tokens.verify_approval(KEY_A, approval_token(depth=0), now_ms=NOW).depth == 0
    assert tokens.verify_approval(KEY_A, approval_token(depth=2**32 - 1), now_ms=NOW).depth == 2**32 - 1


def test_unknown_fields_ignored() -> None:
    assert tokens.verify_approval(KEY_A, approval_token(extra="x"), now_ms=NOW).name == "worker-a"


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"null",
        b"[]",
        b'"x"',
        b"{",
        b'{"v":1,"sid":"s","n":"n"',
        b"\xff\xfe",
        '{"v":1,"sid":"s","n":"n"}'.encode("utf-16"),
        b'{"v":NaN,"sid":"s","n":"n"}',
        b'{"v":1,"sid":"\\ud800","n":"n"}',
    ],
)
def test_credential_bad_json(payload: bytes) -> None:
    tok = by_hand(KEY_A, "msc1", "murmur-spawn-credential-v1", payload) if payload else "msc1..x"
    with pytest.raises(Unauthenticated) as ei:
        tokens.verify_credential(KEY_A, tok)
    assert type(ei.value) is Unauthenticated


def test_credential_v2_refused() -> None:
    tok = by_hand(KEY_A, "msc1", "murmur-spawn-credential-v1", b'{"v":2,"sid":"s","n":"n"}')
    with pytest.raises(Unauthenticated):
        tokens.verify_credential(KEY_A, tok)


@pytest.mark.parametrize("over", [{"v": 2}, {"v": True}, {"exp": -1}, {"exp": "1"}, {"p": 1}, {"n": None}])
def test_handle_post_mac_parse_failure_is_malformed(over: dict[str, Any]) -> None:
    tok = handle_token(**over)
    with pytest.raises(Malformed):
        tokens.verify_handle(KEY_A, tok, audience="reporter@localhost:41234", iss="ses_m", now_ms=NOW)


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_handle_with_valid_mac_and_an_extra_non_json_constant_is_malformed(constant: str) -> None:
    """An unknown field is ignored, but it must still be JSON: ``NaN`` is not, so nothing verifies."""
    payload = f'{{"v":1,"iss":"ses_m","p":"report.md","exp":{NOW + 1000},"n":"{"1" * 32}","x":{constant}}}'.encode()
    tok = by_hand(KEY_A, "mh1", "murmur-peer-handle-v1", payload, "reporter@localhost:41234")
    with pytest.raises(Malformed):
        tokens.verify_handle(KEY_A, tok, audience="reporter@localhost:41234", iss="ses_m", now_ms=NOW)
    with pytest.raises(Malformed):
        tokens.parse_handle_payload(payload)


def test_parse_handle_payload_direct() -> None:
    good = b'{"v":1,"iss":"i","p":"p","exp":5,"n":"n"}'
    assert tokens.parse_handle_payload(good) == tokens.HandleClaims("i", "p", 5, "n")
    with pytest.raises(Malformed):
        tokens.parse_handle_payload(b'{"v":1,"iss":"i","p":"p","n":"n"}')


def test_handle_iss_mismatch_is_unauthenticated() -> None:
    with pytest.raises(Unauthenticated) as ei:
        tokens.verify_handle(KEY_A, handle_token(), audience="reporter@localhost:41234", iss="ses_other", now_ms=NOW)
    assert type(ei.value) is Unauthenticated


def test_handle_order_mac_before_parse_before_expiry() -> None:
    # Bad version + expired + wrong key: the MAC wins.
    tok = handle_token(v=2, exp=0)
    with pytest.raises(Unauthenticated) as ei:
        tokens.verify_handle(KEY_B, tok, audience="reporter@localhost:41234", iss="ses_m", now_ms=NOW)
    assert type(ei.value) is Unauthenticated
    # Valid MAC: version beats expiry and iss.
    with pytest.raises(Malformed):
        tokens.verify_handle(KEY_A, tok, audience="reporter@localhost:41234", iss="other", now_ms=NOW)
    # iss beats expiry.
    with pytest.raises(Unauthenticated) as ei:
        tokens.verify_handle(KEY_A, handle_token(exp=0), audience="reporter@localhost:41234", iss="o", now_ms=NOW)
    assert type(ei.value) is Unauthenticated


# ---- expiry --------------------------------------------------------------------------------


def test_approval_expiry_boundary() -> None:
    tok = approval_token(exp=NOW)
    with pytest.raises(ApprovalExpired) as ei:
        tokens.verify_approval(KEY_A, tok, now_ms=NOW)
    assert ei.value.claims.exp == NOW
    assert tokens.verify_approval(KEY_A, tok, now_ms=NOW - 1).exp == NOW
    assert tokens.verify_approval(KEY_A, approval_token(exp=NOW + 1), now_ms=NOW).exp == NOW + 1


def test_approval_expiry_after_mac() -> None:
    with pytest.raises(Unauthenticated):
        tokens.verify_approval(KEY_B, approval_token(exp=0), now_ms=NOW)


def test_handle_expiry_boundary() -> None:
    aud = "reporter@localhost:41234"
    with pytest.raises(HandleExpired) as ei:
        tokens.verify_handle(KEY_A, handle_token(exp=NOW), audience=aud, iss="ses_m", now_ms=NOW)
    assert ei.value.claims == tokens.HandleClaims("ses_m", "report.md", NOW, "1" * 32)
    assert tokens.verify_handle(KEY_A, handle_token(exp=NOW + 1), audience=aud, iss="ses_m", now_ms=NOW)


# ---- mint argument checks --------------------------------------------------------------------


@pytest.mark.parametrize("depth", [-1, 2**32, True])
def test_mint_approval_rejects_bad_depth(depth: int) -> None:
    with pytest.raises(ValueError) as ei:
        tokens.mint_approval(KEY_A, sid="s", name="n", version="1", digest="d", depth=depth, exp_ms=1)
    assert str(ei.value) == "depth must be an integer in 0..2**32-1"


@pytest.mark.parametrize("exp", [-1, 2**64, False])
def test_mint_rejects_bad_exp(exp: int) -> None:
    with pytest.raises(ValueError) as ei:
        tokens.mint_approval(KEY_A, sid="s", name="n", version="1", digest="d", depth=0, exp_ms=exp)
    assert str(ei.value) == "exp_ms must be an integer in 0..2**64-1"
    with pytest.raises(ValueError) as ei:
        tokens.mint_handle(KEY_A, iss="s", path="p", exp_ms=exp, audience="a")
    assert str(ei.value) == "exp_ms must be an integer in 0..2**64-1"


@pytest.mark.parametrize("audience", ["", "a\x1fb"])
def test_mint_handle_rejects_bad_audience(audience: str) -> None:
    with pytest.raises(ValueError) as ei:
        tokens.mint_handle(KEY_A, iss="s", path="p", exp_ms=1, audience=audience)
    assert str(ei.value) == "audience must be non-empty and contain no 0x1F"


@pytest.mark.parametrize(("depth", "exp"), [(0, 0), (2**32 - 1, 2**64 - 1)])
def test_mint_accepts_the_bounds(depth: int, exp: int) -> None:
    tok, claims = tokens.mint_approval(KEY_A, sid="s", name="n", version="1", digest="d", depth=depth, exp_ms=exp)
    assert (claims.depth, claims.exp) == (depth, exp)
    assert tokens.verify_approval(KEY_A, tok, now_ms=-1) == claims
    handle = tokens.mint_handle(KEY_A, iss="s", path="p", exp_ms=exp, audience="a")
    assert tokens.verify_handle(KEY_A, handle, audience="a", iss="s", now_ms=-1).exp == exp


# ---- no leaks ------------------------------------------------------------------------------


def _texts(exc: BaseException) -> str:
    return f"{exc!s}|{exc!r}|{exc.args!r}"


def _refusal_cases() -> list[tuple[str, str, str, Callable[[str], object]]]:
    """(token kind, token, verifier, call): every token below tried against every verifier."""
    toks = [("credential", _cred()), ("approval", approval_token()), ("handle", handle_token())]
    toks += [(f"handle shape {i}", t) for i, t in enumerate(_shape_variants(handle_token()))]
    toks += [("keeper", keeper_token())]
    calls: list[tuple[str, Callable[[str], object]]] = [
        ("credential, wrong key", lambda t: tokens.verify_credential(KEY_B, t)),
        ("approval, wrong key", lambda t: tokens.verify_approval(KEY_B, t, now_ms=NOW)),
        ("handle, wrong key", lambda t: tokens.verify_handle(KEY_B, t, audience="x", iss="y", now_ms=NOW)),
        ("approval, expired", lambda t: tokens.verify_approval(KEY_A, t, now_ms=2**65)),
        ("keeper, wrong key", lambda t: tokens.verify_keeper(KEY_B, t)),
    ]
    return [(kind, tok, name, call) for kind, tok in toks for name, call in calls]


def _refusal(tok: str, call: Callable[[str], object]) -> TokenError | None:
    try:
        call(tok)
    except TokenError as exc:
        return exc
    return None


@pytest.mark.parametrize(
    ("tok", "verifier", "call"),
    [pytest.param(tok, name, call, id=f"{kind}: {name}") for kind, tok, name, call in _refusal_cases()],
)
def test_exception_text_never_contains_token_or_key(tok: str, verifier: str, call: Callable[[str], object]) -> None:
    exc = _refusal(tok, call)
    assert exc is not None, f"{verifier} accepted a token it must refuse"
    text = _texts(exc)
    for piece in tok.split("."):
        if len(piece) > 4:
            assert piece not in text
    assert KEY_A.hex() not in text and KEY_B.hex() not in text
    assert exc.__cause__ is None
    assert exc.__suppress_context__ or exc.__context__ is None


def test_refusal_text_is_a_handful_of_fixed_sentences() -> None:
    """The refusal text is a handful of fixed sentences, independent of the cause."""
    seen = {_texts(exc) for _, tok, _, call in _refusal_cases() if (exc := _refusal(tok, call)) is not None}
    assert len({s.split("|")[0] for s in seen}) <= 4


def test_token_id_is_the_loggable_form() -> None:
    tok = _cred()
    assert token_id(tok) == hashlib.sha256(tok.encode()).hexdigest()[:16]


@settings(max_examples=100, deadline=None)
@given(
    sid=st.text(),
    name=st.text(),
    depth=st.integers(0, 2**32 - 1),
    exp=st.integers(1, 2**64 - 1),
)
def test_approval_round_trip_property(sid: str, name: str, depth: int, exp: int) -> None:
    try:
        tok, claims = tokens.mint_approval(KEY_A, sid=sid, name=name, version="v", digest="d", depth=depth, exp_ms=exp)
    except UnicodeEncodeError:  # lone surrogates cannot be UTF-8 and so cannot be minted
        return
    assert tokens.verify_approval(KEY_A, tok, now_ms=exp - 1) == claims
    with pytest.raises(ApprovalExpired):
        tokens.verify_approval(KEY_A, tok, now_ms=exp)


@settings(max_examples=500)
@given(st.text(alphabet=B64_ALPHABET + "=+/.", max_size=12))
def test_strict_b64_matches_reencoding_rule(seg: str) -> None:
    """The bit-mask check is equivalent to the spec's "canonical re-encoding equals the segment"."""
    got = tokens._b64decode_strict(seg)
    expected: bytes | None = None
    if seg and len(seg) % 4 != 1 and all(c in B64_ALPHABET for c in seg):
        decoded = base64.urlsafe_b64decode(seg + "=" * (-len(seg) % 4))
        if b64(decoded) == seg:
            expected = decoded
    assert got == expected


@settings(max_examples=300)
@given(st.binary(max_size=200))
@example(b"\x00\x00\x17")  # "AAAX": an encoding that ends in a letter the padding strip must keep
@example(b"\x00\x17")  # "ABc"
def test_b64_encoding_is_unpadded_urlsafe(data: bytes) -> None:
    assert tokens._b64encode(data) == b64(data)
    assert tokens._b64decode_strict(tokens._b64encode(data)) == (data or None)


def test_many_keys_do_not_confuse_the_hmac_cache() -> None:
    keys = [i.to_bytes(32, "big") for i in range(1100)]  # more than the cache bound
    toks = []
    for i, k in enumerate(keys):
        toks.append(tokens.mint_credential(k, f"s{i}")[0])
        assert len(tokens._HMAC_CACHE) <= tokens._HMAC_CACHE_MAX
    for i, (k, tok) in enumerate(zip(keys, toks, strict=True)):
        assert tokens.verify_credential(k, tok).sid == f"s{i}"
        with pytest.raises(Unauthenticated):
            tokens.verify_credential(keys[(i + 1) % len(keys)], tok)


@settings(max_examples=400)
@given(
    key=st.binary(min_size=32, max_size=32),
    sid=st.text(max_size=40),
    name=st.text(max_size=20),
    version=st.text(max_size=12),
    digest=st.text(alphabet="0123456789abcdef", min_size=64, max_size=64),
    depth=st.integers(0, 2**32 - 1),
    exp=st.integers(0, 2**64 - 1),
)
def test_cached_approval_mint_is_byte_identical_to_the_general_path(
    key: bytes, sid: str, name: str, version: str, digest: str, depth: int, exp: int
) -> None:
    fields = {"sid": sid, "name": name, "version": version, "digest": digest, "depth": depth, "exp_ms": exp}
    for _ in range(2):  # the second mint reuses the cached head
        fast, claims = tokens.mint_approval(key, **fields)  # type: ignore[arg-type]
        general, _ = tokens.mint_approval(key, jti=claims.jti, **fields)  # type: ignore[arg-type]
        assert fast == general
        if exp > 0:
            assert tokens.verify_approval(key, fast, now_ms=exp - 1) == claims


@settings(max_examples=200, deadline=None)
@given(key=st.binary(min_size=32, max_size=32), sid=st.text(max_size=40))
def test_a_minted_credential_carries_the_claims_it_returns(key: bytes, sid: str) -> None:
    try:
        tok, claims = tokens.mint_credential(key, sid)
    except UnicodeEncodeError:  # lone surrogates cannot be UTF-8 and so cannot be minted
        return
    assert claims.sid == sid and len(claims.n) == 32
    assert tokens.verify_credential(key, tok) == claims


def test_the_approval_head_cache_is_bounded() -> None:
    for i in range(tokens._APPROVAL_HEADS_MAX + 10):
        tok, claims = tokens.mint_approval(KEY_A, sid=f"s{i}", name="n", version="1", digest="d", depth=0, exp_ms=NOW)
        assert len(tokens._APPROVAL_HEADS) <= tokens._APPROVAL_HEADS_MAX
    assert tokens.verify_approval(KEY_A, tok, now_ms=NOW - 1) == claims


# ---- node keeper (mnk1) --------------------------------------------------------------------


def test_keeper_known_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens, "nonce_hex", lambda: "2" * 32)
    tok = tokens.mint_keeper(KEY_A, "node-a")
    assert tok == keeper_token()
    assert tok.startswith("mnk1.eyJ2IjoxLCJub2RlIjoibm9kZS1hIiwibiI6")  # {"v":1,"node":"node-a","n":
    assert tokens.verify_keeper(KEY_A, tok) == "node-a"


@settings(max_examples=100, deadline=None)
@given(node=st.text(max_size=40))
def test_keeper_round_trip_property(node: str) -> None:
    try:
        tok = tokens.mint_keeper(KEY_A, node)
    except UnicodeEncodeError:  # lone surrogates cannot be UTF-8 and so cannot be minted
        return
    assert tokens.verify_keeper(KEY_A, tok) == node
    assert tokens.mint_keeper(KEY_A, node) != tok  # a fresh nonce each time


def _keeper_refusal(key: bytes, tok: str) -> Unauthenticated:
    with pytest.raises(Unauthenticated) as ei:
        tokens.verify_keeper(key, tok)
    assert type(ei.value) is Unauthenticated  # never Malformed: the codec tells no cause apart
    assert str(ei.value) == "the token is not valid" and ei.value.args == ("the token is not valid",)
    return ei.value


def test_keeper_wrong_key_is_refused() -> None:
    _keeper_refusal(KEY_B, tokens.mint_keeper(KEY_A, "node-a"))


def test_keeper_shape_failures_are_plain_unauthenticated() -> None:
    for bad in _shape_variants(keeper_token()):
        exc = _keeper_refusal(KEY_A, bad)
        assert exc.__cause__ is None and exc.__suppress_context__


def test_keeper_cross_family_is_refused() -> None:
    cred = _cred()
    _keeper_refusal(KEY_A, cred)
    _keeper_refusal(KEY_A, "mnk1." + ".".join(cred.split(".")[1:]))  # retagged: the domain differs
    # The credential's payload MACed as a keeper token: no "node", so refused after the MAC.
    _keeper_refusal(KEY_A, by_hand(KEY_A, "mnk1", "mur-roost-node-keeper-v1", b'{"v":1,"sid":"s","n":"n"}'))
    keeper = keeper_token()
    with pytest.raises(Unauthenticated):
        tokens.verify_credential(KEY_A, keeper)
    with pytest.raises(Unauthenticated):
        tokens.verify_credential(KEY_A, "msc1." + ".".join(keeper.split(".")[1:]))


@pytest.mark.parametrize(
    "payload",
    [
        keeper_payload(v=2),
        keeper_payload(v=0),
        keeper_payload(v=True),
        keeper_payload(v="1"),
        keeper_payload(v=256),
        keeper_payload(node=1),
        keeper_payload(node=None),
        keeper_payload(n=1),
        keeper_payload(n=None),
        b'{"node":"node-a","n":"n"}',
        b'{"v":1,"n":"n"}',
        b'{"v":1,"node":"node-a"}',
        b'{"v":1,"node":"\\ud800","n":"n"}',
        b'{"v":1,"node":"node-a","n":"n","x":NaN}',
        b'["v",1]',
        b"not json",
        b'{"v":1,"node":"node-a","n":"n"',
        '{"v":1,"node":"n","n":"n"}'.encode("utf-16"),
    ],
)
def test_keeper_bad_payload_with_a_valid_mac_is_refused(payload: bytes) -> None:
    _keeper_refusal(KEY_A, keeper_token(payload=payload))


def test_keeper_payload_edges_that_verify() -> None:
    assert tokens.verify_keeper(KEY_A, keeper_token(payload=keeper_payload(extra=[1, 2]))) == "node-a"
    assert tokens.verify_keeper(KEY_A, keeper_token(payload=keeper_payload(node=""))) == ""
    assert tokens.verify_keeper(KEY_A, keeper_token(payload=keeper_payload(node="nœud"))) == "nœud"
