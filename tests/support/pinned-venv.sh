#!/usr/bin/env bash
# A virtualenv of exactly the packages a lock file pins, for a tool the tests drive as a peer (the
# official A2A Python SDK, Arize Phoenix): created once per version of the lock (its digest names
# the directory) in the user's cache outside the repository, with --no-deps from the lock alone.
# Idempotent: a complete environment is reused without reaching the package index. Prints the
# virtualenv's directory.
#   usage: pinned-venv.sh LOCK NAME CHECK   (CHECK: python code that must import, run with -I)
#   MUR_ROOST_SDK_CACHE   where the environments live (default ${XDG_CACHE_HOME:-~/.cache}/mur-roost)
set -euo pipefail
lock="$1" name="$2" check="$3"
digest="$(sha256sum "$lock" | cut -c1-16)"
root="${MUR_ROOST_SDK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mur-roost}"
venv="$root/$name-$digest"
if [ ! -f "$venv/.complete" ]; then
  mkdir -p "$root"
  tmp="$(mktemp -d "$root/.$name-XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  python3 -m venv "$tmp"
  if ! "$tmp/bin/python" -I -m pip install --quiet --disable-pip-version-check --no-deps -r "$lock" \
    >"$tmp/pip.log" 2>&1; then
    tail -n 40 "$tmp/pip.log" >&2
    echo "pinned-venv.sh: could not install $lock (is the package index reachable?)" >&2
    exit 1
  fi
  # -I: the repository's own packages (on sys.path as the working directory) must not answer.
  "$tmp/bin/python" -I -c "$check" >&2
  # Scripts name their interpreter by path: point them at the final directory.
  for script in "$tmp"/bin/*; do
    if [ -f "$script" ] && head -c 2 "$script" | grep -q '#!'; then
      sed -i "1s|^#!$tmp/bin/|#!$venv/bin/|" "$script"
    fi
  done
  touch "$tmp/.complete"
  # A concurrent run that finished first keeps its own (mv -T refuses a non-empty target).
  rm -rf "$venv.stale" && { [ ! -d "$venv" ] || mv -T "$venv" "$venv.stale"; }
  mv -T "$tmp" "$venv" 2>/dev/null || true
  rm -rf "$venv.stale"
fi
echo "$venv"
