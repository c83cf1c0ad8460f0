"""Small blobs are files again: every record of the packs folder that a blob store kept (``<blobs>/packs/*.pack``)
is written out as the blob file it stands for, then the packs are removed. A record is a header (magic ``MBP1``,
the sha256, flags, the content's length, when it was stored) and the content, zlib-packed when flag 1 is set (then
it becomes ``<sha>.z``, the store's packed form). A record whose content does not hash to its name is left out."""

import hashlib
import os
import shutil
import struct
import zlib
from pathlib import Path

from django.conf import settings
from django.db import migrations

HEADER = struct.Struct(">4s32sBIQ")


def blobs_out_of_packs(apps, schema_editor):
    root = Path(settings.BENCH_BLOB_DIR)
    folder = root / "packs"
    if not folder.is_dir():
        return
    for pack in sorted(folder.glob("*.pack")):
        data, at = pack.read_bytes(), 0
        while at + HEADER.size <= len(data):
            magic, raw, flags, length, _stored_at = HEADER.unpack_from(data, at)
            stored = data[at + HEADER.size : at + HEADER.size + length]
            at += HEADER.size + length
            if magic != b"MBP1" or len(stored) != length:
                break
            try:
                content = zlib.decompress(stored) if flags & 1 else stored
            except zlib.error:
                continue
            sha = raw.hex()
            if hashlib.sha256(content).hexdigest() != sha:
                continue
            dest = root / sha[:2] / (sha[2:] + (".z" if flags & 1 else ""))
            if dest.exists():
                continue
            dest.parent.mkdir(exist_ok=True)
            tmp = root / f".tmp-{sha}"
            tmp.write_bytes(stored)
            os.chmod(tmp, 0o444)
            os.replace(tmp, dest)
    shutil.rmtree(folder)


class Migration(migrations.Migration):
    dependencies = [("runner", "0028_reproduction_plan")]
    operations = [migrations.RunPython(blobs_out_of_packs, migrations.RunPython.noop)]
