"""Small blobs in packs (runner/workspace/packs.py): what is stored in less than a block shares a pack instead of
taking a file and a shard folder of its own; every reader gets it back exactly, whichever process wrote it; a
damaged record is never given out; a torn record is cut off by the next writer; the collector drops what nothing
names and keeps the newest record of what it keeps."""

import os
import secrets
import time

import pytest

from runner.execution.collector import blobs_collect
from runner.workspace import packs
from runner.workspace.snapshots import BlobStore


@pytest.fixture
def store(tmp_path):
    return BlobStore(tmp_path / "blobs")


def new_process(store: BlobStore) -> BlobStore:
    """The same store as another process sees it: an index of its own, nothing read yet."""
    packs._indexes.clear()
    return BlobStore(store.root)


def blocks(root) -> int:
    return sum(os.lstat(os.path.join(d, n)).st_blocks * 512 for d, _, names in os.walk(root) for n in names)


def test_small_blobs_share_a_pack_and_read_back_exactly_in_another_process(store):
    contents = [secrets.token_bytes(40 + i * 30) for i in range(100)]  # 40 B to 3 kB, not compressible
    contents.append(("print('step')\n" * 150).encode())  # 2.1 kB that zlib packs
    shas = [store.put_bytes(data) for data in contents]
    (store.root / "big.bin").write_bytes(secrets.token_bytes(8000))
    big_sha, _ = store.put_file(store.root / "big.bin")

    assert sorted(p.name for p in store.root.iterdir() if p.is_dir()) == sorted(["packs", big_sha[:2]])
    assert os.listdir(store.root / "packs") == ["0.pack"]
    assert blocks(store.root / "packs") < 200_000  # 101 files and their shard folders took over 700 kB

    other = new_process(store)
    for sha, data in zip(shas, contents, strict=True):
        assert other.read_bytes(sha) == data and other.has(sha)
        assert other.open(sha).read() == data
    target = store.root.parent / "copied"
    other.copy_to(shas[5], target)
    assert target.read_bytes() == contents[5]
    assert other.linkable(shas[6]).read_bytes() == contents[6]  # a file of its own, to hard-link


def test_a_name_that_is_no_sha256_is_no_blob_as_before_packs(store):
    store.put_bytes(b"something small")

    assert not store.has("not-a-sha")
    with pytest.raises(FileNotFoundError):
        store.read_bytes("not-a-sha-at-all")


def test_a_name_that_leads_outside_the_store_names_no_blob(store):
    """A name from a manifest or a row is joined into a path: ``../../x`` must not read, copy or link a file
    outside the store (a blob's name is its sha256, 64 hex digits)."""
    outside = store.root.parent / "secret"
    outside.write_bytes(b"hidden task file")
    name = f"..{store.root.name}/../secret"
    assert (store.root / name[:2] / name[2:]).read_bytes() == b"hidden task file"  # what an unchecked join reads

    assert not store.has(name)
    for read in (store.read_bytes, store.open, store.linkable, lambda sha: store.copy_to(sha, store.root / "out")):
        with pytest.raises(FileNotFoundError, match="64 hex digits"):
            read(name)


def test_a_record_another_process_appends_is_found_by_one_that_read_the_pack_before(store):
    first = store.put_bytes(b"first small blob")
    reader = new_process(store)
    assert reader.read_bytes(first) == b"first small blob"

    writer = new_process(store)
    later = writer.put_bytes(b"appended after the reader read the pack")

    assert reader.read_bytes(later) == b"appended after the reader read the pack"  # read forward on a miss


def test_a_damaged_record_is_not_given_out_as_the_blob(store):
    sha = store.put_bytes(b"the content as it was stored")
    pack = store.root / "packs" / "0.pack"
    data = bytearray(pack.read_bytes())
    data[-3] ^= 0xFF
    pack.write_bytes(bytes(data))  # a new inode: read again from the start

    with pytest.raises(FileNotFoundError):
        new_process(store).read_bytes(sha)


def test_a_torn_record_at_the_end_is_cut_off_by_the_next_writer(store):
    before = store.put_bytes(b"before the torn record")
    with open(store.root / "packs" / "0.pack", "ab") as fh:
        fh.write(packs.HEADER.pack(packs.MAGIC, b"\0" * 32, 0, 500, 0) + b"only part of it")  # a writer that died

    writer = new_process(store)
    after = writer.put_bytes(b"after the torn record")

    reader = new_process(store)
    assert reader.read_bytes(before) == b"before the torn record"
    assert reader.read_bytes(after) == b"after the torn record"


@pytest.mark.django_db
def test_the_collector_drops_unnamed_records_and_keeps_the_newest_of_a_blob_stored_again(settings, tmp_path):
    settings.BENCH_BLOB_DIR = tmp_path / "blobs"
    settings.BENCH_TASK_CACHE_DIR = tmp_path / "tasks"
    settings.BENCH_BLOB_COLLECT_GRACE_S = 3600
    store = BlobStore()
    old = time.time() - 7200
    orphan = store.put_bytes(b"nothing names this")
    again = store.put_bytes(b"stored long ago and again just now")
    pack = store.root / "packs" / "0.pack"
    aged = bytearray(pack.read_bytes())  # both records stored two hours ago, past the grace period
    at = 0
    while at < len(aged):
        magic, raw, flags, length, _ = packs.HEADER.unpack_from(aged, at)
        packs.HEADER.pack_into(aged, at, magic, raw, flags, length, int(old))
        at += packs.HEADER.size + length
    pack.write_bytes(bytes(aged))
    store = new_process(store)
    assert not store.fresh(again)  # older than half the grace period: to be stored again
    assert store.put_bytes(b"stored long ago and again just now") == again
    assert pack.read_bytes().count(bytes.fromhex(again)) == 2  # a second, newer record

    done = blobs_collect()

    assert (done.removed, done.kept) == (2, 1)  # the orphan and the older record of the other
    reader = new_process(store)
    assert reader.read_bytes(again) == b"stored long ago and again just now"
    with pytest.raises(FileNotFoundError):
        reader.read_bytes(orphan)
    assert pack.read_bytes().count(bytes.fromhex(again)) == 1


def test_a_store_adds_at_most_its_share_of_records_and_stores_the_rest_as_files(store, monkeypatch):
    """Every process indexes every record, so one run's attempt (one store) adds at most PACK_RECORDS of them: a
    script writing a hundred thousand tiny files a step costs files, not every process's memory."""
    from runner.workspace import snapshots

    monkeypatch.setattr(snapshots, "PACK_RECORDS", 3)
    contents = [secrets.token_bytes(100) for _ in range(5)]
    shas = [store.put_bytes(data) for data in contents]

    assert store.pack_records == 3
    assert [store.path(sha).exists() for sha in shas] == [False, False, False, True, True]
    reader = new_process(store)
    assert [reader.read_bytes(sha) for sha in shas] == contents
    assert len(reader.packs.index.records) == 3
