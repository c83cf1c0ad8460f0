"""A blob's name is its sha256: any other name, from a manifest or a row, names no blob and reads no file."""

import pytest

from runner.workspace.snapshots import BlobStore


@pytest.fixture
def store(tmp_path):
    return BlobStore(tmp_path / "blobs")


def test_a_name_that_is_no_sha256_is_no_blob(store):
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
