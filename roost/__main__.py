"""``python -m roost``: the daemon, same as the ``mur-roost`` console script."""

from roost.cli import main

raise SystemExit(main())
