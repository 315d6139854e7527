"""The registry's exception tree: one status (500) and upstream's sentence as ``str()``."""

from __future__ import annotations

from typing import ClassVar

from roost.core.errors import Internal

__all__ = ["ArtifactNotFound", "ManifestExtractionError", "ManifestParseError", "RegistryError"]


class RegistryError(Internal):
    """An artifact that cannot be resolved or unpacked; ``str()`` is upstream's 500 sentence.

    The subclasses only change the sentence's template, so the HTTP edge maps the whole tree
    to one status (500) and answers with ``str(exc)`` verbatim.
    """

    template: ClassVar[str] = "registry error for '{name}/{version}': {reason}"

    def __init__(self, name: str, version: str, reason: str) -> None:
        super().__init__(self.template.format(name=name, version=version, reason=reason))
        self.name = name
        self.version = version
        self.reason = reason

    def clone(self) -> RegistryError:
        """A fresh instance with the same sentence, for re-raising a cached failure."""
        return type(self)(self.name, self.version, self.reason)


class ArtifactNotFound(RegistryError):
    """Nothing is published at the coordinates (still upstream's ``registry error`` sentence)."""


class ManifestExtractionError(RegistryError):
    """``murmur.yaml`` could not be read out of the artifact (missing, too large, corrupt)."""

    template = "manifest extraction failed: {reason}"


class ManifestParseError(RegistryError):
    """``murmur.yaml`` was read but is not a valid manifest."""

    template = "manifest parse error: {reason}"
