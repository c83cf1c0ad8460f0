"""Blobs an earlier version kept in packs (``<blobs>/packs/*.pack``) are written out as files by a migration, so a
store that no longer reads packs loses none of them."""

import hashlib
import struct
import zlib
from importlib import import_module

from runner.workspace.snapshots import BlobStore

HEADER = struct.Struct(">4s32sBIQ")  # magic, sha256, flags (1: zlib), length, stored at


def record(content: bytes, *, packed: bool = False, sha: bytes | None = None) -> bytes:
    stored = zlib.compress(content) if packed else content
    raw = sha or hashlib.sha256(content).digest()
    return HEADER.pack(b"MBP1", raw, int(packed), len(stored), 0) + stored


def test_every_whole_record_becomes_a_blob_file_and_the_packs_go(settings, tmp_path):
    settings.BENCH_BLOB_DIR = tmp_path / "blobs"
    (tmp_path / "blobs" / "packs").mkdir(parents=True)
    plain, script = b"a small manifest", b"print('step')\n" * 150
    damaged = record(b"right content", sha=hashlib.sha256(b"other content").digest())
    torn = record(b"a writer that died")[:-5]
    pack = record(plain) + record(script, packed=True) + damaged + torn
    (tmp_path / "blobs" / "packs" / "0.pack").write_bytes(pack)

    import_module("runner.migrations.0029_blobs_out_of_packs").blobs_out_of_packs(None, None)

    store = BlobStore()
    assert store.read_bytes(hashlib.sha256(plain).hexdigest()) == plain
    assert store.read_bytes(hashlib.sha256(script).hexdigest()) == script
    assert store.packed_path(hashlib.sha256(script).hexdigest()).exists()  # kept in its packed form
    assert not store.has(hashlib.sha256(b"other content").hexdigest())
    assert not store.has(hashlib.sha256(b"a writer that died").hexdigest())
    assert not (tmp_path / "blobs" / "packs").exists()
