"""The venv builder with real uv and real packages (six: small, pure Python, on PyPI)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from helpers import one_line_error

from ablation.envs.builder import VenvBuilder
from ablation.errors import AblationError
from ablation.spec.stacks import load_stack_file

pytestmark = pytest.mark.uv

STACK = """\
leg: small
platform: cpu
python: "3.11"
engine: six
packages:
  six: "1.16.0"
overrides:
  - name: six17
    models: [some/model]
    pins: {six: "1.17.0"}
    reason: "test variant"
"""

# A real local change to six.py, as patches/ would carry for a leg.
PATCH = """\
--- a/six.py
+++ b/six.py
@@ -29,3 +29,4 @@
 __author__ = "Benjamin Peterson <benjamin@python.org>"
 __version__ = "1.16.0"
+PATCHED_BY_ABLATION = True
 
"""


@pytest.fixture
def project(tmp_path):
    (tmp_path / "stacks").mkdir()
    (tmp_path / "patches").mkdir()
    stack = tmp_path / "stacks" / "small.yaml"
    stack.write_text(STACK)
    return tmp_path


def builder(project: Path, logs: list) -> VenvBuilder:
    return VenvBuilder(project / "venvs", project / "patches", log=logs.append)


def version_in(python: Path) -> str:
    return subprocess.run([str(python), "-c", "import six; print(six.__version__)"],
                          capture_output=True, text=True, check=True).stdout.strip()


# Is six's .pyc there and current for its source (the header's mtime and size), so an import
# reads it instead of compiling six.py again?
PYC_CURRENT = ("import importlib.util, os, struct, six; p = importlib.util.cache_from_source(six.__file__); "
               "st = os.stat(six.__file__); ok = os.path.exists(p) and struct.unpack('<4xIII', open(p, 'rb').read(16)) "
               "== (0, int(st.st_mtime) & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF); print(ok)")


def pyc_current(python: Path) -> bool:
    # -B: the probe itself must not write the .pyc it looks for
    out = subprocess.run([str(python), "-B", "-c", PYC_CURRENT], capture_output=True, text=True, check=True)
    return out.stdout.strip() == "True"


def test_build_compiles_bytecode_once_and_an_older_venv_gets_it_in_place(project):
    logs: list[str] = []
    b = builder(project, logs)
    env = b.ensure(load_stack_file(project / "stacks" / "small.yaml"))
    assert pyc_current(env.python) and env.manifest["bytecode"]["tool"] == "compileall"
    # a venv from before this step: its manifest has no "bytecode" and no .pyc exists
    man = {k: v for k, v in env.manifest.items() if k != "bytecode"}
    (env.path / "manifest.json").write_text(json.dumps(man))
    for pyc in env.path.rglob("*.pyc"):
        pyc.unlink()
    assert not pyc_current(env.python)
    lock = (env.path / "lock.txt").read_text()
    again = b.ensure(load_stack_file(project / "stacks" / "small.yaml"))
    assert again.path == env.path and pyc_current(again.python)
    assert again.manifest["bytecode"]["added_to_existing_venv"] is True and "bytecode compiled" in logs[-2]
    assert (env.path / "lock.txt").read_text() == lock and again.manifest["lock_sha256"] == env.manifest["lock_sha256"]
    b.ensure(load_stack_file(project / "stacks" / "small.yaml"))
    assert "up to date" in logs[-1] and "bytecode compiled" not in logs[-2]  # once


def test_build_records_lock_and_manifest_and_is_a_noop_when_unchanged(project):
    logs: list[str] = []
    b = builder(project, logs)
    assert b.installer.label == "uv", "the runner's own uv wheel must be found"
    sf = load_stack_file(project / "stacks" / "small.yaml")
    env = b.ensure(sf)
    assert version_in(env.python) == "1.16.0"
    lock = (env.path / "lock.txt").read_text()
    assert "six==1.16.0" in lock
    man = json.loads((env.path / "manifest.json").read_text())
    assert man["packages"]["six"] == "1.16.0" and man["installer"] == "uv"
    assert man["python_version"].startswith("3.11") and man["built_at"] and man["stack_sha256"] == sf.sha256
    mtime = (env.path / "manifest.json").stat().st_mtime_ns

    again = b.ensure(load_stack_file(project / "stacks" / "small.yaml"))
    assert (again.path / "manifest.json").stat().st_mtime_ns == mtime
    assert "up to date" in logs[-1]

    # A changed pin rebuilds; the old packages are gone, not merged.
    (project / "stacks" / "small.yaml").write_text(STACK.replace('six: "1.16.0"', 'six: "1.17.0"', 1))
    rebuilt = b.ensure(load_stack_file(project / "stacks" / "small.yaml"))
    assert version_in(rebuilt.python) == "1.17.0"
    assert "six==1.17.0" in (rebuilt.path / "lock.txt").read_text()


def test_override_builds_a_separate_named_variant(project):
    b = builder(project, [])
    sf = load_stack_file(project / "stacks" / "small.yaml")
    base = b.ensure(sf)
    variant = b.ensure(sf, sf.stack.override_for("some/model").name)
    assert variant.path.name == "small+six17" and variant.path != base.path
    assert version_in(base.python) == "1.16.0" and version_in(variant.python) == "1.17.0"
    assert variant.manifest["variant_reason"] == "test variant"


def test_patch_applies_to_this_leg_only_and_is_recorded(project):
    (project / "patches" / "six-mark.patch").write_text(PATCH)
    (project / "stacks" / "patched.yaml").write_text(
        STACK.replace("leg: small", "leg: patched") + "patches: [six-mark.patch]\n")
    b = builder(project, [])
    plain = b.ensure(load_stack_file(project / "stacks" / "small.yaml"))
    patched = b.ensure(load_stack_file(project / "stacks" / "patched.yaml"))
    probe = "import six; print(getattr(six, 'PATCHED_BY_ABLATION', False))"
    out = lambda env: subprocess.run([str(env.python), "-c", probe], capture_output=True, text=True).stdout.strip()  # noqa: E731
    assert out(patched) == "True"
    assert out(plain) == "False", "a patch leaked into another leg (hard links into uv's cache?)"
    assert pyc_current(patched.python), "bytecode compiled before the patch: every import recompiles six.py"
    assert patched.manifest["patches"][0]["file"] == "six-mark.patch"


def test_unresolvable_pin_is_one_line_and_leaves_no_half_venv(project, cli):
    (project / "stacks" / "broken.yaml").write_text(
        STACK.replace("leg: small", "leg: broken").replace('six: "1.16.0"', 'six: "99.0.0"', 1))
    b = builder(project, [])
    with pytest.raises(AblationError) as exc:
        b.ensure(load_stack_file(project / "stacks" / "broken.yaml"))
    msg = str(exc.value)
    assert "broken.yaml: field 'packages'" in msg and "six" in msg and "\n" not in msg
    assert not (project / "venvs" / "broken").exists()
    line = one_line_error(cli("--stacks-dir", str(project / "stacks"), "--patches-dir", str(project / "patches"),
                              "--venv-root", str(project / "venvs"), "stacks", "build", "broken"))
    assert "field 'packages'" in line


def test_two_runners_building_one_leg_at_once_get_one_complete_venv(project):
    """Two real `ablation stacks build` processes of the same leg at the same moment: without the
    per-venv build lock they deleted each other's files mid-install (seen on this machine)."""
    from helpers import REPO, project_argv

    argv = project_argv(project, "stacks", "build", "small")
    procs = [subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    joined = "\n".join(outs)
    assert joined.count("building in") == 1 and joined.count("up to date") == 1, joined
    manifest = json.loads((project / "venvs" / "small" / "manifest.json").read_text())
    assert (project / "venvs" / "small" / "build.log").is_file()
    assert version_in(Path(manifest["python_executable"])) == "1.16.0"


def test_pip_fallback_behind_the_same_interface_builds_the_same_leg(project):
    """No uv: the builder's policy is unchanged, only the installer's commands differ."""
    from ablation.envs.installers import PipInstaller

    logs: list = []
    b = builder(project, logs)
    b.installer = PipInstaller()
    env = b.ensure(load_stack_file(project / "stacks" / "small.yaml"))
    assert version_in(env.python) == "1.16.0"
    assert env.manifest["installer"] == "venv+pip (uv not found)" and "six==1.16.0" in (env.path / "lock.txt").read_text()
    assert b.ensure(load_stack_file(project / "stacks" / "small.yaml")).path == env.path  # no-op, like uv's
    assert any("up to date" in m for m in logs)
