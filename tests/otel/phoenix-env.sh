#!/usr/bin/env bash
# Arize Phoenix (an OTLP trace backend with a query API) in its own virtualenv for the slow
# end-to-end OpenTelemetry test (tests/otel/test_phoenix.py), from exactly the packages
# tests/otel/phoenix-lock.txt pins (tests/support/pinned-venv.sh). Prints the path of its
# `phoenix` command. tests/system-deps.sh runs it, so a test run never installs anything.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$(bash "$here/../support/pinned-venv.sh" "$here/phoenix-lock.txt" phoenix "import phoenix.server.main")"
echo "$venv/bin/phoenix"
