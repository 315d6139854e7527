#!/usr/bin/env bash
# Arize Phoenix (an OTLP trace backend with a query API) in its own virtualenv for the slow
# end-to-end OpenTelemetry test (tests/otel/test_phoenix.py): created once per version of
# tests/otel/phoenix-lock.txt (its digest names the directory) from exactly the pinned packages,
# in the user's cache outside the repository. Prints the path of its `phoenix` command.
# Idempotent: a complete environment is reused without reaching the package index.
# tests/system-deps.sh runs it, so a test run never installs anything.
#   MUR_ROOST_SDK_CACHE   where the environments live (default ${XDG_CACHE_HOME:-~/.cache}/mur-roost)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
lock="$here/phoenix-lock.txt"
digest="$(sha256sum "$lock" | cut -c1-16)"
root="${MUR_ROOST_SDK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mur-roost}"
venv="$root/phoenix-$digest"
if [ ! -f "$venv/.complete" ]; then
  mkdir -p "$root"
  tmp="$(mktemp -d "$root/.phoenix-XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  python3 -m venv "$tmp"
  if ! "$tmp/bin/python" -I -m pip install --quiet --disable-pip-version-check --no-deps -r "$lock" \
    >"$tmp/pip.log" 2>&1; then
    tail -n 40 "$tmp/pip.log" >&2
    echo "phoenix-env.sh: could not install tests/otel/phoenix-lock.txt (is the package index reachable?)" >&2
    exit 1
  fi
  "$tmp/bin/python" -I -c "import phoenix.server.main" >&2
  touch "$tmp/.complete"
  # The `phoenix` script names its interpreter by path: rewrite it for the final directory.
  sed -i "1s|^#!.*|#!$venv/bin/python|" "$tmp/bin/phoenix"
  rm -rf "$venv.stale" && { [ ! -d "$venv" ] || mv -T "$venv" "$venv.stale"; }
  mv -T "$tmp" "$venv" 2>/dev/null || true
  rm -rf "$venv.stale"
fi
echo "$venv/bin/phoenix"
