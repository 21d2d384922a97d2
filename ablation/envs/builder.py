"""Build one isolated venv per leg (and per override variant) with uv.

Each venv lives at <venv root>/<leg>[+<variant>] and carries:
  lock.txt       `uv pip freeze` of what was resolved: the exact set measured
  manifest.json  python, every package version, sources, patches, build time
  build.log      the installer's full output
The manifest is written last and records a fingerprint of the stack; a build
whose fingerprint matches is a no-op, anything else rebuilds from scratch.
Packages are copied, never hard-linked from uv's cache, so a patch applied to
one leg's site-packages can never leak into another leg.
"""

from __future__ import annotations

import hashlib
import json
import platform
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from ablation.envs.environment import leg_env
from ablation.envs.installers import Installer, find_installer
from ablation.errors import AblationError
from ablation.spec import identifiers
from ablation.spec.stacks import StackFile, patch_path, stack_fingerprint
from ablation.util.paths import cache_path
from ablation.util.timestamps import utc_stamp

MANIFEST = "manifest.json"
LOCK = "lock.txt"


def default_venv_root() -> Path:
    """Under the user cache so venvs survive between CI runs on one machine."""
    return cache_path("ABLATION_VENV_ROOT", "venvs")


def venv_name(leg: str, variant: str | None) -> str:
    """<leg>[+<variant>]: both checked, so the name is one folder inside the venv root."""
    name = identifiers.check(identifiers.leg_name, leg, "leg")
    return name if variant is None else f"{name}+{identifiers.check(identifiers.variant_name, variant, 'variant')}"


@dataclass(frozen=True)
class LegEnv:
    """A built environment the harness can run in."""

    leg: str
    variant: str | None
    path: Path
    python: Path
    manifest: dict

    @property
    def lock_sha256(self) -> str:
        return self.manifest["lock_sha256"]


def _site_packages(python: Path) -> Path:
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
        env=leg_env(),
    )
    return Path(out.stdout.strip())


def _compile_bytecode(python: Path, log_file) -> dict:
    """Every module of the leg compiled to .pyc at build time.

    Without it each task process compiles vllm, torch and transformers from source on import
    (nothing writes .pyc when PYTHONDONTWRITEBYTECODE is set, as on these machines): 0.29-cpu's
    `from vllm import LLM` took 25.8 s, 13-18 s with bytecode (measured, 2 cores). Start-up only:
    the executed code is the same. Exit status 1 is expected: some wheels ship files that are not
    Python 3 (templates, examples); they stay uncompiled, as with `uv pip install --compile-bytecode`.
    """
    site = _site_packages(python)
    argv = [str(python), "-m", "compileall", "-q", "-j", "0", str(site)]
    log_file.write(f"$ {' '.join(argv)}\n")
    log_file.flush()
    started = time.time()
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=leg_env())
    log_file.write(proc.stdout[-20000:])
    log_file.flush()
    if proc.returncode not in (0, 1):
        raise AblationError(f"{site}: compileall exited {proc.returncode}: {proc.stdout.strip()[-300:]}")
    not_compiled = sum(ln.startswith("*** Error compiling ") for ln in proc.stdout.splitlines())  # one per file
    return {"tool": "compileall", "seconds": round(time.time() - started, 1), "files_not_compiled": not_compiled}


def _dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


class VenvBuilder:
    """Creates, reuses or rebuilds leg venvs; one instance per runner invocation."""

    def __init__(self, venv_root: Path, patches_dir: Path, log=print):
        self.venv_root = venv_root
        self.patches_dir = patches_dir
        self.log = log
        self.installer: Installer = find_installer()

    def path_for(self, leg: str, variant: str | None = None) -> Path:
        return self.venv_root / venv_name(leg, variant)

    def _remove_venv(self, path: Path) -> None:
        """Delete a leg's venv: only a folder proven to lie inside the venv root, never the root
        itself or anything above it (a leg named '.' or '..' once removed every venv and models)."""
        root = self.venv_root.resolve()
        target = path.resolve() if not path.is_symlink() else path.parent.resolve() / path.name
        if target == root or not target.is_relative_to(root) or target.parent != root:
            raise AblationError(f"refusing to delete {path}: not a leg venv inside {self.venv_root}")
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.exists():
            shutil.rmtree(path)

    def existing(self, sf: StackFile, variant: str | None = None) -> LegEnv | None:
        """The venv if it is complete and matches the stack file, else None."""
        path = self.path_for(sf.leg, variant)
        manifest_path = path / MANIFEST
        if not manifest_path.is_file():
            return None
        manifest = json.loads(manifest_path.read_text())
        python = Path(manifest["python_executable"])
        if manifest.get("fingerprint") != stack_fingerprint(sf, variant, self.patches_dir) or not python.exists():
            return None
        return LegEnv(sf.leg, variant, path, python, manifest)

    def ensure(self, sf: StackFile, variant: str | None = None, force: bool = False) -> LegEnv:
        """Build the venv unless an identical one exists (then it is a no-op).

        One build of a venv at a time on this machine: two runners building the same leg at
        once deleted each other's files (seen: a failed install, a lost build.log). The second
        waits, then finds the first one's venv up to date."""
        if variant is not None:
            sf.stack.variant(variant)  # an unknown variant is refused before anything is created
        self.venv_root.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.venv_root / f"{venv_name(sf.leg, variant)}.build.lock")):
            if not force:
                env = self.existing(sf, variant)
                if env is not None and "bytecode" not in env.manifest:
                    env = self._add_bytecode(env)
                if env is not None:
                    self.log(f"[stacks] {venv_name(sf.leg, variant)}: up to date ({env.path})")
                    return env
            return self._build(sf, variant)

    def _add_bytecode(self, env: LegEnv) -> LegEnv:
        """A venv built before bytecode was compiled at build time gets it once, in place: the
        packages and the lock do not change (checked), only the start-up cost does."""
        name = venv_name(env.leg, env.variant)
        with open(env.path / "build.log", "a") as log_file:
            lock_before = (env.path / LOCK).read_text()
            bytecode = _compile_bytecode(env.python, log_file)
        if (env.path / LOCK).read_text() != lock_before:
            raise AblationError(f"{env.path / LOCK}: changed while compiling bytecode; rebuild with `ablation stacks build --force`")
        manifest = {**env.manifest, "bytecode": {**bytecode, "added_to_existing_venv": True}}
        (env.path / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))
        self.log(f"[stacks] {name}: bytecode compiled in {bytecode['seconds']} s (once; start-up only)")
        return LegEnv(env.leg, env.variant, env.path, env.python, manifest)

    def _run(self, argv: list[str], log_file, what: str, sf: StackFile) -> None:
        log_file.write(f"$ {' '.join(argv)}\n")
        log_file.flush()
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=leg_env())
        log_file.write(proc.stdout)
        log_file.flush()
        if proc.returncode != 0:
            lines = [ln.strip() for ln in proc.stdout.splitlines() if ln.strip()]
            # uv states the conflict in the lines after "No solution found"; keep them on one line.
            idx = next((i for i, ln in enumerate(lines) if "No solution found" in ln or ln.startswith("error")), None)
            detail = " ".join(lines[idx : idx + 3]) if idx is not None else (lines[-1] if lines else "no output")
            raise AblationError(f"{sf.path}: field '{what}': {detail[:400]} (full log: {log_file.name})")

    def _build(self, sf: StackFile, variant: str | None) -> LegEnv:
        s = sf.stack
        path = self.path_for(sf.leg, variant)
        name = venv_name(sf.leg, variant)
        self.log(f"[stacks] {name}: building in {path}")
        started = time.time()
        if path.exists() or path.is_symlink():
            self._remove_venv(path)
        self.venv_root.mkdir(parents=True, exist_ok=True)
        pins = s.resolved_pins(variant)
        build_log = self.venv_root / f"{name}.build.log"
        system_info: dict = {}
        with open(build_log, "w") as log_file:
            if s.base == "system":
                python, system_info, visible = self._overlay_on_system(sf, path, pins, log_file)
                # The lock of a system-based leg: everything importable, system and overlay alike.
                lock_text = "".join(f"{n}=={v}\n" for n, v in sorted(visible.items()))
            else:
                python = self._create_and_install(sf, path, pins, log_file)
                lock_text = self._freeze(python, log_file)
            patches = self._apply_patches(sf, python, log_file)
            bytecode = _compile_bytecode(python, log_file)  # after patches: a patched file gets its own .pyc
        shutil.move(str(build_log), path / "build.log")
        (path / LOCK).write_text(lock_text)
        manifest = {
            "leg": sf.leg,
            "variant": variant,
            "variant_reason": s.variant(variant).reason if variant else None,
            "stack_file": str(sf.path),
            "stack_sha256": sf.sha256,
            "fingerprint": stack_fingerprint(sf, variant, self.patches_dir),
            "installer": self.installer.label,
            "installer_version": self.installer.version(leg_env()),
            "python_executable": str(python),
            "python_version": subprocess.run(
                [str(python), "-c", "import platform; print(platform.python_version())"],
                capture_output=True, text=True, check=True, env=leg_env(),
            ).stdout.strip(),
            "pins": pins,
            "packages": _parse_freeze(lock_text),
            "excluded": s.exclude,
            "find_links": s.find_links,
            "index_url": s.index_url,
            "no_index": s.no_index,
            "extra_index_urls": s.extra_index_urls,
            "patches": patches,
            "lock_sha256": hashlib.sha256(lock_text.encode()).hexdigest(),
            "built_at": utc_stamp(),
            "build_seconds": round(time.time() - started, 1),
            "build_host": platform.node(),
            "size_bytes": _dir_size(path),
            "base": s.base,
            "bytecode": bytecode,
            **system_info,
        }
        # Written last: its presence marks the venv complete.
        (path / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))
        self.log(f"[stacks] {name}: built in {manifest['build_seconds']} s, {manifest['size_bytes'] / 1e9:.2f} GB")
        return LegEnv(sf.leg, variant, path, python, manifest)

    def _create_and_install(self, sf: StackFile, path: Path, pins: dict[str, str], log_file) -> Path:
        s = sf.stack
        req = path.parent / f"{path.name}.requirements.txt"
        req.write_text("".join(f"{n}=={v}\n" for n, v in sorted(pins.items())))
        source_args = s.source_args()
        excludes = path.parent / f"{path.name}.excludes.txt"
        try:
            self._run(self._venv_argv(sf, s.python, path, overlay=False, field="python"), log_file, "python", sf)
            python = path / "bin" / "python"
            if s.exclude:
                excludes.write_text("".join(f"{n}\n" for n in sorted(s.exclude)))
            inst = self.installer.install(python, req, excludes if s.exclude else None, source_args)
            self._run(inst, log_file, "packages", sf)
            for argv in self.installer.after_install(python, list(s.exclude)):
                subprocess.run(argv, capture_output=True, env=leg_env())
        except AblationError:
            if path.exists():
                self._remove_venv(path)
            raise
        finally:
            req.unlink(missing_ok=True)
            excludes.unlink(missing_ok=True)
        return python

    def _venv_argv(self, sf: StackFile, interpreter: str, path: Path, *, overlay: bool, field: str) -> list[str]:
        try:
            return self.installer.create_venv(interpreter, path, overlay=overlay)
        except LookupError as exc:
            raise AblationError(f"{sf.path}: field '{field}': {exc}") from None

    def _overlay_on_system(self, sf: StackFile, path: Path, pins: dict[str, str],
                           log_file) -> tuple[Path, dict, dict[str, str]]:
        """A leg on an existing interpreter (a machine whose python already holds torch, say).

        The leg is a fresh venv whose site-packages comes first and which sees the
        interpreter's own site-packages through a .pth file (this works when that
        interpreter is itself a venv, where --system-site-packages would not). Pins the
        interpreter already satisfies are reused; the others are installed into the
        venv without dependencies: the stack names the whole overlay. A pin the
        interpreter holds at another version (an override variant's transformers, say)
        goes into the overlay too, which shadows the interpreter's copy (the venv's
        site-packages comes first on sys.path) without touching it; the manifest names
        each such pin with the interpreter's version under `shadowed`. Returns the
        interpreter, what the manifest records, and every visible distribution's version.
        """
        s = sf.stack
        system = shutil.which(s.system_python) or s.system_python
        probe = subprocess.run([system, "-c", "import json, platform, sysconfig; p = sysconfig.get_paths(); "
                                "print(json.dumps([platform.python_version(), p['purelib'], p['platlib']]))"],
                               capture_output=True, text=True, env=leg_env())
        if probe.returncode != 0:
            raise AblationError(f"{sf.path}: field 'system_python': {s.system_python} does not run")
        version, purelib, platlib = json.loads(probe.stdout)
        if not version.startswith(s.python + "."):
            raise AblationError(f"{sf.path}: field 'python': {s.system_python} is Python {version}, not {s.python}")
        self._run(self._venv_argv(sf, system, path, overlay=True, field="system_python"), log_file,
                  "system_python", sf)
        python = path / "bin" / "python"
        site = _site_packages(python)
        (site / "_ablation_system_base.pth").write_text("".join(f"{p}\n" for p in dict.fromkeys([purelib, platlib])))
        have = _visible_versions(python)
        overlay = {n: v for n, v in pins.items() if have.get(_canon(n)) != v}
        if overlay:
            req = path / "overlay-requirements.txt"
            req.write_text("".join(f"{n}=={v}\n" for n, v in sorted(overlay.items())))
            self._run(self.installer.install_no_deps(python, site, system, req, s.source_args()), log_file,
                      "packages", sf)
        now = _visible_versions(python)
        wrong = {n: now.get(_canon(n)) for n, v in pins.items() if now.get(_canon(n)) != v}
        if wrong:
            detail = ", ".join(f"{n}=={pins[n]} (found {v or 'nothing'})" for n, v in wrong.items())
            raise AblationError(f"{sf.path}: field 'packages': after the overlay, {detail}")
        shadowed = {n: have[_canon(n)] for n in sorted(overlay) if _canon(n) in have}
        return python, {"system_python": s.system_python, "system_site_packages": sorted({purelib, platlib}),
                        "from_system": sorted(set(pins) - set(overlay)), "overlay": sorted(overlay),
                        "shadowed": shadowed}, now

    def _apply_patches(self, sf: StackFile, python: Path, log_file) -> list[dict]:
        applied = []
        if not sf.stack.patches:
            return applied
        site = _site_packages(python)
        for name in sf.stack.patches:
            patch_file = patch_path(self.patches_dir, name)
            if patch_file is None:
                raise AblationError(f"{sf.path}: field 'patches': {name} is not a file in the patches directory "
                                    f"{self.patches_dir}")
            self._run(["patch", "-p1", "--forward", "-d", str(site), "-i", str(patch_file)], log_file, "patches", sf)
            applied.append({"file": name, "sha256": hashlib.sha256(patch_file.read_bytes()).hexdigest()})
        return applied

    def _freeze(self, python: Path, log_file) -> str:
        proc = subprocess.run(self.installer.freeze(python), capture_output=True, text=True, check=True, env=leg_env())
        return proc.stdout


def _canon(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


# In sys.path order (a list, not a dict: the first of two installs is the one imported).
_LIST_DISTS = ("import importlib.metadata as m, json; "
               "print(json.dumps([[d.metadata['Name'], d.version] for d in m.distributions() if d.metadata['Name']]))")


def _visible_versions(python: Path) -> dict[str, str]:
    """Every distribution the interpreter can import, by canonical name (first on sys.path wins)."""
    out = subprocess.run([str(python), "-c", _LIST_DISTS], capture_output=True, text=True, check=True, env=leg_env())
    seen: dict[str, str] = {}
    for name, version in json.loads(out.stdout):
        seen.setdefault(_canon(name), version)
    return seen


def _parse_freeze(text: str) -> dict[str, str]:
    packages = {}
    for line in text.splitlines():
        if "==" in line:
            name, version = line.split("==", 1)
            packages[name.strip().lower()] = version.strip()
    return packages
