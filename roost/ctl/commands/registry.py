"""Work on a capsule registry directly (no daemon needed): ``ls``, ``add DIR``, ``verify``.

The registry is ``--registry-path``, else ``$ROOST_REGISTRY_PATH``, else the daemon's
``registry_path`` when it answers, else ``~/.murmur/artifacts``.

* ``ls``      → ``{"registry", "name", "artifacts": [{name, version, size, sha256}]}``: ``name``
  is the registry's name (the daemon's ``registry_name``, else ``local``), the ``<registry>`` of
  ``<registry>/<capsule>`` allow-list entries
* ``add DIR`` → packs DIR (deterministic .mur.zip + .sha256) → ``{name, version, sha256, path,
  changed, daemon_notified}``; when the daemon answers it is told to forget its resolve cache
  (``POST /registry/forget``) so the new bytes are used at once
* ``verify``  → re-reads every artifact → ``{"registry", "problems": [{name, version, path,
  message}]}``; exit 1 when there is any problem
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from roost.core.admin_models import ConfigView
from roost.core.allownames import DEFAULT_REGISTRY_NAME
from roost.ctl.context import Context
from roost.ctl.errors import CtlError, Unreachable

NAME = "registry"
HELP = "list, add to, or verify a capsule registry"
DESCRIPTION = (
    "Work on the capsule registry directly, no daemon needed: ls lists its capsules, add DIR packs\n"
    "a capsule source directory into it, verify re-reads every artifact. The registry is\n"
    "--registry-path, else $ROOST_REGISTRY_PATH, else the running daemon's registry_path."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("ls", "add", "verify"), help="ls, add DIR, or verify")
    p.add_argument("dir", nargs="?", help="capsule source directory (add)")
    p.add_argument(
        "--registry-path", metavar="DIR", help="the registry's directory (default: the daemon's registry_path)"
    )


def _registry_name(ctx: Context) -> str:
    """The registry's name as the daemon knows it (``registry_name``), else the default."""
    try:
        config: ConfigView = ctx.client.call("GET", "/config")
        return config.get("registry_name") or DEFAULT_REGISTRY_NAME
    except CtlError:
        return DEFAULT_REGISTRY_NAME


def _registry_path(ctx: Context, args: argparse.Namespace) -> tuple[Path, bool]:
    """The registry root and whether the daemon answered while finding it."""
    if args.registry_path:
        return Path(args.registry_path).expanduser().absolute(), False
    env = os.environ.get("ROOST_REGISTRY_PATH")
    if env:
        return Path(env).expanduser().absolute(), False
    try:
        config: ConfigView = ctx.client.call("GET", "/config")
        return Path(config["registry_path"]), True
    except CtlError:
        home = os.environ.get("HOME", "")
        if not home:
            raise CtlError("no registry: pass --registry-path or set ROOST_REGISTRY_PATH") from None
        return Path(home) / ".murmur" / "artifacts", False


def _exists(root: Path) -> None:
    if not root.is_dir():
        why = "is not a directory" if root.exists() else "does not exist"
        raise CtlError(
            f"the registry {root} {why}: create it with 'roostctl registry add DIR', or point "
            "registry_path (or --registry-path) at the right place"
        )


def _ls(ctx: Context, root: Path) -> int:
    from roost.state.registry.catalog import Catalog

    _exists(root)
    items: list[dict[str, Any]] = [
        {"name": a.name, "version": a.version, "size": a.size, "sha256": a.sidecar_sha256, "path": str(a.path)}
        for a in Catalog(root).list()
    ]
    out = ctx.out
    name = _registry_name(ctx)
    if out.as_json:
        out.json({"registry": str(root), "name": name, "artifacts": items})
    else:
        out.info(f"registry '{name}' at {root} (an allow-list entry '{name}/<capsule>' names its capsules)")
        out.table(
            items,
            [
                ("capsule", lambda r: f"{r['name']}@{r['version']}"),
                ("size", lambda r: r["size"]),
                ("sha256", lambda r: (r["sha256"] or "-")[:16]),
            ],
            empty="no artifacts",
        )
    return 0


def _add(ctx: Context, args: argparse.Namespace, root: Path) -> int:
    from roost.state.registry.packing import PackError, pack_capsule

    if not args.dir:
        from roost.ctl.errors import Usage

        raise Usage("registry add needs the capsule directory: roostctl registry add DIR")
    try:
        result = pack_capsule(Path(args.dir), root)
    except PackError as exc:
        raise CtlError(str(exc)) from None
    except OSError as exc:
        raise CtlError(f"cannot pack {args.dir}: {exc.strerror or exc}") from None
    notified = False
    try:
        ctx.client.call("POST", "/registry/forget")
        notified = True
    except Unreachable:
        pass
    except CtlError as exc:
        ctx.out.error(f"packed, but the daemon did not forget its cache: {exc.message}")
    body: dict[str, object] = {
        "name": result.name,
        "version": result.version,
        "sha256": result.sha256,
        "path": str(result.path),
        "changed": result.changed,
        "daemon_notified": notified,
    }
    if ctx.out.as_json:
        ctx.out.json(body)
    else:
        state = "packed" if result.changed else "unchanged"
        ctx.out.line(f"{result.coordinates} {result.sha256} ({state})")
        if notified:
            ctx.out.info("the daemon will resolve the new artifact from now on")
    return 0


def _verify(ctx: Context, root: Path) -> int:
    from roost.state.registry.catalog import Catalog

    _exists(root)
    reg = Catalog(root)
    problems = [{"name": p.name, "version": p.version, "path": str(p.path), "message": p.message} for p in reg.verify()]
    out = ctx.out
    if out.as_json:
        out.json({"registry": str(root), "artifacts": len(reg.list()), "problems": problems})
    else:
        for p in problems:
            out.line(f"{out.paint('FAIL', 'red')} {p['name']}@{p['version']}: {p['message']}")
        if not problems:
            out.line(f"{out.paint('ok', 'green')} {len(reg.list())} artifacts in {root} resolve")
    return 1 if problems else 0


def run(ctx: Context, args: argparse.Namespace) -> int:
    root, _ = _registry_path(ctx, args)
    if args.action == "ls":
        return _ls(ctx, root)
    if args.action == "add":
        return _add(ctx, args, root)
    return _verify(ctx, root)
