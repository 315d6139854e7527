"""``roostctl completion bash|zsh``: scripts generated from the parser that real shells accept."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from ops.support import roostctl

from roost.ctl.commands import VERBS


def _complete_bash(script: str, words: list[str]) -> list[str]:
    prog = (
        f"{script}\nCOMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}; "
        '_roostctl; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    res = subprocess.run(["bash", "-c", prog], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    return res.stdout.split()


def test_bash_completion_from_the_parser() -> None:
    res = roostctl("completion", "bash")
    assert res.code == 0 and "complete -F _roostctl roostctl" in res.out
    script = res.out
    assert subprocess.run(["bash", "-n"], input=script, text=True, timeout=30).returncode == 0
    assert _complete_bash(script, ["roostctl", "sta"]) == ["status"]
    assert set(_complete_bash(script, ["roostctl", ""])) >= set(VERBS)
    assert _complete_bash(script, ["roostctl", "jobs", "--state", "te"]) == ["terminated"]
    assert {"ls", "add", "verify"} <= set(_complete_bash(script, ["roostctl", "registry", ""]))
    assert "--no-browser" in _complete_bash(script, ["roostctl", "dashboard", "--"])
    assert "--wide" in _complete_bash(script, ["roostctl", "--state-dir", "/x", "jobs", "--w"])
    assert {"bash", "zsh"} <= set(_complete_bash(script, ["roostctl", "completion", ""]))


def test_zsh_completion_from_the_parser() -> None:
    res = roostctl("completion", "zsh")
    assert res.code == 0 and res.out.startswith("#compdef roostctl")
    for verb in VERBS:
        assert f"'{verb}:" in res.out
    assert "--state[only jobs in this state" in res.out and "(starting running complete" in res.out
    zsh = shutil.which("zsh")
    if zsh is None:
        pytest.skip("zsh is not installed (tests/system-deps.sh installs it)")
    assert subprocess.run([zsh, "-n"], input=res.out, text=True, timeout=30).returncode == 0
    # Loaded for real: compinit, then the function is defined and bound to roostctl.
    prog = f"autoload -U compinit && compinit -u\n{res.out}\nprint -r -- ${{_comps[roostctl]}}"
    out = subprocess.run([zsh, "-f", "-c", prog], capture_output=True, text=True, timeout=30)
    assert out.stdout.strip() == "_roostctl", out


def test_completion_needs_a_shell() -> None:
    res = roostctl("completion", "fish")
    assert res.code == 2 and "invalid choice" in res.err
