"""scripts/device-stage: wheels cut into call-sized parts and put back together, byte for byte."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from helpers import REPO

SCRIPT = REPO / "scripts" / "device-stage"


def stage(cwd, *args, recv=None):
    env = {**os.environ, "DEVICE_STAGE_RECV": str(recv or cwd / "recv-outside-checkout")}
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True, env=env)


def test_split_receive_assemble_roundtrip_and_corruption_is_refused(tmp_path):
    here, device = tmp_path / "here", tmp_path / "device"
    (here / ".stage/wheels").mkdir(parents=True)
    big, small = os.urandom(3_500_000), os.urandom(1000)
    (here / ".stage/wheels/big-1.0-py3-none-any.whl").write_bytes(big)
    (here / ".stage/wheels/small-1.0-py3-none-any.whl").write_bytes(small)
    (here / ".stage/wheels/zero-1.0-py3-none-any.whl").write_bytes(b"")  # must arrive too
    out = stage(here, "split", "--part-bytes", str(1_000_000))
    assert out.returncode == 0, out.stderr
    parts = sorted((here / ".stage/parts").iterdir())
    assert len(parts) == 4  # 3.5 MB + 1 kB as one stream: four parts, no part left half empty
    assert [len(list(p.glob("*.piece*"))) for p in parts] == [1, 1, 1, 3]
    for p in parts:
        assert sum(f.stat().st_size for f in p.glob("*.piece*")) <= 1_000_000
    # each part travels in its own call and is received on the device; the carried .stage is
    # replaced on every call (what the device tool does), so nothing may be kept under it
    device.mkdir()
    recv = tmp_path / "recv"
    said = []
    for p in parts:
        shutil.rmtree(device / ".stage", ignore_errors=True)
        shutil.copytree(p, device / ".stage/parts" / p.name)
        got = stage(device, "receive", f".stage/parts/{p.name}", recv=recv)
        assert got.returncode == 0, got.stderr
        said.append(got.stdout.strip().split("; ")[-1])
        if p.name == "001":  # a released machine comes back bare: it says what to send again
            lost = stage(device, "missing", recv=recv)
            assert lost.returncode == 1 and lost.stdout.strip() == "missing parts: 002-003"
    assert said == ["still missing parts 001-003", "still missing parts 002-003", "still missing parts 003",
                    "every part is here"]
    assert stage(device, "missing", recv=recv).returncode == 0
    shutil.rmtree(device / ".stage")
    done = stage(device, "assemble", recv=recv)
    assert done.returncode == 0, done.stderr
    assert (device / ".stage/wheels/big-1.0-py3-none-any.whl").read_bytes() == big
    assert (device / ".stage/wheels/small-1.0-py3-none-any.whl").read_bytes() == small
    assert (device / ".stage/wheels/zero-1.0-py3-none-any.whl").read_bytes() == b""
    # a missing piece (a call that never arrived) is caught by size and sha256
    sorted(recv.glob("big-*.piece*"))[2].unlink()
    shutil.rmtree(device / ".stage/wheels")
    refused = stage(device, "assemble", recv=recv)
    assert refused.returncode != 0 and "big-1.0-py3-none-any.whl" in refused.stderr
    assert not (device / ".stage/wheels/big-1.0-py3-none-any.whl").exists()


def test_parts_leave_room_for_the_working_tree_that_travels_with_every_call(tmp_path):
    # A call carries the part AND the tree (tracked and untracked-not-ignored files), 64 MiB in all.
    # Session 10 (2026-12-06): the tree had grown to 10.1 MiB, so the 55 MiB parts of earlier sessions
    # would have made 65 MiB calls. The default is now measured; a --part-bytes that cannot fit is refused.
    here = tmp_path / "here"
    (here / ".stage/wheels").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(here)], check=True)
    (here / ".gitignore").write_text("/.stage/\nignored.bin\n")
    (here / "tracked.bin").write_bytes(os.urandom(3 * 2**20))
    (here / "untracked.bin").write_bytes(os.urandom(2**20))  # not ignored: it travels too
    (here / "ignored.bin").write_bytes(os.urandom(20 * 2**20))  # ignored: it does not
    subprocess.run(["git", "-C", str(here), "add", "tracked.bin", ".gitignore"], check=True)
    (here / ".stage/wheels/w-1.0-py3-none-any.whl").write_bytes(os.urandom(1000))
    out = stage(here, "split")
    assert out.returncode == 0, out.stderr
    # 64 - 4.0 (tree, + .gitignore's bytes) - 1 (margin) = 58.99 -> whole MiB
    assert "the working tree that travels with each call is 4.0 MiB: parts of <= 58 MiB" in out.stdout
    kept = sorted(p.name for p in (here / ".stage/parts").iterdir())
    too_big = stage(here, "split", "--part-bytes", str(60 * 2**20))
    assert too_big.returncode == 2
    lines = too_big.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --part-bytes: 60.0 MiB + the working tree that travels "
                                                   "(4.0 MiB)")
    assert sorted(p.name for p in (here / ".stage/parts").iterdir()) == kept  # the earlier parts are not lost
    assert stage(here, "split", "--part-bytes", str(50 * 2**20)).returncode == 0


def test_the_tree_is_counted_as_a_tar_stream_as_the_device_tool_counts_it(tmp_path):
    # Session 13 (2026-12-07): a 50.05 MiB part beside 1,384 files of 12.8 MiB (62.8 MiB in all by bytes) was
    # refused as "larger than 64 MiB": as a tar stream (a 512-byte header per file and folder, files rounded up to
    # 512 bytes) it was 64.02 MiB. 3,000 tiny tracked files in 30 folders are 30 KB by bytes but 2.9 MiB as tar.
    here = tmp_path / "here"
    (here / ".stage/wheels").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(here)], check=True)
    (here / ".gitignore").write_text("/.stage/\n")
    for d in range(30):
        (here / f"d{d}").mkdir()
        for i in range(100):
            (here / f"d{d}/f{i}.txt").write_text("0123456789")
    subprocess.run(["git", "-C", str(here), "add", "."], check=True)
    (here / ".stage/wheels/w-1.0-py3-none-any.whl").write_bytes(os.urandom(1000))
    out = stage(here, "split")
    assert out.returncode == 0, out.stderr
    # (3,001 files x 1,024 + 30 folders x 512) bytes = 2.9 MiB; 64 - 2.9 - 1 = 60.1 -> 60 MiB
    # (by bytes: 0.0 MiB and 62 MiB, so a part would go 2 MiB over)
    assert "the working tree that travels with each call is 2.9 MiB: parts of <= 60 MiB" in out.stdout


@pytest.mark.parametrize("size", ["0", "-5"])
def test_a_part_size_that_cuts_nothing_is_one_error_line_not_a_hang(tmp_path, size):
    # found in review, 2026-12-06: before session 10, `--part-bytes 0` never advanced through a wheel and
    # `split` looped, making empty parts (84,425 of them in 10 s); session 10's first version took 0 outside
    # a git checkout as "the default" (60 MiB) and looped inside one
    here = tmp_path / "here"
    (here / ".stage/wheels").mkdir(parents=True)
    (here / ".stage/wheels/w-1.0-py3-none-any.whl").write_bytes(os.urandom(1000))
    out = subprocess.run([sys.executable, str(SCRIPT), "split", "--part-bytes", size], cwd=here,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [f"error: --part-bytes: {size} is not a part size (bytes, at least 1)"]
    assert not (here / ".stage/parts").exists()


def test_cache_archives_travel_with_the_wheels_and_land_in_stage_caches(tmp_path):
    """scripts/device-caches' archives (.stage/caches) are cut into the same parts as the wheels and
    assembled, sha256-checked, into .stage/caches, where scripts/device-leg imports them."""
    here, device = tmp_path / "here", tmp_path / "device"
    (here / ".stage/wheels").mkdir(parents=True)
    (here / ".stage/caches").mkdir(parents=True)
    wheel, cache = os.urandom(1_500_000), os.urandom(800_000)
    (here / ".stage/wheels/w-1.0-py3-none-any.whl").write_bytes(wheel)
    (here / ".stage/caches/cache-0.26-h200.tgz").write_bytes(cache)
    out = stage(here, "split", "--part-bytes", str(1_000_000))
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("1 wheels and 1 cache archives")
    recv = tmp_path / "recv"
    for p in sorted((here / ".stage/parts").iterdir()):
        shutil.rmtree(device / ".stage", ignore_errors=True)
        shutil.copytree(p, device / ".stage/parts" / p.name)
        assert stage(device, "receive", f".stage/parts/{p.name}", recv=recv).returncode == 0
    done = stage(device, "assemble", recv=recv)
    assert done.returncode == 0, done.stderr
    assert (device / ".stage/wheels/w-1.0-py3-none-any.whl").read_bytes() == wheel
    assert (device / ".stage/caches/cache-0.26-h200.tgz").read_bytes() == cache
    assert not (device / ".stage/wheels/cache-0.26-h200.tgz").exists()


def test_download_stages_only_the_pins_the_image_lacks(tmp_path):
    """--stack/--system-freeze: what is staged is exactly what the overlay will install there."""
    import importlib.util
    from importlib.machinery import SourceFileLoader

    loader = SourceFileLoader("device_stage", str(SCRIPT))
    stage_mod = importlib.util.module_from_spec(importlib.util.spec_from_loader("device_stage", loader))
    loader.exec_module(stage_mod)
    (tmp_path / "leg.yaml").write_text('packages:\n  torch: "2.11.0"\n  vllm: "0.26.0"\n  setuptools: "80.10.2"\n'
                                       '  Typing_Extensions: "4.16.0"\n')
    (tmp_path / "freeze.txt").write_text("torch==2.11.0\nsetuptools==81.0.0\ntyping_extensions==4.16.0\n")
    assert stage_mod.stack_overlay(str(tmp_path / "leg.yaml"), str(tmp_path / "freeze.txt")) == [
        "vllm==0.26.0", "setuptools==80.10.2"]


def test_download_names_every_manylinux_tag_the_device_accepts():
    """pip matches --platform exactly: nvidia-nccl-cu13==2.29.7 (0.29-h200's pin) ships only a
    manylinux_2_18 wheel, and a list without that tag failed the README's 0.29-h200 download."""
    import importlib.util
    from importlib.machinery import SourceFileLoader

    loader = SourceFileLoader("device_stage", str(SCRIPT))
    stage_mod = importlib.util.module_from_spec(importlib.util.spec_from_loader("device_stage", loader))
    loader.exec_module(stage_mod)
    tags = stage_mod.platform_tags()
    assert {f"manylinux_2_{n}_x86_64" for n in range(5, 40)} <= set(tags)
    assert "manylinux_2_18_x86_64" in tags and "manylinux_2_40_x86_64" not in tags


def stage_module():
    import importlib.util
    from importlib.machinery import SourceFileLoader

    loader = SourceFileLoader("device_stage", str(SCRIPT))
    mod = importlib.util.module_from_spec(importlib.util.spec_from_loader("device_stage", loader))
    loader.exec_module(mod)
    return mod


def test_download_stages_every_override_variants_pins_too(tmp_path):
    """A variant venv (<leg>+<name>) is the leg's pins updated with its own: one staging must bring
    what the leg and all its variants install on the device, each wheel once."""
    (tmp_path / "leg.yaml").write_text(
        'packages:\n  torch: "2.11.0"\n  transformers: "5.17.0"\n  tokenizers: "0.23.2"\n  vllm: "0.26.0"\n'
        'overrides:\n'
        '  - name: gemma4-tf5.14.1\n    models: [m]\n    pins: {transformers: "5.14.1", tokenizers: "0.22.2"}\n'
        '    reason: r\n'
        '  - name: same-as-leg\n    models: [n]\n    pins: {vllm: "0.26.0", Transformers: "5.14.1"}\n    reason: r\n')
    (tmp_path / "freeze.txt").write_text("torch==2.11.0\ntransformers==5.17.0\ntokenizers==0.23.2\n")
    assert stage_module().stack_overlay(str(tmp_path / "leg.yaml"), str(tmp_path / "freeze.txt")) == [
        "vllm==0.26.0", "transformers==5.14.1", "tokenizers==0.22.2"]


def test_shipped_0_26_h200_staging_adds_exactly_the_gemma4_variants_wheels(tmp_path):
    import yaml

    mod = stage_module()
    stack, freeze = REPO / "stacks/0.26-h200.yaml", str(REPO / "stacks/0.26-h200.system-freeze.txt")
    without = yaml.safe_load(stack.read_text())
    without.pop("overrides")
    (tmp_path / "leg.yaml").write_text(yaml.safe_dump(without))
    leg_only = mod.stack_overlay(str(tmp_path / "leg.yaml"), freeze)
    everything = mod.stack_overlay(str(stack), freeze)
    assert everything[:len(leg_only)] == leg_only
    assert everything[len(leg_only):] == ["transformers==5.14.1", "tokenizers==0.22.2"]


def test_download_rounds_name_each_package_once_per_pip_call():
    rounds = stage_module().download_rounds(["six==1.16.0", "idna==3.7", "Six==1.17.0", "six==1.15.0"])
    assert rounds == [["six==1.16.0", "idna==3.7"], ["Six==1.17.0"], ["six==1.15.0"]]


@pytest.mark.uv  # needs PyPI, as the uv tier does
def test_download_from_pypi_brings_the_leg_and_its_variant(tmp_path):
    """The real verb, from PyPI: a variant pinning another version of one of the leg's pins (pip
    refuses both in one call) gets its own wheel beside the leg's."""
    (tmp_path / "leg.yaml").write_text(
        'packages:\n  six: "1.16.0"\n  idna: "3.7"\n'
        'overrides:\n  - name: new-six\n    models: [m]\n    pins: {six: "1.17.0"}\n    reason: r\n')
    (tmp_path / "freeze.txt").write_text("idna==3.7\n")
    out = stage(tmp_path, "download", "--stack", "leg.yaml", "--system-freeze", "freeze.txt")
    assert out.returncode == 0, out.stderr
    assert sorted(p.name for p in (tmp_path / ".stage/wheels").iterdir()) == [
        "six-1.16.0-py2.py3-none-any.whl", "six-1.17.0-py2.py3-none-any.whl"]


CACHES_SCRIPT = REPO / "scripts" / "device-caches"


def test_device_caches_pieces_fit_out_and_join_back_byte_for_byte(tmp_path):
    """pack -> send (one call's worth at a time) -> join: every archive back, each sha256 checked; a
    piece that never came back, or came back corrupted, is said and nothing half-joined is kept."""
    env = {**os.environ, "DEVICE_CACHES_PACKED": str(tmp_path / "packed")}
    archives = {"cache-0.26-h200.tgz": os.urandom(2_500_000), "cache-0.29-h200.tgz": os.urandom(700_000),
                "cache-empty.tgz": b""}
    for name, data in archives.items():
        (tmp_path / name).write_bytes(data)

    def script(*args, out=None):
        e = {**env, **({"OUT": str(out)} if out else {})}
        return subprocess.run([sys.executable, str(CACHES_SCRIPT), *args], capture_output=True, text=True, env=e, cwd=tmp_path)

    packed = script("pack", "--piece-bytes", "1000000", *archives)
    assert packed.returncode == 0, packed.stderr
    assert "packed 3 archives" in packed.stdout and "into 5 pieces" in packed.stdout  # 3 + 1 + 1 (the empty one)
    calls = []
    for first in (0, 3):
        out = tmp_path / f"call{first}"
        sent = script("send", "--first", str(first), out=out)
        assert sent.returncode == 0, sent.stderr
        calls.append(out)
        files = sorted(f.name for f in (out / "caches").iterdir())
        assert len(files) <= 4 and all(f.replace("-", "").replace(".", "").isalnum() for f in files)
        assert all(f.stat().st_size <= 16 * 2**20 for f in (out / "caches").iterdir())
    assert sent.stdout.strip().endswith("every piece sent")

    only_first = script("join", str(calls[0]), "--into", str(tmp_path / "partial"))
    assert only_first.returncode != 0 and "missing pieces piece-0003, piece-0004" in only_first.stderr
    joined = script("join", *map(str, calls), "--into", str(tmp_path / "stage"))
    assert joined.returncode == 0, joined.stderr
    for name, data in archives.items():
        assert (tmp_path / "stage" / name).read_bytes() == data

    (calls[0] / "caches" / "piece-0001").write_bytes(b"flipped")
    bad = script("join", *map(str, calls), "--into", str(tmp_path / "again"))
    assert bad.returncode != 0 and "corrupt, not kept: cache-0.26-h200.tgz" in bad.stderr
    assert not (tmp_path / "again" / "cache-0.26-h200.tgz").exists()
    assert (tmp_path / "again" / "cache-0.29-h200.tgz").read_bytes() == archives["cache-0.29-h200.tgz"]


def a_wheel(path, seed: int) -> bytes:
    """A real zip as wheel builders write it (zipfile, deflate at zlib's default level), with
    shared-library-like content that xz packs far better than deflate; plus one entry deflated at
    level 1 (re-deflating it at 6 does not give its bytes back) and one stored entry."""
    import random
    import zipfile

    rng = random.Random(seed)
    words = [rng.randbytes(rng.randint(4, 24)) for _ in range(3000)]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for i in range(6):
            zf.writestr(f"pkg/lib{i}.so", b"".join(rng.choice(words) for _ in range(40_000)))
        zf.writestr(zipfile.ZipInfo("pkg/level1.bin"), b"".join(rng.choice(words) for _ in range(20_000)),
                    compress_type=zipfile.ZIP_DEFLATED, compresslevel=1)
        zf.writestr("pkg/stored.txt", b"stored " * 1000, compress_type=zipfile.ZIP_STORED)
        zf.writestr("pkg-1.0.dist-info/RECORD", "")
    return path.read_bytes()


def test_xz_parts_are_fewer_and_the_device_rebuilds_every_wheel_byte_for_byte(tmp_path):
    here, device, recv = tmp_path / "here", tmp_path / "device", tmp_path / "recv"
    (here / ".stage/wheels").mkdir(parents=True)
    wheels = {f"w{i}-1.0-py3-none-any.whl": a_wheel(here / f".stage/wheels/w{i}-1.0-py3-none-any.whl", i)
              for i in range(3)}
    (here / ".stage/wheels/notzip-1.0-py3-none-any.whl").write_bytes(b"not a zip")  # travels as it is
    wheels["notzip-1.0-py3-none-any.whl"] = b"not a zip"
    plain = stage(here, "split", "--part-bytes", str(1_500_000))
    assert plain.returncode == 0, plain.stderr
    n_plain = len(list((here / ".stage/parts").iterdir()))
    plain_bytes = sum(f.stat().st_size for f in (here / ".stage/parts").glob("*/*.piece*"))
    packed = stage(here, "split", "--xz", "--part-bytes", str(1_500_000))
    assert packed.returncode == 0, packed.stderr
    parts = sorted((here / ".stage/parts").iterdir())
    packed_bytes = sum(f.stat().st_size for f in (here / ".stage/parts").glob("*/*.piece*"))
    assert len(parts) < n_plain and packed_bytes < 0.6 * plain_bytes, (len(parts), n_plain, packed_bytes, plain_bytes)
    device.mkdir()
    for p in parts:
        shutil.rmtree(device / ".stage", ignore_errors=True)
        shutil.copytree(p, device / ".stage/parts" / p.name)
        got = stage(device, "receive", f".stage/parts/{p.name}", recv=recv)
        assert got.returncode == 0, got.stderr
        assert "deflates as the wheels' builders did" in got.stdout  # each part checks the device's zlib
    shutil.rmtree(device / ".stage")
    done = stage(device, "assemble", recv=recv)
    assert done.returncode == 0, done.stderr
    assert "rebuilt 3 packed wheels" in done.stdout
    for name, data in wheels.items():
        assert (device / ".stage/wheels" / name).read_bytes() == data, name
    assert not list((device / ".stage/wheels").glob("*.xzw"))


def test_a_device_whose_zlib_deflates_differently_is_told_and_gets_no_wheel(tmp_path):
    here, recv = tmp_path / "here", tmp_path / "recv"
    (here / ".stage/wheels").mkdir(parents=True)
    a_wheel(here / ".stage/wheels/w-1.0-py3-none-any.whl", 7)
    assert stage(here, "split", "--xz").returncode == 0
    part = here / ".stage/parts/000"
    # the probe: the sha256 of this zlib's level-6 deflate of real wheel data, checked on receive
    import json
    manifest = json.loads((part / "MANIFEST.json").read_text())
    manifest["zlib_probe"]["deflate_sha256"] = "0" * 64  # what another zlib would make of it
    (part / "MANIFEST.json").write_text(json.dumps(manifest))
    got = stage(here, "receive", str(part), recv=recv)
    assert got.returncode == 0 and "ZLIB DIFFERS" in got.stdout and "without --xz" in got.stdout
    # and the rebuild itself refuses a wheel that does not come back byte for byte
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import wheelpack
    finally:
        sys.path.pop(0)
    xzw = sorted((here / ".stage/packed").glob("*.xzw"))
    out = tmp_path / "out"
    out.mkdir()
    assert wheelpack.unpack_all(xzw, out, workers=1) == ["w-1.0-py3-none-any.whl"]
    header = wheelpack.read_header(xzw[0])[0]
    # the six libraries and RECORD are cut; level1.bin does not reproduce at level 6, so it stays as is
    assert len(header["cuts"]) == 7
    # an entry over --xz-max-entry-mib stays deflated: the device deflates each cut entry on one core
    capped = tmp_path / "capped.xzw"
    wheel = here / ".stage/wheels/w-1.0-py3-none-any.whl"
    assert [raw for _, _, raw in wheelpack.pack(wheel, capped, workers=1, max_entry_raw=1000)["cuts"]] == [0]  # RECORD
    assert wheelpack.unpack_all([capped], out, workers=1) == ["w-1.0-py3-none-any.whl"]
    assert (out / "w-1.0-py3-none-any.whl").read_bytes() == wheel.read_bytes()
    (out / "w-1.0-py3-none-any.whl").unlink()
    level = wheelpack.LEVEL
    wheelpack.LEVEL = 1  # deflates as another zlib might: other bytes for the same data
    try:
        with pytest.raises(ValueError, match="w-1.0-py3-none-any.whl"):
            wheelpack.unpack_all(xzw, out, workers=1)
    finally:
        wheelpack.LEVEL = level
    assert not (out / "w-1.0-py3-none-any.whl").exists()


@pytest.mark.parametrize("args", [["--xz-max-entry-mib", "-5"], ["--xz-max-entry-mib", "1.5"], ["--xz-preset", "12"]])
def test_a_bad_xz_option_is_one_error_line_naming_it(tmp_path, args):
    (tmp_path / ".stage/wheels").mkdir(parents=True)
    a_wheel(tmp_path / ".stage/wheels/w-1.0-py3-none-any.whl", 1)
    out = stage(tmp_path, "split", "--xz", *args)
    assert out.returncode == 2 and f"argument {args[0]}:" in out.stderr.splitlines()[-1]
    assert not (tmp_path / ".stage/parts").exists()
