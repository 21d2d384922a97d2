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


VARIANT_STACK = STACK + """\
overrides:
  - name: six-new
    models: ["org/needs-new-six"]
    pins:
      six: "1.17.0"
    reason: "this model needs six 1.17.0; the interpreter holds 1.16.0"
"""


def version_and_file(python: Path, module: str) -> tuple[str, str]:
    out = subprocess.run([str(python), "-c", f"import {module}; print({module}.__version__); print({module}.__file__)"],
                         capture_output=True, text=True, check=True).stdout.split()
    return out[0], out[1]


@pytest.mark.parametrize("installer", ["uv", "pip"])
def test_override_variant_shadows_the_interpreters_version(tmp_path, installer):
    """As 0.26-h200+gemma4-tf5.14.1 on the H200: the image holds transformers 5.17.0, the variant pins
    5.14.1. The variant must install its pin into its own overlay, shadowing the interpreter's copy;
    the base leg keeps the interpreter's; the interpreter is not touched; the manifest says so."""
    uv = find_uv()
    interp = tmp_path / "interp"  # pip in it: the device's installer is the pip fallback (no uv there)
    subprocess.run([uv, "venv", "-q", "--python", "3.11", str(interp)], check=True)
    system_python = interp / "bin" / "python"
    subprocess.run([uv, "pip", "install", "-q", "--python", str(system_python), "pip", "six==1.16.0"], check=True)
    (tmp_path / "stacks").mkdir()
    (tmp_path / "patches").mkdir()
    (tmp_path / "stacks" / "sys.yaml").write_text(VARIANT_STACK.format(python=system_python, version="3.11"))
    sf = load_stack_file(tmp_path / "stacks" / "sys.yaml")
    builder = VenvBuilder(tmp_path / "venvs", tmp_path / "patches", log=lambda m: None)
    if installer == "pip":
        builder.installer = PipInstaller()
    assert sf.stack.override_for("org/needs-new-six").name == "six-new"

    base = builder.ensure(sf)
    variant = builder.ensure(sf, "six-new")
    assert variant.path == tmp_path / "venvs" / "sys+six-new" and variant.path != base.path

    # what each venv imports
    assert version_and_file(base.python, "six") == ("1.16.0", version_and_file(system_python, "six")[1])
    v_version, v_file = version_and_file(variant.python, "six")
    assert v_version == "1.17.0" and v_file.startswith(str(variant.path))
    assert version_and_file(system_python, "six")[0] == "1.16.0"  # the interpreter itself is untouched

    # what each manifest says
    assert base.manifest["from_system"] == ["six"] and base.manifest["overlay"] == ["packaging"]
    assert base.manifest["shadowed"] == {} and base.manifest["packages"]["six"] == "1.16.0"
    m = variant.manifest
    assert m["variant"] == "six-new" and m["variant_reason"].startswith("this model needs six 1.17.0")
    assert m["pins"] == {"six": "1.17.0", "packaging": "24.1"}
    assert m["from_system"] == [] and m["overlay"] == ["packaging", "six"]
    assert m["shadowed"] == {"six": "1.16.0"}
    assert m["packages"]["six"] == "1.17.0"
    # the resolved set: the variant's lock is what it imports, not the interpreter's copy
    lock = (variant.path / "lock.txt").read_text()
    assert "six==1.17.0" in lock and "six==1.16.0" not in lock and "packaging==24.1" in lock
    assert "six==1.16.0" in (base.path / "lock.txt").read_text()
    # rebuilt from scratch only when the variant's pins change: a second ensure is a no-op
    assert builder.ensure(sf, "six-new").manifest["built_at"] == m["built_at"]
