#!/usr/bin/env python3
"""Rebuild deploy/examples/registry/ from deploy/examples/capsules/.

Packing is deterministic, so running this on unchanged sources leaves the checked-in registry
byte-identical (tests/test_examples.py fails if the two ever drift). Artifacts whose source
directory is gone are removed, so the registry holds exactly the example capsules.

    python deploy/examples/build.py            # from the repository root
    python -m roost.state.registry.packing deploy/examples/capsules/* --registry deploy/examples/registry
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))  # run from a checkout without installing

from roost.state.registry.packing import PackError, pack_capsule  # noqa: E402

CAPSULES = HERE / "capsules"
REGISTRY = HERE / "registry"


def main() -> int:
    REGISTRY.mkdir(exist_ok=True)
    built: set[str] = set()
    for src in sorted(p for p in CAPSULES.iterdir() if (p / "murmur.yaml").is_file()):
        try:
            result = pack_capsule(src, REGISTRY)
        except PackError as exc:
            print(f"build.py: {exc}", file=sys.stderr)
            return 2
        built.add(result.name)
        state = "packed" if result.changed else "unchanged"
        print(f"{result.coordinates} {result.sha256} ({state})")
    for stale in sorted(p for p in REGISTRY.iterdir() if p.is_dir() and p.name not in built):
        shutil.rmtree(stale)
        print(f"removed {stale.name} (no source directory)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
