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
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ablation.errors import AblationError
from ablation.paths import cache_path
from ablation.stacks import StackFile, stack_fingerprint

MANIFEST = "manifest.json"
LOCK = "lock.txt"


def default_venv_root() -> Path:
    """Under the user cache so venvs survive between CI runs on one machine."""
    return cache_path("ABLATION_VENV_ROOT", "venvs")


def find_uv() -> str | None:
    """uv from the runner's own environment (the `uv` wheel), else from PATH."""
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        return shutil.which("uv")


def venv_name(leg: str, variant: str | None) -> str:
    return leg if variant is None else f"{leg}+{variant}"


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
    )
    return Path(out.stdout.strip())


def _dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


class VenvBuilder:
    """Creates, reuses or rebuilds leg venvs; one instance per runner invocation."""

    def __init__(self, venv_root: Path, patches_dir: Path, log=print):
        self.venv_root = venv_root
        self.patches_dir = patches_dir
        self.log = log
        self.uv = find_uv()

    def path_for(self, leg: str, variant: str | None = None) -> Path:
        return self.venv_root / venv_name(leg, variant)

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
        """Build the venv unless an identical one exists (then it is a no-op)."""
        if not force:
            env = self.existing(sf, variant)
            if env is not None:
                self.log(f"[stacks] {venv_name(sf.leg, variant)}: up to date ({env.path})")
                return env
        return self._build(sf, variant)

    def _run(self, argv: list[str], log_file, what: str, sf: StackFile) -> None:
        log_file.write(f"$ {' '.join(argv)}\n")
        log_file.flush()
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
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
        if s.base == "system":
            raise AblationError(
                f"{sf.path}: field 'base': 'system' legs are prepared on their machine by scripts/device-stage"
            )
        path = self.path_for(sf.leg, variant)
        name = venv_name(sf.leg, variant)
        self.log(f"[stacks] {name}: building in {path}")
        started = time.time()
        if path.exists():
            shutil.rmtree(path)
        self.venv_root.mkdir(parents=True, exist_ok=True)
        pins = s.resolved_pins(variant)
        build_log = self.venv_root / f"{name}.build.log"
        with open(build_log, "w") as log_file:
            python = self._create_and_install(sf, path, pins, log_file)
            patches = self._apply_patches(sf, python, log_file)
            lock_text = self._freeze(python, log_file)
        shutil.move(str(build_log), path / "build.log")
        (path / LOCK).write_text(lock_text)
        manifest = {
            "leg": sf.leg,
            "variant": variant,
            "variant_reason": s.variant(variant).reason if variant else None,
            "stack_file": str(sf.path),
            "stack_sha256": sf.sha256,
            "fingerprint": stack_fingerprint(sf, variant, self.patches_dir),
            "installer": "uv" if self.uv else "venv+pip (uv not found)",
            "installer_version": self._installer_version(),
            "python_executable": str(python),
            "python_version": subprocess.run(
                [str(python), "-c", "import platform; print(platform.python_version())"],
                capture_output=True, text=True, check=True,
            ).stdout.strip(),
            "pins": pins,
            "packages": _parse_freeze(lock_text),
            "excluded": s.exclude,
            "find_links": s.find_links,
            "index_url": s.index_url,
            "extra_index_urls": s.extra_index_urls,
            "patches": patches,
            "lock_sha256": hashlib.sha256(lock_text.encode()).hexdigest(),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "build_seconds": round(time.time() - started, 1),
            "build_host": platform.node(),
            "size_bytes": _dir_size(path),
        }
        # Written last: its presence marks the venv complete.
        (path / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))
        self.log(f"[stacks] {name}: built in {manifest['build_seconds']} s, {manifest['size_bytes'] / 1e9:.2f} GB")
        return LegEnv(sf.leg, variant, path, python, manifest)

    def _installer_version(self) -> str:
        if not self.uv:
            return f"pip (python {sys.version.split()[0]})"
        return subprocess.run([self.uv, "--version"], capture_output=True, text=True).stdout.strip()

    def _create_and_install(self, sf: StackFile, path: Path, pins: dict[str, str], log_file) -> Path:
        s = sf.stack
        req = path.parent / f"{path.name}.requirements.txt"
        req.write_text("".join(f"{n}=={v}\n" for n, v in sorted(pins.items())))
        source_args = s.source_args()
        try:
            if self.uv:
                self._run([self.uv, "venv", "--python", s.python, "--no-project", str(path)], log_file, "python", sf)
                python = path / "bin" / "python"
                argv = [self.uv, "pip", "install", "--python", str(python), "--link-mode", "copy", "-r", str(req)]
                if s.exclude:
                    excludes = path.parent / f"{path.name}.excludes.txt"
                    excludes.write_text("".join(f"{n}\n" for n in sorted(s.exclude)))
                    argv += ["--excludes", str(excludes)]
                self._run(argv + source_args, log_file, "packages", sf)
            else:
                interpreter = shutil.which(f"python{s.python}")
                if interpreter is None:
                    raise AblationError(f"{sf.path}: field 'python': python{s.python} not found on PATH")
                self._run([interpreter, "-m", "venv", str(path)], log_file, "python", sf)
                python = path / "bin" / "python"
                self._run([str(python), "-m", "pip", "install", "-r", str(req)] + source_args, log_file, "packages", sf)
                for name in sorted(s.exclude):
                    subprocess.run([str(python), "-m", "pip", "uninstall", "-y", name], capture_output=True)
        except AblationError:
            shutil.rmtree(path, ignore_errors=True)
            raise
        finally:
            req.unlink(missing_ok=True)
            (path.parent / f"{path.name}.excludes.txt").unlink(missing_ok=True)
        return python

    def _apply_patches(self, sf: StackFile, python: Path, log_file) -> list[dict]:
        applied = []
        if not sf.stack.patches:
            return applied
        site = _site_packages(python)
        for name in sf.stack.patches:
            patch_file = self.patches_dir / name
            self._run(["patch", "-p1", "--forward", "-d", str(site), "-i", str(patch_file)], log_file, "patches", sf)
            applied.append({"file": name, "sha256": hashlib.sha256(patch_file.read_bytes()).hexdigest()})
        return applied

    def _freeze(self, python: Path, log_file) -> str:
        if self.uv:
            argv = [self.uv, "pip", "freeze", "--python", str(python)]
        else:
            argv = [str(python), "-m", "pip", "freeze", "--all"]
        proc = subprocess.run(argv, capture_output=True, text=True, check=True)
        return proc.stdout


def _parse_freeze(text: str) -> dict[str, str]:
    packages = {}
    for line in text.splitlines():
        if "==" in line:
            name, version = line.split("==", 1)
            packages[name.strip().lower()] = version.strip()
    return packages
