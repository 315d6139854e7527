#!/usr/bin/env bash
# The official A2A Python SDK's own virtualenv for the interop tests: created once per version of
# tests/a2a/sdk-lock.txt (its digest names the directory) from exactly the pinned packages, in
# the user's cache outside the repository, so the SDK's import name `a2a` never meets ours.
# Prints the virtualenv's python. Idempotent: a complete environment is reused without reaching
# the package index. tests/system-deps.sh runs it, so a test run never installs anything.
# An argument names another lock beside this script (sdk-lock-0.3.txt: the 0.3 SDK line).
#   MUR_ROOST_SDK_CACHE   where the environments live (default ${XDG_CACHE_HOME:-~/.cache}/mur-roost)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
lock="$here/${1:-sdk-lock.txt}"
digest="$(sha256sum "$lock" | cut -c1-16)"
root="${MUR_ROOST_SDK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mur-roost}"
venv="$root/a2a-sdk-$digest"
if [ ! -f "$venv/.complete" ]; then
  mkdir -p "$root"
  tmp="$(mktemp -d "$root/.a2a-sdk-XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  python3 -m venv "$tmp"
  if ! "$tmp/bin/python" -I -m pip install --quiet --disable-pip-version-check --no-deps -r "$lock" \
    >"$tmp/pip.log" 2>&1; then
    tail -n 40 "$tmp/pip.log" >&2
    echo "sdk-env.sh: could not install tests/a2a/sdk-lock.txt (is the package index reachable?)" >&2
    exit 1
  fi
  # -I: the repository's own `a2a` (on sys.path as the working directory) must not answer.
  "$tmp/bin/python" -I -c "import a2a.client, a2a.server.request_handlers, uvicorn" >&2
  touch "$tmp/.complete"
  # Used only as `<venv>/bin/python`, which finds its packages wherever the directory is; a
  # concurrent run that finished first keeps its own (mv -T refuses a non-empty target).
  rm -rf "$venv.stale" && { [ ! -d "$venv" ] || mv -T "$venv" "$venv.stale"; }
  mv -T "$tmp" "$venv" 2>/dev/null || true
  rm -rf "$venv.stale"
fi
echo "$venv/bin/python"
