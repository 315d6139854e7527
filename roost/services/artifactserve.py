"""Serving registry artifacts by sha256 to node keepers on other hosts.

A node with no shared filesystem gets a capsule's artifact from the daemon: ``GET
/artifacts/{sha256}`` with ``authorization: Bearer <mnk1 token>``. The token is minted by the
daemon for one node (:func:`keeper_token`, HKDF(master, ``keeper``)) and handed to that node's
keeper when the daemon sets it up; it has no expiry and dies with the key (``roostctl keys
rotate``). The bytes are the registry's own zip, found by walking the registry and resolving
each artifact once (cached on the file's identity, as every resolve is), opened without
following links. The keeper verifies the sha256 before it uses or caches anything
(:mod:`roost.backends.ray.node.artifactfetch`), so a daemon never needs to be trusted with more than the name.
docs/operations.md, "Network"; docs/security.md, Tokens.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from roost.core.errors import BadRequest, IdentityRefused
from roost.core.tokens import Unauthenticated, mint_keeper, verify_keeper
from roost.state.keys import KeyRing
from roost.state.registry import Artifact, Registry, RegistryError, artifact_filename
from roost.system.fsutil import open_beneath

__all__ = ["SHA256_HEADER", "ArtifactIndex", "OpenArtifact", "keeper_node", "keeper_token", "require_sha256"]

SHA256_HEADER: Final = "x-murmur-artifact-sha256"
_SHA256_RE: Final = re.compile(r"[0-9a-f]{64}")
_NODE_RE: Final = re.compile(r"[A-Za-z0-9._:@-]{1,128}")
_KEEPER_PURPOSE: Final = "keeper"


def keeper_token(keys: KeyRing, node_id: str) -> str:
    """A node keeper's token for ``node_id`` (letters, digits and ``._:@-``, at most 128)."""
    if not _NODE_RE.fullmatch(node_id):
        raise ValueError("a node id is 1-128 letters, digits or ._:@-")
    return mint_keeper(keys.subkey(_KEEPER_PURPOSE), node_id)


def keeper_node(rings: KeyRing | Sequence[KeyRing], authorization: str | None) -> str:
    """The node an ``authorization: Bearer`` keeper token names (under the ring in force, or a
    replaced one during a rotation's grace); the one fixed 403 otherwise."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise IdentityRefused
    for ring in [rings] if isinstance(rings, KeyRing) else rings:
        try:
            return verify_keeper(ring.subkey(_KEEPER_PURPOSE), token.strip())
        except Unauthenticated:
            continue
    raise IdentityRefused


def require_sha256(text: str) -> str:
    if not _SHA256_RE.fullmatch(text):
        raise BadRequest("the artifact id must be a sha256: 64 lowercase hex digits")
    return text


@dataclass(frozen=True, slots=True)
class OpenArtifact:
    """An artifact opened for reading; the caller owns and closes ``fd``."""

    artifact: Artifact
    fd: int
    size: int


class ArtifactIndex:
    """sha256 → (name, version) over one registry, learnt by resolving; blocking, thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[tuple[str, str], tuple[str, str]] = {}  # (root, sha256) -> coordinates

    def find(self, registry: Registry, sha256: str) -> Artifact | None:
        root = os.fspath(registry.root)
        with self._lock:
            known = self._seen.get((root, sha256))
        if known is not None:
            found = self._resolve(registry, *known)
            if found is not None and found.sha256 == sha256:
                return found
        for summary in registry.list():
            if summary.sidecar_sha256 is not None and summary.sidecar_sha256 != sha256:
                continue  # a sidecar that disagrees cannot be this artifact (or resolves to an error)
            found = self._resolve(registry, summary.name, summary.version)
            if found is not None and found.sha256 == sha256:
                return found
        return None

    def _resolve(self, registry: Registry, name: str, version: str) -> Artifact | None:
        try:
            artifact = registry.resolve(name, version)
        except RegistryError:
            return None
        with self._lock:
            self._seen[(os.fspath(registry.root), artifact.sha256)] = (name, version)
        return artifact

    def open(self, registry: Registry, sha256: str) -> OpenArtifact | None:
        """The artifact with this digest, opened through no link; None when the registry has none."""
        artifact = self.find(registry, sha256)
        if artifact is None:
            return None
        try:
            dir_fd = open_beneath(registry.root, (artifact.name, artifact.version))
        except OSError:
            return None
        try:
            fd = os.open(
                artifact_filename(artifact.name, artifact.version),
                os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC,
                dir_fd=dir_fd,
            )
        except OSError:
            return None
        finally:
            os.close(dir_fd)
        return OpenArtifact(artifact, fd, os.fstat(fd).st_size)
