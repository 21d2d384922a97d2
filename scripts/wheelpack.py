"""Lossless recompression of wheels for the device's 64 MiB calls (scripts/device-stage split --xz).

A wheel is a zip whose entries are deflated at zlib level 6 by the tools that build wheels. Deflate
is a poor compressor for shared libraries (xz: cusparse 12.5 275 -> 157 MiB; the 0.18 + 0.26 stage
4,771 -> 3,877 MiB, its largest entries left deflated, 2026-12-08). A packed wheel
(`NAME.whl.xzw`) keeps every byte of the wheel except the deflated data of the entries whose
re-deflation at level 6 gives back exactly the bytes in the wheel (checked here, entry by entry);
those travel uncompressed inside xz streams and are deflated again on the device. An entry that does
not reproduce stays as it is. `unpack` checks the rebuilt wheel's size and sha256 against the
wheel's, so a device whose zlib deflates differently gets an error, never a different wheel.

Layout of a `.xzw` file: MAGIC, an 8-byte little-endian header length, the JSON header, the xz stream
of the skeleton (the wheel less its entries' deflated data), one xz stream per block of cut entries
(about BLOCK_RAW bytes of uncompressed data each, so the device unpacks blocks in parallel), then the
deflated data of the entries not cut, verbatim.

Standard library only: the device-side half runs under the GPU machine's python as it is.
"""

from __future__ import annotations

import hashlib
import json
import lzma
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


def _entries(path: Path) -> list[tuple[int, int, int]]:
    """(data offset, compressed length, uncompressed length) of each deflated entry, in file order."""
    out = []
    with zipfile.ZipFile(path) as zf, open(path, "rb") as f:
        for zi in zf.infolist():
            if zi.compress_type != zipfile.ZIP_DEFLATED or zi.compress_size == 0:
                continue
            f.seek(zi.header_offset)
            local = f.read(30)
            if local[:4] != b"PK\x03\x04":
                raise ValueError(f"{path.name}: entry {zi.filename!r} has no local header")
            name_len, extra_len = struct.unpack("<HH", local[26:30])
            out.append((zi.header_offset + 30 + name_len + extra_len, zi.compress_size, zi.file_size))
    return sorted(out)


def _pack_block(args: tuple[str, list[tuple[int, int, int]], int]) -> tuple[list[list[int]], bytes]:
    """Of these entries, those whose level-6 re-deflation reproduces the wheel's bytes, as
    [offset, compressed length, raw length], and the xz stream of their raw data."""
    path, entries, preset = args
    kept, raw = [], []
    with open(path, "rb") as f:
        for offset, clen, _ in entries:
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
    """Write `out` (a .xzw) for `wheel`; returns its header. Entries over max_entry_raw stay deflated.

    The deflated data of an entry that is not cut (too large, or not reproduced at level 6) travels
    verbatim, outside xz: xz gains nothing on it and would spend minutes here on a large one."""
    entries = _entries(wheel)
    jobs, block, size = [], [], 0
    for e in entries:
        if e[2] > max_entry_raw:
            continue
        block.append(e)
        size += e[2]
        if size >= BLOCK_RAW:
            jobs.append((str(wheel), block, preset))
            block, size = [], 0
    if block:
        jobs.append((str(wheel), block, preset))
    with ProcessPoolExecutor(workers) as ex:
        results = list(ex.map(_pack_block, jobs)) if jobs else []
    cuts = [c for kept, _ in results for c in kept]
    blocks = [[len(kept), len(stream)] for kept, stream in results if kept]
    cut_at = {c[0] for c in cuts}
    verbatim = [[offset, clen] for offset, clen, _ in entries if offset not in cut_at]
    data = wheel.read_bytes()
    skeleton, pos = [], 0
    for offset, length in sorted([c[:2] for c in cuts] + verbatim):
        skeleton.append(data[pos:offset])
        pos = offset + length
    skeleton.append(data[pos:])
    skeleton_xz = lzma.compress(b"".join(skeleton), preset=preset)
    header = {"name": wheel.name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
              "zlib_level": LEVEL, "preset": preset, "max_entry_raw": max_entry_raw,
              "cuts": cuts, "blocks": blocks, "verbatim": verbatim, "skeleton_xz": len(skeleton_xz)}
    head = json.dumps(header).encode()
    with open(out, "wb") as f:
        f.write(MAGIC + struct.pack("<Q", len(head)) + head + skeleton_xz)
        for kept, stream in results:
            if kept:
                f.write(stream)
        for offset, length in verbatim:
            f.write(data[offset:offset + length])
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
        plans.append((p, header, skeleton_at, jobs, pos))  # pos: where the verbatim spans begin
    all_jobs = [j for plan in plans for j in plan[3]]
    with ProcessPoolExecutor(workers) as ex:
        done = iter(list(ex.map(_unpack_block, all_jobs, chunksize=1)) if all_jobs else [])
    names = []
    for p, header, skeleton_at, jobs, verbatim_at in plans:
        comps = [c for _ in jobs for c in next(done)]
        target = out_dir / header["name"]
        h = hashlib.sha256()
        with open(p, "rb") as src, open(target, "wb") as dst:
            src.seek(skeleton_at)
            skeleton = lzma.decompress(src.read(header["skeleton_xz"]))
            # every span in wheel order: a cut (its re-deflated bytes) or a verbatim span (read from p)
            spans = [(c[0], c[1], comp) for c, comp in zip(header["cuts"], comps)]
            vpos = verbatim_at
            for offset, length in header.get("verbatim", []):
                spans.append((offset, length, vpos))
                vpos += length
            spos = wpos = 0
            for offset, length, body in sorted(spans, key=lambda s: s[0]):
                piece = skeleton[spos:spos + offset - wpos]
                spos += len(piece)
                if isinstance(body, int):
                    src.seek(body)
                    body = src.read(length)
                for chunk in (piece, body):
                    dst.write(chunk)
                    h.update(chunk)
                wpos = offset + length
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
