"""Package installers behind one interface: uv (the default) and venv+pip (the fallback).

The builder (venvs.py) decides what to build and records it; an installer only
says which command does each step, as nox keeps its virtualenv/uv backends
apart from its sessions. Every method returns argv lists: nothing here runs a
shell, and the builder runs them with its own logging and error attribution.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from abc import ABC, abstractmethod
from pathlib import Path


def find_uv() -> str | None:
    """uv from the runner's own environment (the `uv` wheel), else from PATH."""
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        return shutil.which("uv")


class Installer(ABC):
    label: str  # what the manifest's "installer" field says

    @abstractmethod
    def version(self, env: dict[str, str]) -> str: ...

    @abstractmethod
    def create_venv(self, interpreter: str, path: Path, *, overlay: bool) -> list[str]:
        """A venv at `path` on `interpreter` (a version like "3.11", or an executable).
        `overlay`: the venv only receives --no-deps wheels on top of that interpreter."""

    @abstractmethod
    def install(self, python: Path, requirements: Path, excludes: Path | None, sources: list[str]) -> list[str]:
        """Resolve and install `requirements` into the venv of `python`, keeping `excludes` out."""

    def after_install(self, python: Path, excluded: list[str]) -> list[list[str]]:
        """Commands that enforce the exclusions where the installer cannot (pip: uninstall)."""
        return []

    @abstractmethod
    def install_no_deps(self, python: Path, site: Path, interpreter: str, requirements: Path,
                        sources: list[str]) -> list[str]:
        """Install exactly `requirements`, no dependencies, into the venv's site-packages `site`."""

    @abstractmethod
    def freeze(self, python: Path) -> list[str]: ...


class UvInstaller(Installer):
    label = "uv"

    def __init__(self, uv: str):
        self.uv = uv

    def version(self, env):
        return subprocess.run([self.uv, "--version"], capture_output=True, text=True, env=env).stdout.strip()

    def create_venv(self, interpreter, path, *, overlay):
        return [self.uv, "venv", "--python", interpreter, "--no-project", str(path)]

    def install(self, python, requirements, excludes, sources):
        # --link-mode copy: a patch applied to one leg must not reach another through uv's cache.
        argv = [self.uv, "pip", "install", "--python", str(python), "--link-mode", "copy", "-r", str(requirements)]
        return argv + (["--excludes", str(excludes)] if excludes else []) + sources

    def install_no_deps(self, python, site, interpreter, requirements, sources):
        return [self.uv, "pip", "install", "--python", str(python), "--link-mode", "copy", "--no-deps",
                "-r", str(requirements), *sources]

    def freeze(self, python):
        return [self.uv, "pip", "freeze", "--python", str(python)]


class PipInstaller(Installer):
    label = "venv+pip (uv not found)"

    def version(self, env):
        return f"pip (python {sys.version.split()[0]})"

    def create_venv(self, interpreter, path, *, overlay):
        exe = shutil.which(f"python{interpreter}") if re.fullmatch(r"\d+\.\d+", interpreter) else interpreter
        if exe is None:
            raise LookupError(f"python{interpreter} not found on PATH")
        # An overlay venv gets its wheels from the base interpreter's pip (--target): no pip of its own.
        return [exe, "-m", "venv", *(["--without-pip"] if overlay else []), str(path)]

    def install(self, python, requirements, excludes, sources):
        return [str(python), "-m", "pip", "install", "-r", str(requirements), *sources]

    def after_install(self, python, excluded):
        return [[str(python), "-m", "pip", "uninstall", "-y", name] for name in sorted(excluded)]

    def install_no_deps(self, python, site, interpreter, requirements, sources):
        # --target, not --prefix: a distribution-patched interpreter (Debian's) maps
        # --prefix to <prefix>/local/..., which the venv would not see.
        return [interpreter, "-m", "pip", "install", "--no-deps", "--no-compile", "--target", str(site),
                "-r", str(requirements), *sources]

    def freeze(self, python):
        return [str(python), "-m", "pip", "freeze", "--all"]


def find_installer() -> Installer:
    uv = find_uv()
    return UvInstaller(uv) if uv else PipInstaller()
