"""Manifest parsing: strict on the fields the daemon reads, lenient on everything else."""

from __future__ import annotations

import pytest

from roost.core.manifest import ManifestError, parse_byte_count, parse_duration_secs, parse_manifest

FULL = """
name: orchestrator
version: 0.1.0
entrypoint: [main.py, --flag]
inference: {model: whatever}   # not ours: ignored
capabilities:
  network: {allow: [localhost, "https://example.com", "example.com:8443"], unix_sockets: true}
  peer_fetch: {allow: ["127.0.0.1:7700"]}
  shell: {allow: [git]}
  spawn: {allow: [worker]}
  env: {allow: [LANG]}
  filesystem: {scope: src, workdir_exec: true}
  install: {skill: ["a*"], tool: [x]}
  containment: scoped
  resources: {cpu_seconds: 10, max_file_size_bytes: 1Mi}
tools:
  - name: notes
    capabilities: {state: {}}
  - name: db
    capabilities: {state: {store: shared}}
lifecycle: {after_task: sleep, delegation_deadline_secs: 5m}
exports:
  peer_files: {root: share, max_ttl: 15m, max_bytes: 2Mi}
"""


def test_full_manifest() -> None:
    m = parse_manifest(FULL)
    assert m.coordinates == "orchestrator@0.1.0"
    assert m.entrypoint == ["main.py", "--flag"]
    caps = m.capabilities
    assert caps.network.unix_sockets and caps.filesystem.workdir_exec
    assert caps.containment == "scoped"
    assert caps.resources.max_file_size_bytes == 1024 * 1024
    assert m.state_stores() == frozenset({"notes", "shared"})
    assert m.lifecycle.delegation_deadline_secs == 300
    assert m.exports.peer_files is not None
    assert (m.exports.peer_files.max_ttl, m.exports.peer_files.max_bytes) == (900, 2 * 1024 * 1024)


@pytest.mark.parametrize(
    ("text", "start"),
    [
        ("name: x\n", "version: "),
        ("[1, 2]", "murmur.yaml must be a mapping"),
        ("name: x\nversion: 1\ncapabilities: {network: {allow: localhost}}", "capabilities.network.allow"),
        ("name: x\nversion: '1'\ncapabilities: {network: {allow: ['ftp://h']}}", "capabilities.network.allow"),
        ("name: X Y\nversion: '1'", "name: must be lowercase"),
        ("name: x\nversion: '1'\nentrypoint: 'python main.py'", "entrypoint: must be a list"),
        ("name: x\nversion: '1'\ncapabilities: {containment: fortress}", "capabilities.containment"),
        ("name: x\nversion: '1'\nexports: {peer_files: {root: ../up}}", "exports.peer_files.root"),
        ("name: x\nversion: '1'\nlifecycle: {delegation_deadline_secs: soon}", "lifecycle.delegation_deadline_secs"),
        ("name: x\n  version: [", "murmur.yaml is not valid YAML"),
    ],
)
def test_refusals_are_one_sentence(text: str, start: str) -> None:
    with pytest.raises(ManifestError) as err:
        parse_manifest(text)
    assert str(err.value).startswith(start), str(err.value)
    assert "\n" not in str(err.value)


def test_durations_and_byte_counts() -> None:
    assert parse_duration_secs("90") == 90 and parse_duration_secs("2h") == 7200 and parse_duration_secs(5) == 5
    assert parse_byte_count("3Ki") == 3072 and parse_byte_count(7) == 7


@pytest.mark.parametrize("bad", ["0", "-1", "1d", True, 1.5])
def test_bad_durations(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_duration_secs(bad)


@pytest.mark.parametrize("bad", ["1K", "0", False])
def test_bad_byte_counts(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_byte_count(bad)


@pytest.mark.parametrize(
    ("filesystem", "bad"),
    [
        ("{scope: /etc}", "/etc"),
        ("{scope: ../elsewhere}", "../elsewhere"),
        ("{scope: out/../../x}", "out/../../x"),
        ("{scope: out, read_only: [ref, /usr]}", "/usr"),
        ("{read_only: ['../up']}", "../up"),
    ],
)
def test_a_filesystem_path_outside_the_workdir_is_refused_at_parse(filesystem: str, bad: str) -> None:
    text = f"name: wide\nversion: 0.1.0\ncapabilities:\n  containment: advisory\n  filesystem: {filesystem}\n"
    with pytest.raises(ManifestError) as err:
        parse_manifest(text)
    assert str(err.value) == (
        f"E-CAP-002: wide@0.1.0 declares the filesystem path '{bad}', which is not a relative path inside "
        "the workdir, so its containment cannot be drawn"
    )


def test_filesystem_paths_inside_the_workdir_parse() -> None:
    text = "name: narrow\nversion: 0.1.0\ncapabilities:\n  filesystem: {scope: out/./x, read_only: [ref, out/a/../b]}\n"
    fs = parse_manifest(text).capabilities.filesystem
    assert fs.scope == "out/./x" and fs.read_only == ["ref", "out/a/../b"]
