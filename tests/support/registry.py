"""A registry on disk that tests fill with packed capsules, and where the repository's examples are."""

from __future__ import annotations

import hashlib
import os
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from roost.state.registry.layout import artifact_filename, sidecar_filename
from roost.state.registry.packing import build_zip, pack_capsule

__all__ = ["EXAMPLES", "REPO", "RegistryBuilder"]

REPO = Path(__file__).resolve().parent.parent.parent
EXAMPLES = REPO / "deploy" / "examples"


@dataclass
class RegistryBuilder:
    root: Path
    src: Path
    built: dict[str, str] = field(default_factory=dict)

    def add(
        self,
        name: str,
        version: str = "0.1.0",
        *,
        capabilities: dict[str, Any] | None = None,
        entrypoint: list[str] | None = None,
        script: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> str:
        """Pack a capsule into the registry and return its sha256."""
        d = self.src / f"{name}-{version}"
        d.mkdir(parents=True, exist_ok=True)
        manifest: dict[str, Any] = {"name": name, "version": version}
        if capabilities:
            manifest["capabilities"] = capabilities
        if script is not None:
            main = d / "main.py"
            main.write_text("#!/usr/bin/env python3\n" + textwrap.dedent(script))
            main.chmod(0o755)
            manifest["entrypoint"] = entrypoint or ["main.py"]
        elif entrypoint is not None:
            manifest["entrypoint"] = entrypoint
        if extra:
            manifest.update(extra)
        (d / "murmur.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
        result = pack_capsule(d, self.root)
        self.built[f"{name}@{version}"] = result.sha256
        return result.sha256

    def publish_unchecked(self, name: str, version: str = "0.1.0", **kw: Any) -> str:
        """Publish an artifact the way another tool (an upstream registry) might: the same zip,
        without this daemon's packing checks (say, a ``capabilities.resources`` key it does not know)."""
        capabilities = kw.pop("capabilities", None)
        self.add(name, version, **kw)
        d = self.src / f"{name}-{version}"
        manifest = yaml.safe_load((d / "murmur.yaml").read_text())
        if capabilities:
            manifest["capabilities"] = capabilities
        (d / "murmur.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
        entries = [
            (p.relative_to(d).as_posix(), p.read_bytes(), os.access(p, os.X_OK))
            for p in sorted(d.rglob("*"))
            if p.is_file()
        ]
        blob = build_zip(entries)
        digest = hashlib.sha256(blob).hexdigest()
        out = self.root / name / version
        zpath = out / artifact_filename(name, version)
        zpath.write_bytes(blob)
        (out / sidecar_filename(name, version)).write_text(f"{digest}  {zpath.name}\n")
        self.built[f"{name}@{version}"] = digest
        return digest
