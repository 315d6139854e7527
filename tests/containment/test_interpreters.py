"""Containment where people are: ``python3`` on ``PATH`` as a pyenv shim, as a virtual
environment's interpreter (a symlink into another tree), and as ``/usr/bin/python3``, under
``scoped`` and ``sealed`` (real hosts, real kernels, this machine's three interpreter setups).

A capsule declaring ``shell.allow: ["python3"]`` and the entrypoint ``python3 -c …`` runs under
each and stays contained (its interpreter runs; a binary it was not given does not); where the
host cannot run it, the launch is refused before it starts, with one sentence naming the
resolved path and the manifest change that fixes it.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from roost.capsule.probe import probe_host
from roost.observe.tracelines import read_trace
from tests.support.capsules import Capsules, base_env
from tests.support.registry import RegistryBuilder

OFFERED = probe_host().offered
ORDER = {"advisory": 0, "scoped": 1, "sealed": 2}
CLASSES = [c for c in ("scoped", "sealed") if ORDER[c] <= ORDER[OFFERED]]

PROBE = (
    "import json, subprocess, sys\n"
    "res = {'exe': sys.executable, 'prefix': sys.prefix}\n"
    "try:\n"
    "    res['id'] = subprocess.run(['/usr/bin/id'], capture_output=True).returncode\n"
    "except OSError as exc:\n"
    "    res['id'] = f'denied {exc.errno}'\n"
    "res['child'] = subprocess.run(['python3', '-c', 'print(7)'], capture_output=True, text=True).stdout.strip()\n"
    "print(json.dumps(res))\n"
)

PYENV_SHIMS = Path.home() / ".pyenv" / "shims"


def _pyenv_shim() -> Path | None:
    shim = PYENV_SHIMS / "python3"
    return shim if shim.is_file() else None


@pytest.fixture(scope="module")
def other_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment made for this test, outside the daemon's own: its ``python3`` is a
    symlink into the tree of the interpreter that made it."""
    root = tmp_path_factory.mktemp("venv") / "env"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    assert (root / "bin" / "python3").is_symlink()
    return root


def _setups(venv: Path) -> dict[str, str]:
    """PATH for each interpreter setup: the shim first, the venv's bin first, Debian's python."""
    out: dict[str, str] = {"system": "/usr/bin:/bin"}
    if _pyenv_shim() is not None:
        out["pyenv-shim"] = f"{PYENV_SHIMS}:/usr/bin:/bin"
    out["venv"] = f"{venv / 'bin'}:/usr/bin:/bin"
    return out


def _add(registry: RegistryBuilder, cls: str) -> None:
    registry.add(
        f"py-{cls}",
        capabilities={"containment": cls, "shell": {"allow": ["python3"]}},
        entrypoint=["python3", "-c", PROBE],
    )


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("setup", ["pyenv-shim", "venv", "system"])
async def test_python3_runs_contained_in_each_setup(
    registry: RegistryBuilder, capsules: Capsules, tmp_path: Path, other_venv: Path, cls: str, setup: str
) -> None:
    path = _setups(other_venv).get(setup)
    if path is None:
        pytest.skip(f"no {setup} interpreter on this host")
    _add(registry, cls)
    work = tmp_path / "w"
    work.mkdir()
    (work / "task.md").write_text("go")
    env = base_env(PATH=path)
    cp = await capsules.start(f"py-{cls}@0.1.0", work, registry=registry.root, env=env)
    rc = await cp.wait(within=90)
    result = (work / "out" / "result.txt").read_text() if (work / "out" / "result.txt").exists() else ""
    assert rc == 0, (rc, result, cp.stderr)
    import json

    res = json.loads(result.strip().splitlines()[-1])
    assert res["child"] == "7", res  # python3 from shell.allow runs inside
    assert str(res["id"]).startswith("denied"), res  # /usr/bin/id was not given
    if setup == "venv":
        assert res["prefix"] == str(other_venv), res  # still the venv's own interpreter
    start = read_trace(cp.trace)[0]
    assert start["containment_declared"] == cls


@pytest.mark.parametrize("cls", CLASSES)
async def test_an_unrunnable_interpreter_is_refused_with_its_path_and_the_fix(
    registry: RegistryBuilder, capsules: Capsules, tmp_path: Path, cls: str
) -> None:
    """A shim nothing can ask (a wrapper script that starts a program this host cannot foresee)
    is refused before anything runs, naming the resolved path and the manifest change."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    shim = bindir / "python3"
    shim.write_text('#!/bin/sh\n# a version manager shim\nexec "$HOME/.somewhere/libexec/tool" exec "$0" "$@"\n')
    shim.chmod(0o755)
    _add(registry, cls)
    work = tmp_path / "w"
    work.mkdir()
    (work / "task.md").write_text("go")
    cp = await capsules.start(
        f"py-{cls}@0.1.0",
        work,
        registry=registry.root,
        env=base_env(PATH=f"{bindir}:/usr/bin:/bin"),
        expect_ready=False,
    )
    assert await cp.wait(within=60) == 1
    said = [ln for ln in cp.stderr if "python3" in ln]
    assert said, cp.stderr
    sentence = said[-1]
    assert str(shim) in sentence and "entrypoint" in sentence and "/usr/bin/python3" in sentence
    assert not (work / "out" / "result.txt").exists()


def test_the_three_setups_exist_here(other_venv: Path) -> None:
    """The host this suite runs on has what the tests above exercise (or they say they skip)."""
    assert Path("/usr/bin/python3").exists()
    assert os.path.realpath(other_venv / "bin" / "python3") != str(other_venv / "bin" / "python3")
    if _pyenv_shim() is not None:
        assert shutil.which("python3", path=str(PYENV_SHIMS)) is not None


LOADERS = sorted(glob.glob("/lib*/ld-linux*.so*"))
LOADER_PROBE = (
    "import json, subprocess, sys\n"
    "res = {}\n"
    "for name, argv in (('venv_bin', [sys.argv[1], sys.argv[2]]), ('python', ['python3', '-c', 'print(7)'])):\n"
    "    try:\n"
    "        p = subprocess.run(argv, capture_output=True, text=True)\n"
    "        res[name] = p.stdout.strip() if p.returncode == 0 else f'denied rc={p.returncode}'\n"
    "    except OSError as exc:\n"
    "        res[name] = f'denied {exc.errno}'\n"
    "print(json.dumps(res))\n"
)


@pytest.mark.skipif(not LOADERS, reason="no glibc dynamic loader on this host")
@pytest.mark.parametrize("cls", CLASSES)
async def test_a_program_beside_the_venvs_interpreter_is_not_readable(
    registry: RegistryBuilder, capsules: Capsules, tmp_path: Path, other_venv: Path, cls: str
) -> None:
    """The interpreter's virtual environment is read (its pyvenv.cfg and lib), not its bin: a
    program installed there cannot be run through the dynamic loader (docs/security.md, E5)."""
    program = other_venv / "bin" / f"id-{cls}"
    shutil.copy("/usr/bin/id", program)
    registry.add(
        f"venvbin-{cls}",
        capabilities={"containment": cls, "shell": {"allow": ["python3"]}},
        entrypoint=["python3", "-c", LOADER_PROBE, LOADERS[0], str(program)],
    )
    work = tmp_path / "w"
    work.mkdir()
    (work / "task.md").write_text("go")
    env = base_env(PATH=f"{other_venv / 'bin'}:/usr/bin:/bin")
    cp = await capsules.start(f"venvbin-{cls}@0.1.0", work, registry=registry.root, env=env)
    rc = await cp.wait(within=90)
    result = (work / "out" / "result.txt").read_text() if (work / "out" / "result.txt").exists() else ""
    assert rc == 0, (rc, result, cp.stderr)
    import json

    res = json.loads(result.strip().splitlines()[-1])
    assert res["python"] == "7", res  # the venv's interpreter still runs, with its site-packages
    assert res["venv_bin"].startswith("denied"), res
