"""A leg on an existing interpreter ('system' base), as on a GPU machine whose python holds torch.

The "existing interpreter" here is itself a venv (as /opt/torch/.venv is on the
lent H200), made with real uv and holding six; the leg must reuse six from it
and overlay only what it lacks.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ablation.envs.builder import VenvBuilder
from ablation.envs.installers import PipInstaller, find_uv
from ablation.errors import AblationError
from ablation.spec.stacks import load_stack_file

pytestmark = pytest.mark.uv

STACK = """\
leg: sys
platform: cpu
base: system
system_python: {python}
python: "{version}"
engine: six
packages:
  six: "1.16.0"
  packaging: "24.1"
"""


@pytest.fixture(scope="module")
def system_python(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("system")
    uv = find_uv()
    subprocess.run([uv, "venv", "-q", "--python", "3.11", str(root / "py")], check=True)
    subprocess.run([uv, "pip", "install", "-q", "--python", str(root / "py/bin/python"), "six==1.16.0"], check=True)
    return root / "py/bin/python"


def build(tmp_path: Path, text: str):
    (tmp_path / "stacks").mkdir(exist_ok=True)
    (tmp_path / "patches").mkdir(exist_ok=True)
    (tmp_path / "stacks" / "sys.yaml").write_text(text)
    sf = load_stack_file(tmp_path / "stacks" / "sys.yaml")
    return VenvBuilder(tmp_path / "venvs", tmp_path / "patches", log=lambda m: None).ensure(sf)


def where(python: Path, module: str) -> str:
    return subprocess.run([str(python), "-c", f"import {module}; print({module}.__file__)"],
                          capture_output=True, text=True, check=True).stdout.strip()


def test_reuses_what_the_interpreter_has_and_overlays_the_rest(tmp_path, system_python):
    env = build(tmp_path, STACK.format(python=system_python, version="3.11"))
    assert env.manifest["base"] == "system"
    assert env.manifest["from_system"] == ["six"] and env.manifest["overlay"] == ["packaging"]
    assert where(env.python, "six").startswith(str(system_python.parent.parent))
    assert where(env.python, "packaging").startswith(str(env.path))
    lock = (env.path / "lock.txt").read_text()
    assert "six==1.16.0" in lock and "packaging==24.1" in lock
    # the interpreter itself was not touched
    assert subprocess.run([str(system_python), "-c", "import packaging"], capture_output=True).returncode != 0


def test_interpreter_of_another_python_is_refused(tmp_path, system_python):
    with pytest.raises(AblationError) as exc:
        build(tmp_path, STACK.format(python=system_python, version="3.12"))
    assert "field 'python'" in str(exc.value) and "not 3.12" in str(exc.value)


def test_system_base_needs_an_interpreter(tmp_path):
    with pytest.raises(AblationError) as exc:
        build(tmp_path, STACK.replace("system_python: {python}\n", "").format(version="3.11"))
    assert "needs system_python" in str(exc.value)


def test_offline_overlay_without_uv_from_find_links(tmp_path, monkeypatch):
    """As on the lent H200: no uv, no registry (pip, --no-index, staged wheels), an interpreter
    that holds one pinned package at another version, and a runner that gets a package
    through PYTHONPATH. Both failed there before: the version check read the interpreter's
    copy instead of the overlay's, and the PYTHONPATH copy was counted as the leg's."""
    wheels, runner_site = tmp_path / "wheels", tmp_path / "runner-site"
    uv = find_uv()
    interp = tmp_path / "interp"
    subprocess.run([uv, "venv", "-q", "--python", "3.11", str(interp)], check=True)
    subprocess.run([uv, "pip", "install", "-q", "--python", str(interp / "bin/python"), "pip", "six==1.16.0",
                    "packaging==23.2"], check=True)
    subprocess.run([uv, "pip", "install", "-q", "--target", str(runner_site), "annotated-types==0.7.0"], check=True)
    subprocess.run([str(interp / "bin/python"), "-m", "pip", "download", "-q", "--no-deps", "-d", str(wheels),
                    "packaging==24.1", "annotated-types==0.7.0"], check=True)
    text = STACK.format(python=interp / "bin/python", version="3.11")
    text += f'  annotated-types: "0.7.0"\nfind_links: [{wheels}]\nno_index: true\n'
    (tmp_path / "stacks").mkdir()
    (tmp_path / "patches").mkdir()
    (tmp_path / "stacks" / "sys.yaml").write_text(text)
    builder = VenvBuilder(tmp_path / "venvs", tmp_path / "patches", log=lambda m: None)
    builder.installer = PipInstaller()  # as on the device: the pip fallback
    monkeypatch.setenv("PYTHONPATH", str(runner_site))
    env = builder.ensure(load_stack_file(tmp_path / "stacks" / "sys.yaml"))
    assert env.manifest["from_system"] == ["six"]
    assert env.manifest["overlay"] == ["annotated-types", "packaging"]
    monkeypatch.delenv("PYTHONPATH")
    assert where(env.python, "packaging").startswith(str(env.path))
    assert where(env.python, "annotated_types").startswith(str(env.path))
    log = (env.path / "build.log").read_text()
    assert "--no-index" in log and "--index-url" not in log
    lock = (env.path / "lock.txt").read_text()
    assert "packaging==24.1" in lock and "packaging==23.2" not in lock
