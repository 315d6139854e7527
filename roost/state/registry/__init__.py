"""The local capsule registry: resolve ``name/version`` to a verified artifact and its manifest.

Split by who uses it: :mod:`~roost.state.registry.resolve` (the daemon: resolve and its cache),
:mod:`~roost.state.registry.extract` (the capsule host: unpack a resolved artifact) and
:mod:`~roost.state.registry.catalog` (roostctl: list and verify the whole root), over the no-follow
descriptor access in :mod:`~roost.state.registry.base` and the pure layout rules in
:mod:`~roost.state.registry.layout`. :class:`Registry` is all three on one directory.
"""

from __future__ import annotations

from roost.state.registry.catalog import Catalog
from roost.state.registry.errors import ArtifactNotFound, ManifestExtractionError, ManifestParseError, RegistryError
from roost.state.registry.extract import Extractor
from roost.state.registry.layout import (
    DEFAULT_MAX_EXTRACT_BYTES,
    DEFAULT_MAX_EXTRACT_ENTRIES,
    DEFAULT_MAX_MANIFEST_BYTES,
    MANIFEST_NAME,
    Artifact,
    ArtifactSummary,
    CacheInfo,
    Problem,
    artifact_filename,
    check_coordinates,
    safe_member_parts,
    sidecar_filename,
)

__all__ = [
    "DEFAULT_MAX_EXTRACT_BYTES",
    "DEFAULT_MAX_EXTRACT_ENTRIES",
    "DEFAULT_MAX_MANIFEST_BYTES",
    "MANIFEST_NAME",
    "Artifact",
    "ArtifactNotFound",
    "ArtifactSummary",
    "CacheInfo",
    "ManifestExtractionError",
    "ManifestParseError",
    "Problem",
    "Registry",
    "RegistryError",
    "artifact_filename",
    "check_coordinates",
    "safe_member_parts",
    "sidecar_filename",
]


class Registry(Catalog, Extractor):
    """A read-only view of one registry directory; safe to share between executor threads."""
