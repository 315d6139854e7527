"""``mur-roost`` command line: maps flags onto :class:`roost.state.config.Config`, then runs the daemon.

The flag grammar and its error sentences follow upstream (``unknown argument: <flag>``,
``<flag> requires a value``, ``invalid <flag>: <reason>``; printed as ``mur-roost: <msg>``,
exit 1) so scripts written for the upstream daemon keep working.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from roost import __version__
from roost.state.config import LAUNCHERS, Config, ConfigError, build_config, load_toml

__all__ = ["main", "parse_args"]

USAGE = """\
usage: mur-roost [options]

Upstream options:
  --port N                 TCP port on the bind address (default 7700; 0 picks one)
  --registry-path DIR      capsule registry (default $HOME/.murmur/artifacts)
  --spawn-allow NAME       a capsule that may run top-level (repeatable)
  --max-depth N            delegation levels below a top-level capsule (default 3)
  --max-concurrent N       live children per session (default 4)
  --max-live-capsules N    live capsules on this host (default cores x 8 in 16..256)
  --version                print the version and exit

Options of this daemon:
  --bind ADDR              listen address (default 127.0.0.1; loopback only unless --allow-remote)
  --allow-remote           permit a non-loopback --bind
  --config FILE            TOML settings file; flags win over it
  --state-dir DIR          SQLite state, key file and admin socket
                           (default $STATE_DIRECTORY under systemd, else $HOME/.murmur/roost)
  --ephemeral-keys         keep keys and state in memory only (upstream behaviour)
  --reset-keys             start with a new key although roost.db exists and master.key is
                           gone (revokes every credential, approval and handle it held)
  --admin-socket PATH      admin unix socket (default <state-dir>/admin.sock)
  --log-format FMT         json | console | auto (default auto: console on a terminal)
  --log-level LEVEL        debug | info | warning | error (default info)
  --launch-timeout SECS    how long a launched child has to report ready (default 180)
  --launcher NAME          local | ray: where children run (default local; see docs/operations.md)

Network (children and keepers on other hosts; docs/operations.md, "Network"):
  --listen HOST:PORT       also listen here for other hosts (e.g. 0.0.0.0:7443); callers
                           that are not on loopback reach only endpoints that authenticate them
  --tls-cert FILE          PEM certificate (chain) for the --listen listener
  --tls-key FILE           PEM private key for --tls-cert
  --allow-plaintext-network
                           serve a non-loopback --listen or --bind without TLS (a private
                           network only); otherwise start-up is refused (exit 7)
  --advertise-url URL      the daemon's URL as children on other hosts reach it
                           (default: the local URL, http://<bind>:<port>)
  -h, --help               show this help
"""


class UsageError(Exception):
    """A command-line mistake; the message is the one sentence printed after ``mur-roost:``."""


def _int(flag: str) -> Callable[[str], int]:
    def conv(raw: str) -> int:
        try:
            value = int(raw, 10)
        except ValueError:
            raise UsageError(f"invalid {flag}: '{raw}' is not a whole number") from None
        if value < 0:
            raise UsageError(f"invalid {flag}: '{raw}' must not be negative")
        return value

    return conv


def _float(flag: str) -> Callable[[str], float]:
    def conv(raw: str) -> float:
        try:
            value = float(raw)
        except ValueError:
            raise UsageError(f"invalid {flag}: '{raw}' is not a number") from None
        if not value > 0:
            raise UsageError(f"invalid {flag}: '{raw}' must be greater than zero")
        return value

    return conv


def _choice(flag: str, choices: tuple[str, ...]) -> Callable[[str], str]:
    def conv(raw: str) -> str:
        if raw not in choices:
            raise UsageError(f"invalid {flag}: '{raw}' is not one of {', '.join(choices)}")
        return raw

    return conv


def _text(flag: str) -> Callable[[str], str]:
    def conv(raw: str) -> str:
        if not raw.strip():
            raise UsageError(f"invalid {flag}: the value is empty")
        return raw

    return conv


# flag -> (config key, converter, repeatable)
_VALUE_FLAGS: dict[str, tuple[str, Callable[[str], object], bool]] = {
    "--port": ("port", _int("--port"), False),
    "--registry-path": ("registry_path", _text("--registry-path"), False),
    "--spawn-allow": ("spawn_allow", _text("--spawn-allow"), True),
    "--max-depth": ("max_depth", _int("--max-depth"), False),
    "--max-concurrent": ("max_concurrent", _int("--max-concurrent"), False),
    "--max-live-capsules": ("max_live_capsules", _int("--max-live-capsules"), False),
    "--bind": ("bind", _text("--bind"), False),
    "--config": ("__config__", _text("--config"), False),
    "--state-dir": ("state_dir", _text("--state-dir"), False),
    "--admin-socket": ("admin_socket", _text("--admin-socket"), False),
    "--log-format": ("log_format", _choice("--log-format", ("json", "console", "auto")), False),
    "--log-level": ("log_level", _choice("--log-level", ("debug", "info", "warning", "error")), False),
    "--launch-timeout": ("launch_timeout_secs", _float("--launch-timeout"), False),
    "--launcher": ("launcher", _choice("--launcher", LAUNCHERS), False),
    "--listen": ("listen", _text("--listen"), False),
    "--tls-cert": ("tls_cert", _text("--tls-cert"), False),
    "--tls-key": ("tls_key", _text("--tls-key"), False),
    "--advertise-url": ("advertise_url", _text("--advertise-url"), False),
}
_BOOL_FLAGS = {
    "--allow-remote": "allow_remote",
    "--ephemeral-keys": "ephemeral_keys",
    "--reset-keys": "reset_keys",
    "--allow-plaintext-network": "allow_plaintext_network",
}


def parse_args(argv: Sequence[str]) -> tuple[str, dict[str, Any]]:
    """Return ``(action, values)`` where action is ``run``, ``version`` or ``help``."""
    values: dict[str, Any] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-h", "--help"):
            return "help", {}
        if arg == "--version":
            return "version", {}
        flag, eq, inline = arg.partition("=")
        if flag in _BOOL_FLAGS and not eq:
            values[_BOOL_FLAGS[flag]] = True
            i += 1
            continue
        spec = _VALUE_FLAGS.get(flag)
        if spec is None or not flag.startswith("--"):
            raise UsageError(f"unknown argument: {arg}")
        if eq:
            raw = inline
        else:
            if i + 1 >= len(argv) or argv[i + 1].startswith("--"):
                raise UsageError(f"{flag} requires a value")
            raw = argv[i + 1]
            i += 1
        key, conv, repeatable = spec
        value = conv(raw)
        if repeatable:
            values.setdefault(key, []).append(value)
        else:
            values[key] = value
        i += 1
    return "run", values


def resolve_config(values: dict[str, Any]) -> Config:
    """Merge the TOML file (if any) under the flags and validate."""
    merged: dict[str, Any] = {}
    from_file: dict[str, Path] = {}
    cfg_path = values.pop("__config__", None)
    if cfg_path is not None:
        merged.update(load_toml(Path(cfg_path)))
        from_file = {k: Path(cfg_path) for k in merged if k not in values}
    for key, value in values.items():
        if key == "spawn_allow":
            merged[key] = tuple(value)
        elif key in ("registry_path", "state_dir", "admin_socket", "tls_cert", "tls_key"):
            merged[key] = Path(value).expanduser().absolute()
        else:
            merged[key] = value
    return build_config(merged, from_file)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        action, values = parse_args(args)
        if action == "help":
            sys.stdout.write(USAGE)
            return 0
        if action == "version":
            print(f"mur-roost {__version__}")
            return 0
        config = resolve_config(dict(values))
    except (UsageError, ConfigError) as exc:
        print(f"mur-roost: {exc}", file=sys.stderr)
        return 1
    from roost.daemon.serve import run

    # SIGHUP re-reads the same --config file under the same flags.
    return run(config, config_loader=lambda: resolve_config(dict(values)))


if __name__ == "__main__":
    raise SystemExit(main())
