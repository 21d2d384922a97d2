"""scripts/device-stage: wheels cut into call-sized parts and put back together, byte for byte."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

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
