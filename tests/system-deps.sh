#!/usr/bin/env bash
# The test suite's system dependencies, from Debian's packages and the npm registry; the
# README's test command runs this first, and so does .ci/run.
#   chromium     the dashboard's browser tests (Playwright drives it; no browser is downloaded)
#   zsh          the completion tests check the generated zsh script
#   bubblewrap   the `sealed` containment class (docs/security.md, "Containment")
#   util-linux   setpriv, the exec step every child starts through (roost/backends/process/privdrop.py)
#   libseccomp2  the contained entrypoints' seccomp filter (roost/capsule/seccomp.py)
#   systemd      systemd-analyze checks the shipped unit (tests/ops/test_systemd.py)
#   iproute2     the network tests give a namespace a non-loopback address (tests/net/support.py)
#   nodejs, npm  the official A2A JS SDK interop tests, pinned by tests/a2a/js/package-lock.json
#   wrk          the HTTP benchmarks under bench/ (not run by the suite; docs/testing.md)
# and the official A2A Python SDK's own virtualenv, pinned by tests/a2a/sdk-lock.txt, outside the
# repository (tests/a2a/sdk-env.sh), so the interop tests install nothing while they run; and
# Arize Phoenix's, pinned by tests/otel/phoenix-lock.txt (tests/otel/phoenix-env.sh), the OTLP
# backend of the end-to-end trace test (about two minutes the first time, then reused).
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
missing=()
for pair in chromium:chromium zsh:zsh bwrap:bubblewrap setpriv:util-linux systemd-analyze:systemd node:nodejs npm:npm ip:iproute2 wrk:wrk; do
  command -v "${pair%%:*}" >/dev/null || missing+=("${pair##*:}")
done
ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2' || missing+=(libseccomp2)
if [ "${#missing[@]}" -gt 0 ]; then
  $SUDO apt-get update -q >/dev/null
  $SUDO apt-get install -y -q "${missing[@]}" >/dev/null
fi
npm ci --prefix tests/a2a/js --no-audit --no-fund --silent
bash tests/a2a/sdk-env.sh >/dev/null
bash tests/otel/phoenix-env.sh >/dev/null
bash tests/a2a/sdk-env.sh sdk-lock-0.3.txt >/dev/null
