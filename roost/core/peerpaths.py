"""Pure path rules of the peer plane (``docs/peer-plane.md``, Path rules).

No I/O here: these functions decide, from the text alone, whether a requested path can name a
file under the export root, and produce its canonical root-relative form. The descriptor walk
that then opens it lives in :mod:`roost.services.peer.resolve`.

Decisions (see ``docs/peer-plane.md``):

* **Percent-decoding happens once, at mint.** The agent's ``path`` is decoded (``%XY`` with two
  hex digits → one byte; a lone or invalid ``%`` stays literal), validated, and the *decoded*
  canonical path is what the handle carries as ``p``. At redeem ``p`` is validated again but
  never decoded again (:func:`handle_components`). Upstream decodes twice, so a real file named
  ``100%41.txt`` mints but cannot be redeemed; we do not reproduce that bug.
* Refused without touching the filesystem, as ``outside_root``: an empty path, a NUL byte,
  anything not valid UTF-8 after decoding (including lone surrogates smuggled in as JSON
  ``\\udcxx`` escapes), an absolute path, and any ``""`` (``//``), ``.`` or ``..`` component.
  One trailing ``/`` is dropped. Nothing is normalised: ``a/./b`` is refused, not rewritten.
* Since the resolver never follows a link, the canonical path is exactly the validated
  components joined with ``/``.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "PathRefused",
    "canonical",
    "handle_components",
    "mint_components",
    "percent_decode",
    "split_components",
]

_HEX: Final = frozenset(b"0123456789abcdefABCDEF")


class PathRefused(ValueError):
    """The path is refused by the pure rules (always ``outside_root`` on the wire)."""


def percent_decode(raw: bytes) -> bytes:
    """Decode ``%XY`` (two hex digits) to one byte; any other ``%`` stays literal. Decodes once."""
    if b"%" not in raw:
        return raw
    out = bytearray()
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        if c == 0x25 and i + 2 < n and raw[i + 1] in _HEX and raw[i + 2] in _HEX:
            out.append(int(raw[i + 1 : i + 3], 16))
            i += 3
        else:
            out.append(c)
            i += 1
    return bytes(out)


def split_components(decoded: bytes) -> tuple[str, ...]:
    """Validate decoded path bytes and split them into components (the rules above)."""
    if not decoded:
        raise PathRefused("empty path")
    if b"\x00" in decoded:
        raise PathRefused("NUL byte")
    try:
        text = decoded.decode("utf-8")
    except UnicodeDecodeError:
        raise PathRefused("not UTF-8") from None
    if text.startswith("/"):
        raise PathRefused("absolute path")
    if text.endswith("/"):
        text = text[:-1]
    parts = tuple(text.split("/"))
    for part in parts:
        if part in ("", ".", ".."):
            raise PathRefused("empty, '.' or '..' component")
    return parts


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates from a JSON "\udcxx" escape
        raise PathRefused("not UTF-8") from None


def mint_components(asked: str) -> tuple[str, ...]:
    """Components of an agent's ``path`` at mint: percent-decoded once, then validated."""
    return split_components(percent_decode(_utf8(asked)))


def handle_components(p: str) -> tuple[str, ...]:
    """Components of a verified handle's ``p`` at redeem: validated, never decoded again."""
    return split_components(_utf8(p))


def canonical(components: tuple[str, ...]) -> str:
    """The canonical root-relative path the handle carries and traces record."""
    return "/".join(components)
