"""A leg's compile and JIT caches, carried from one machine to the next, and disclosed.

Every vLLM process of a leg keeps its torch.compile artifacts, Triton kernels, FlashInfer JIT
builds and the driver's PTX cache inside the leg's venv (`environment.LEG_CACHE_DIRS`). On the
lent GPU machine, which starts bare on every loan, a task's first engine start paid 117-225 s
of compiling that a warm one did not (13-40 s). `export` packs those folders with a header
naming the venv and its lock; `import_` unpacks such an archive into the same venv built from
the same lock on another machine, and leaves `cache-origin.json` in the venv; every task started
from that venv then records where its caches came from (`state`, the result's `caches`), and
the comparer says so beside the tables (analysis.carried).

Only what the timed values do not depend on is carried: start-up work. An archive is checked
before anything is written: its header, its lock against the built venv's, and every member
(a regular file or folder under one of the cache folders; no links, no absolute or `..` paths).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from pathlib import Path, PurePosixPath

from ablation.envs.environment import LEG_CACHE_DIRS
from ablation.errors import AblationError
from ablation.util.jsonio import write_json_atomic
from ablation.util.timestamps import utc_stamp

ARCHIVE_SCHEMA = "vllm-ablation/cache-archive/1"
HEADER = "CACHE-ARCHIVE.json"  # the archive's first member
ORIGIN = "cache-origin.json"  # in the venv, once an archive was imported


def _files(venv: Path):
    for d in LEG_CACHE_DIRS:
        root = venv / d
        if root.is_dir():
            for dirpath, _dirs, names in os.walk(root):
                for n in names:
                    p = Path(dirpath) / n
                    if p.is_file() and not p.is_symlink():
                        yield p


def _origin(venv: Path) -> dict | None:
    """The origin an import left in the venv, else None."""
    origin = venv / ORIGIN
    if not origin.is_file():
        return None
    try:
        return json.loads(origin.read_text())
    except (OSError, ValueError):
        return {"unreadable": str(origin)}


def state(venv: Path) -> dict:
    """What a task starts with: how much is in the leg's caches, and whether an imported
    archive put it there ("carried": the archive's origin, else None)."""
    files = list(_files(venv))
    return {"files": len(files), "bytes": sum(p.stat().st_size for p in files), "carried": _origin(venv)}


def export(venv: Path, venv_name: str, lock_sha256: str, packed_on: dict, out: Path) -> dict:
    """Write the venv's cache folders to `out` (tar.gz), the header first; returns the header."""
    files = sorted(_files(venv))
    header = {"schema": ARCHIVE_SCHEMA, "venv": venv_name, "lock_sha256": lock_sha256,
              "packed_at": utc_stamp(), "packed_on": packed_on, "files": len(files),
              "bytes": sum(p.stat().st_size for p in files)}
    previous = _origin(venv)
    if previous is not None:  # carried once already: the chain stays visible
        header["previous"] = previous
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".partial")
    with tarfile.open(tmp, "w:gz") as tar:
        data = json.dumps(header, indent=1).encode()
        info = tarfile.TarInfo(HEADER)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        for p in files:
            tar.add(p, arcname=p.relative_to(venv).as_posix(), recursive=False)
    tmp.replace(out)
    return header


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(2**20), b""):
            h.update(block)
    return h.hexdigest()


def read_header(archive: Path) -> dict:
    """The archive's header, checked; an unreadable archive or header is one error line."""
    where = f"{archive}"
    try:
        with tarfile.open(archive, "r:gz") as tar:
            first = tar.next()
            if first is None or first.name != HEADER or not first.isfile():
                raise AblationError(f"{where}: not a cache archive (its first member is not {HEADER})")
            header = json.loads(tar.extractfile(first).read())
    except (OSError, tarfile.TarError, EOFError, ValueError, UnicodeDecodeError) as exc:
        raise AblationError(f"{where}: not a readable cache archive ({type(exc).__name__}: {exc})") from None
    if not isinstance(header, dict) or header.get("schema") != ARCHIVE_SCHEMA:
        got = header.get("schema") if isinstance(header, dict) else type(header).__name__
        raise AblationError(f"{where}: field 'schema': {got!r} is not {ARCHIVE_SCHEMA}")
    for field in ("venv", "lock_sha256"):
        if not isinstance(header.get(field), str) or not header[field]:
            raise AblationError(f"{where}: field '{field}': missing or not a string")
    return header


def _member_problem(m: tarfile.TarInfo) -> str | None:
    path = PurePosixPath(m.name)
    if path.is_absolute() or ".." in path.parts or not path.parts or path.parts[0] not in LEG_CACHE_DIRS:
        return f"member {m.name!r} is not a path inside {' or '.join(LEG_CACHE_DIRS)}"
    if not (m.isfile() or m.isdir()):
        return f"member {m.name!r} is not a regular file or folder (links and devices are never carried)"
    return None


def import_(archive: Path, header: dict, venv: Path, venv_name: str, lock_sha256: str, imported_on: str) -> dict:
    """Unpack a checked archive (`header`: read_header's) into the venv's cache folders; returns
    the origin written."""
    if header["venv"] != venv_name:
        raise AblationError(f"{archive}: field 'venv': packed from {header['venv']!r}, not {venv_name!r}")
    if header["lock_sha256"] != lock_sha256:
        raise AblationError(f"{archive}: field 'lock_sha256': packed from lock {header['lock_sha256'][:12]}, "
                            f"but {venv_name}'s venv here was built from lock {lock_sha256[:12]}; "
                            "caches are carried only between venvs of one lock")
    with tarfile.open(archive, "r:gz") as tar:
        members = tar.getmembers()[1:]
        for m in members:
            problem = _member_problem(m)
            if problem:
                raise AblationError(f"{archive}: {problem}; nothing was unpacked")
        tar.extractall(venv, members=members, filter="data")
    origin = {**header, "archive": archive.name, "archive_sha256": _sha256(archive),
              "unpacked_files": sum(m.isfile() for m in members), "imported_at": utc_stamp(),
              "imported_on": imported_on}
    write_json_atomic(venv / ORIGIN, origin)
    return origin
