"""Compile/JIT caches carried to another machine: used there, disclosed in every result, and an
archive that does not fit is one error line that unpacks nothing.

Real uv venvs (a small stack) and the real CLI; the engine is the FAULT-INJECTION harness in its
`compile-cache` mode, which, like vLLM, writes an artifact under the leg's VLLM_CACHE_ROOT on a miss
and reads it on a hit.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import tarfile
from pathlib import Path

import pytest
from helpers import FAULT_HARNESS, REPO, fault_env, fault_project, one_line_error, project_argv

pytestmark = pytest.mark.uv


def cli(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(project_argv(project, *args), cwd=REPO, env=fault_env(project),
                          capture_output=True, text=True, timeout=900)


def ok(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    return proc.stdout


def run(project: Path, run_id: str) -> dict:
    ok(cli(project, "run", "--scenarios", str(project / "table.yaml"), "--results", str(project / "results"),
           "--harness", str(FAULT_HARNESS), "--run-id", run_id, "--leg", "la"))
    return json.loads((project / f"results/{run_id}/la/fault__compile-cache/results.json").read_text())


@pytest.fixture
def project(tmp_path):
    p = fault_project(tmp_path, {"la": "1.16.0", "lb": "1.16.0"}, ["{id: fault/compile-cache, source: {path: model}, workloads: [mixed]}"])
    ok(cli(p, "stacks", "build", "la"))
    return p


def test_caches_carried_to_a_fresh_venv_are_used_there_and_every_result_says_so(project, tmp_path):
    first = run(project, "first")  # a cold start: the engine compiles and leaves its artifact
    assert first["status"] == "PASS" and first["harness"]["environment"]["compile_cache"] == "miss"
    assert first["caches"] == {"files": 0, "bytes": 0, "carried": None}
    archive = tmp_path / "out" / "cache-la.tgz"
    said = ok(cli(project, "stacks", "caches", "export", "la", "--out", str(archive)))
    assert "1 files" in said and archive.is_file()
    ok(cli(project, "stacks", "caches", "export", "la", "--out", str(archive)))  # an earlier archive is replaced
    mine = tmp_path / "notes.txt"
    mine.write_text("the user's own file\n")
    line = one_line_error(cli(project, "stacks", "caches", "export", "la", "--out", str(mine)))
    assert line == f"error: --out {mine}: exists and is not a cache archive; refusing to replace it"
    assert mine.read_text() == "the user's own file\n"

    ok(cli(project, "stacks", "build", "la", "--force"))  # the next machine: the same lock, built bare
    bare = run(project, "bare")
    assert bare["harness"]["environment"]["compile_cache"] == "miss"  # nothing survived the rebuild
    ok(cli(project, "stacks", "build", "la", "--force"))
    said = ok(cli(project, "stacks", "caches", "import", str(archive)))
    assert said.startswith("la: 1 files from cache-la.tgz")

    carried = run(project, "carried")
    assert carried["status"] == "PASS" and carried["harness"]["environment"]["compile_cache"] == "hit"
    assert carried["caches"]["files"] == 1
    origin = carried["caches"]["carried"]
    assert origin["archive_sha256"] == hashlib.sha256(archive.read_bytes()).hexdigest()
    assert origin["venv"] == "la" and origin["lock_sha256"] == first["stack"]["lock_sha256"]
    assert origin["packed_on"]["hostname"] == os.uname().nodename

    def compare(*runs: str) -> str:
        return ok(cli(project, "compare", *[str(project / "results" / r) for r in runs]))

    assert "carried from another machine" not in compare("first") + compare("bare")
    note = compare("carried")
    assert f"Note: 1 of 1 task attempts (la) started from compile and JIT caches carried from another machine (packed on " \
           f"{os.uname().nodename} (no GPU) at {origin['packed_at']})" in note
    # the report says it among its known limitations
    ok(cli(project, "report", str(project / "results/carried"), "--out", str(tmp_path / "report")))
    assert "carried from another machine" in (tmp_path / "report/REPORT.md").read_text()


def _archive(path: Path, header: dict | None, members: list[tarfile.TarInfo | tuple[str, bytes]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        if header is not None:
            data = json.dumps(header).encode()
            info = tarfile.TarInfo("CACHE-ARCHIVE.json")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for m in members:
            if isinstance(m, tarfile.TarInfo):
                tar.addfile(m)
            else:
                info = tarfile.TarInfo(m[0])
                info.size = len(m[1])
                tar.addfile(info, io.BytesIO(m[1]))
    return path


def _link(name: str, target: str, kind=tarfile.SYMTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info


def _listing(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


def test_a_cache_archive_that_does_not_fit_is_one_error_line_and_unpacks_nothing(project, tmp_path):
    venv = project / "venvs" / "la"
    lock = json.loads((venv / "manifest.json").read_text())["lock_sha256"]
    good = {"schema": "vllm-ablation/cache-archive/1", "venv": "la", "lock_sha256": lock,
            "packed_at": "2026-12-05T00:00:00Z", "packed_on": {"hostname": "h200", "gpus": ["NVIDIA H200"]}}
    payload = ("vllm-cache/torch_compile_cache/x/graph.py", b"compiled\n")
    garbage = tmp_path / "garbage.tgz"
    garbage.write_bytes(b"not a tar at all")
    cases = {
        "climbs out": (_archive(tmp_path / "a1.tgz", good, [payload, ("vllm-cache/../../../evil", b"x")]),
                       "member 'vllm-cache/../../../evil' is not a path inside vllm-cache or jit-cache"),
        "absolute": (_archive(tmp_path / "a2.tgz", good, [(str(tmp_path / "evil-abs"), b"x")]),
                     "is not a path inside vllm-cache or jit-cache"),
        "the venv's python": (_archive(tmp_path / "a3.tgz", good, [payload, ("bin/python", b"#!/bin/sh\n")]),
                              "member 'bin/python' is not a path inside vllm-cache or jit-cache"),
        "a symlink": (_archive(tmp_path / "a4.tgz", good, [_link("jit-cache/triton/k", "/etc/passwd")]),
                      "member 'jit-cache/triton/k' is not a regular file or folder"),
        "a hard link": (_archive(tmp_path / "a5.tgz", good, [_link("jit-cache/h", "bin/python", tarfile.LNKTYPE)]),
                        "member 'jit-cache/h' is not a regular file or folder"),
        "another lock": (_archive(tmp_path / "a6.tgz", {**good, "lock_sha256": "0" * 64}, [payload]),
                         "field 'lock_sha256': packed from lock 000000000000, but la's venv here was built from lock"),
        "a venv not built here": (_archive(tmp_path / "a7.tgz", {**good, "venv": "lb"}, [payload]),
                                  "error: lb: not built here; run `ablation stacks build lb` first"),
        "a venv name that is a path": (_archive(tmp_path / "a8.tgz", {**good, "venv": "../venvs"}, [payload]),
                                       "field 'venv'"),
        "another schema": (_archive(tmp_path / "a9.tgz", {**good, "schema": "x/2"}, [payload]),
                           "field 'schema': 'x/2' is not vllm-ablation/cache-archive/1"),
        "no header": (_archive(tmp_path / "a10.tgz", None, [payload]), "not a cache archive"),
        "not an archive": (garbage, "not a readable cache archive"),
        "no such file": (tmp_path / "nowhere.tgz", "nowhere.tgz: no such file"),
    }
    before = _listing(venv)
    for what, (archive, expected) in cases.items():
        proc = cli(project, "stacks", "caches", "import", str(archive))
        line = one_line_error(proc)
        assert expected in line, (what, line)
        assert _listing(venv) == before, what  # nothing unpacked, no origin written
    assert not list(tmp_path.rglob("evil*")) and not (project / "evil").exists()
    # and the good one of the same shape is taken
    said = ok(cli(project, "stacks", "caches", "import", str(_archive(tmp_path / "good.tgz", good, [payload]))))
    assert said.startswith("la: ") and (venv / payload[0]).read_bytes() == payload[1]
    state = json.loads(ok(cli(project, "stacks", "caches", "show", "la")))
    assert state["files"] == 1 and state["carried"]["packed_on"]["gpus"] == ["NVIDIA H200"]
