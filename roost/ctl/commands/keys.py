"""Key rotation: ``roostctl keys rotate [--grace DURATION]`` replaces the master key.

Every credential, spawn approval and peer handle dies (all are derived from the master key): at
once by default, or after ``--grace`` (``90s``, ``10m``, ``1h``), during which the old key still
verifies — never mints — and the running sessions' doors keep the keys the daemon seals with;
running sessions keep running, and once it is over can no longer call the daemon. Calls
``POST /keys/rotate`` (``{"grace_secs"}``) and prints ``{key_id, previous_key_id,
sessions_affected, approvals_revoked, grace_secs, persisted}``. ``--yes`` is required when
running sessions would be affected and stdin is not a terminal to ask on.
"""

from __future__ import annotations

import argparse
import sys

from roost.core.admin_models import RotateAnswer, StatusAnswer
from roost.ctl.context import Context
from roost.ctl.errors import CtlError

NAME = "keys"
HELP = "rotate the master key (revokes every token)"
DESCRIPTION = (
    "roostctl keys rotate: replace the master key. Every credential, spawn approval and peer\n"
    "handle stops working at once; running sessions keep running but can no longer call the daemon."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("rotate",), help="rotate: make a new master key")
    p.add_argument(
        "--grace",
        metavar="DURATION",
        type=_duration,
        default=0,
        help="keep the old key valid for verification (not for minting) this long: 90s, 10m, 1h (default: 0)",
    )
    p.add_argument(
        "-y",
        "--yes",
        action="store_true",
        help="do not ask for confirmation (needed without a terminal when sessions run)",
    )


def _duration(text: str) -> int:
    from roost.core.manifest import parse_duration_secs  # pydantic and yaml only when asked for

    if text.strip() == "0":
        return 0
    try:
        return parse_duration_secs(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"'{text}' {exc}") from None


def run(ctx: Context, args: argparse.Namespace) -> int:
    out = ctx.out
    if not args.yes and not args.grace:
        status: StatusAnswer = ctx.client.call("GET", "/status")
        running = status["sessions"]["running"]
        if running:
            if not sys.stdin.isatty():
                raise CtlError(f"{running} running sessions would lose their credentials; pass --yes to rotate anyway")
            out.err.write(f"{running} running sessions will lose their credentials. Rotate? [y/N] ")
            out.err.flush()
            if sys.stdin.readline().strip().lower() not in ("y", "yes"):
                raise CtlError("not rotated")
    body: RotateAnswer = ctx.client.call("POST", "/keys/rotate", {"grace_secs": args.grace} if args.grace else None)
    if out.as_json:
        out.json(body)
        return 0
    out.pairs(
        [
            ("key id", f"{body['previous_key_id']} → {body['key_id']}"),
            ("sessions affected", body["sessions_affected"]),
            ("approvals revoked", body["approvals_revoked"]),
            ("old key verifies for", f"{body.get('grace_secs', 0):g}s" if body.get("grace_secs") else "no (revoked)"),
            ("persisted", "yes" if body["persisted"] else "no (ephemeral keys)"),
        ]
    )
    return 0
