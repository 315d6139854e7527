#!/usr/bin/env bash
# The official A2A Python SDK's own virtualenv for the interop tests, from exactly the packages
# tests/a2a/sdk-lock.txt pins (tests/support/pinned-venv.sh), so the SDK's import name `a2a`
# never meets ours. Prints the virtualenv's python. tests/system-deps.sh runs it, so a test run
# never installs anything. An argument names another lock beside this script (sdk-lock-0.3.txt:
# the 0.3 SDK line).
#   MUR_ROOST_SDK_CACHE   where the environments live (default ${XDG_CACHE_HOME:-~/.cache}/mur-roost)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
check="import a2a.client, a2a.server.request_handlers, uvicorn"
venv="$(bash "$here/../support/pinned-venv.sh" "$here/${1:-sdk-lock.txt}" a2a-sdk "$check")"
echo "$venv/bin/python"
