"""Lossless recompression of wheels for the device's 64 MiB calls (scripts/device-stage split --xz).

A wheel is a zip whose entries are deflated at zlib level 6 by the tools that build wheels. Deflate
is a poor compressor for shared libraries: xz makes the CUDA wheels about 40% smaller. A packed wheel
(`NAME.whl.xzw`) keeps every byte of the wheel except the deflated data of the entries whose
re-deflation at level 6 gives back exactly the bytes in the wheel (checked here, entry by entry);
those travel uncompressed inside xz streams and are deflated again on the device. An entry that does
not reproduce stays as it is. `unpack` checks the rebuilt wheel's size and sha256 against the
wheel's, so a device whose zlib deflates differently gets an error, never a different wheel.

Layout of a `.xzw` file: MAGIC, an 8-byte little-endian header length, the JSON header, the xz stream
of the skeleton (the wheel less the cut bytes), then one xz stream per block of cut entries (about
BLOCK_RAW bytes of uncompressed data each, so the device unpacks blocks in parallel).

Standard library only: the device-side half runs under the GPU machine's python as it is.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import os
import struct
import zipfile
import zlib
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

MAGIC = b"XZWHEEL1\n"
LEVEL = 6  # zlib's default, which Python's zipfile (and so `wheel`, pip, setuptools) use
BLOCK_RAW = 32 * 2**20
PRESET = 6
# An entry is deflated again on one core of the device (zlib's deflate cannot be split and stay byte
# for byte the same): 191 MiB/s over 16 processes there, about 12 MiB/s each (2026-12-08, an H100's
# 16 CPUs). An entry larger than this stays deflated, so no wheel waits over about 30 s for one entry.
MAX_ENTRY_RAW = 384 * 2**20


def _deflate(data: bytes) -> bytes:
    c = zlib.compressobj(LEVEL, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


def _entries(path: Path, max_raw: int) -> list[tuple[int, int]]:
    """(data offset, compressed length) of each deflated entry of at most max_raw bytes, in file order."""
    out = []
    with zipfile.ZipFile(path) as zf, open(path, "rb") as f:
        for zi in zf.infolist():
            if zi.compress_type != zipfile.ZIP_DEFLATED or zi.compress_size == 0 or zi.file_size > max_raw:
                continue
            f.seek(zi.header_offset)
            local = f.read(30)
            if local[:4] != b"PK\x03\x04":
                raise ValueError(f"{path.name}: entry {zi.filename!r} has no local header")
            name_len, extra_len = struct.unpack("<HH", local[26:30])
            out.append((zi.header_offset + 30 + name_len + extra_len, zi.compress_size))
    return sorted(out)


def _pack_block(args: tuple[str, list[tuple[int, int]], int]) -> tuple[list[list[int]], bytes]:
    """Of these entries, those whose level-6 re-deflation reproduces the wheel's bytes, as
    [offset, compressed length, raw length], and the xz stream of their raw data."""
    path, entries, preset = args
    kept, raw = [], []
    with open(path, "rb") as f:
        for offset, clen in entries:
            f.seek(offset)
            comp = f.read(clen)
            try:
                data = zlib.decompress(comp, -15)
            except zlib.error:
                continue
            if _deflate(data) == comp:
                kept.append([offset, clen, len(data)])
                raw.append(data)
    return kept, lzma.compress(b"".join(raw), preset=preset) if kept else b""


def pack(wheel: Path, out: Path, workers: int | None = None, preset: int = PRESET,
         max_entry_raw: int = MAX_ENTRY_RAW) -> dict:
    """Write `out` (a .xzw) for `wheel`; returns its header. Entries over max_entry_raw stay deflated."""
    entries = _entries(wheel, max_entry_raw)
    jobs, block, size = [], [], 0
    for e in entries:
        block.append(e)
        size += e[1] * 3  # a guess at the raw size; blocks only need to be roughly even
        if size >= BLOCK_RAW:
            jobs.append((str(wheel), block, preset))
            block, size = [], 0
    if block:
        jobs.append((str(wheel), block, preset))
    with ProcessPoolExecutor(workers) as ex:
        results = list(ex.map(_pack_block, jobs)) if jobs else []
    cuts = [c for kept, _ in results for c in kept]
    blocks = [[len(kept), len(stream)] for kept, stream in results if kept]
    data = wheel.read_bytes()
    skeleton, pos = [], 0
    for offset, clen, _ in cuts:
        skeleton.append(data[pos:offset])
        pos = offset + clen
    skeleton.append(data[pos:])
    skeleton_xz = lzma.compress(b"".join(skeleton), preset=preset)
    header = {"name": wheel.name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
              "zlib_level": LEVEL, "preset": preset, "max_entry_raw": max_entry_raw,
              "cuts": cuts, "blocks": blocks, "skeleton_xz": len(skeleton_xz)}
    head = json.dumps(header).encode()
    with open(out, "wb") as f:
        f.write(MAGIC + struct.pack("<Q", len(head)) + head + skeleton_xz)
        for kept, stream in results:
            if kept:
                f.write(stream)
    return header


def read_header(packed: Path) -> tuple[dict, int]:
    with open(packed, "rb") as f:
        if f.read(len(MAGIC)) != MAGIC:
            raise ValueError(f"{packed.name}: not a packed wheel")
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n)), len(MAGIC) + 8 + n


def _unpack_block(args: tuple[str, int, int, list[list[int]]]) -> list[bytes]:
    packed, start, length, cuts = args
    with open(packed, "rb") as f:
        f.seek(start)
        raw = lzma.decompress(f.read(length))
    out, pos = [], 0
    for _, clen, rlen in cuts:
        comp = _deflate(raw[pos:pos + rlen])
        pos += rlen
        if len(comp) != clen:  # the sha256 below would catch it too; this names the cause
            raise ValueError(f"{Path(packed).name}: zlib {zlib.ZLIB_RUNTIME_VERSION} deflates an entry to "
                             f"{len(comp)} bytes where the wheel holds {clen}: this zlib cannot rebuild it")
        out.append(comp)
    return out


def unpack_all(packed: list[Path], out_dir: Path, workers: int | None = None) -> list[str]:
    """Rebuild each packed wheel into out_dir, blocks of all wheels in one process pool. Returns
    the names of the rebuilt wheels; raises ValueError naming the first that does not check."""
    plans = []
    for p in packed:
        header, pos = read_header(p)
        skeleton_at = pos
        pos += header["skeleton_xz"]
        jobs, i = [], 0
        for n_cuts, length in header["blocks"]:
            jobs.append((str(p), pos, length, header["cuts"][i:i + n_cuts]))
            pos += length
            i += n_cuts
        plans.append((p, header, skeleton_at, jobs))
    all_jobs = [j for _, _, _, jobs in plans for j in jobs]
    with ProcessPoolExecutor(workers) as ex:
        done = iter(list(ex.map(_unpack_block, all_jobs, chunksize=1)) if all_jobs else [])
    names = []
    for p, header, skeleton_at, jobs in plans:
        with open(p, "rb") as f:
            f.seek(skeleton_at)
            skeleton = lzma.decompress(f.read(header["skeleton_xz"]))
        comps = [c for _ in jobs for c in next(done)]
        target = out_dir / header["name"]
        h, spos, wpos = hashlib.sha256(), 0, 0
        with open(target, "wb") as dst:
            for (offset, clen, _), comp in zip(header["cuts"], comps):
                piece = skeleton[spos:spos + offset - wpos]
                spos += len(piece)
                for chunk in (piece, comp):
                    dst.write(chunk)
                    h.update(chunk)
                wpos = offset + clen
            tail = skeleton[spos:]
            dst.write(tail)
            h.update(tail)
        if target.stat().st_size != header["size"] or h.hexdigest() != header["sha256"]:
            target.unlink()
            raise ValueError(f"{header['name']}: rebuilt from {p.name} with zlib {zlib.ZLIB_RUNTIME_VERSION}, "
                             "its size or sha256 is not the wheel's")
        names.append(header["name"])
    return names


def zlib_probe(sample: bytes) -> str:
    """The sha256 of this zlib's level-6 raw deflate of `sample` (a wheel's real data, carried with the
    manifest): `receive` compares it with this machine's before any packed wheel is needed."""
    return hashlib.sha256(_deflate(sample)).hexdigest()


def workers() -> int:
    return max(1, (os.cpu_count() or 1))
