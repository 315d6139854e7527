"""``python -m roost.capsule``: how the daemon launches script capsules without a PATH lookup."""

from __future__ import annotations

import sys

from roost.capsule.cli import main

sys.exit(main())
