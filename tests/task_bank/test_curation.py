"""Curating the bank from the command line: import (folder or zip), validate, export; and bad packages."""

import io
import stat
import zipfile

import pytest
from django.core.management import CommandError, call_command

from task_bank.models import Task, TaskVersion
from task_bank.services import packages_dir
from tests.factories import TINY_FILES, RunFactory, package_write


def tiny_zip(tmp_path, name="tiny.zip", extra=None):
    """The tiny package as a zip with one top folder, plus extra raw members."""
    root = package_write(tmp_path / "src" / "tiny")
    with zipfile.ZipFile(tmp_path / name, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(root.rglob("*")):
            if path.is_file():
                archive.write(path, "tiny/" + path.relative_to(root).as_posix())
        for member, data in (extra or {}).items():
            archive.writestr(member, data)
    return tmp_path / name


def stored_packages() -> set[str]:
    return {p.name for p in packages_dir().iterdir()} if packages_dir().exists() else set()


@pytest.fixture
def nothing_imported():
    """Call it after a refused import: no task rows, and the package store holds nothing new."""
    before = stored_packages()
    return lambda: not Task.objects.exists() and stored_packages() == before


@pytest.mark.django_db
def test_import_a_zip_validate_and_export_round_trip(tmp_path, capsys):
    call_command("import_task", str(tiny_zip(tmp_path)))
    assert "tiny v1: imported as a new version" in capsys.readouterr().out

    call_command("validate_task", "tiny")
    out = capsys.readouterr().out
    assert "tiny v1 is ready: baseline value = 2" in out
    version = Task.objects.get(slug="tiny").current_version
    assert version.baseline_score == 2.0 and version.baseline_time_s > 0

    call_command("export_task", "tiny", str(tmp_path / "out.zip"))
    call_command("import_task", str(tmp_path / "out.zip"))
    assert "unchanged (same files as this version)" in capsys.readouterr().out
    assert TaskVersion.objects.count() == 1


@pytest.mark.django_db
def test_options_complete_a_manifest_without_direction(tmp_path, capsys):
    root = package_write(tmp_path / "nodir", TINY_FILES | {"task.toml": 'title = "No direction"\n'})
    with pytest.raises(CommandError, match="metric direction is unknown"):
        call_command("import_task", str(root))
    call_command("import_task", str(root), "--lower-is-better", "--metric", "loss", "--slug", "renamed")
    version = Task.objects.get(slug="renamed").current_version
    assert (version.metric_name, version.higher_is_better) == ("loss", False)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"../evil.txt": "x"}, "a path with '..'"),
        ({"/etc/evil.txt": "x"}, "an absolute path"),
    ],
)
@pytest.mark.django_db
def test_zips_with_path_tricks_are_refused_and_leave_nothing(nothing_imported, tmp_path, bad, message):
    with pytest.raises(CommandError, match=message):
        call_command("import_task", str(tiny_zip(tmp_path, extra=bad)))
    assert nothing_imported()


@pytest.mark.django_db
def test_a_zip_with_a_symlink_is_refused(nothing_imported, tmp_path):
    path = tiny_zip(tmp_path)
    with zipfile.ZipFile(path, "a") as archive:
        info = zipfile.ZipInfo("tiny/env/link")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        archive.writestr(info, "/etc/passwd")
    with pytest.raises(CommandError, match="symbolic link"):
        call_command("import_task", str(path))
    assert nothing_imported()


@pytest.mark.django_db
def test_a_zip_bomb_stops_at_the_size_limit(nothing_imported, tmp_path, settings):
    settings.BENCH_TASK_MAX_BYTES = 50 * 1024 * 1024
    settings.BENCH_TASK_MAX_FILE_BYTES = 50 * 1024 * 1024
    bomb = io.BytesIO(b"\0" * (200 * 1024 * 1024))  # 200 MB of zeros compress to about 200 kB
    with pytest.raises(CommandError, match="at most 52428800 bytes|over the size limit"):
        call_command("import_task", str(tiny_zip(tmp_path, extra={"tiny/env/zeros.bin": bomb.getvalue()})))
    assert nothing_imported()


@pytest.mark.django_db
def test_a_file_over_the_size_limit_is_refused(nothing_imported, tmp_path, settings):
    settings.BENCH_TASK_MAX_FILE_BYTES = 1000
    with pytest.raises(CommandError, match="a file may be at most 1000 bytes"):
        call_command("import_task", str(tiny_zip(tmp_path, extra={"tiny/env/big.csv": "x" * 5000})))
    assert nothing_imported()


@pytest.mark.django_db
def test_something_that_is_not_a_zip_is_refused(tmp_path):
    (tmp_path / "notes.zip").write_text("hello")
    with pytest.raises(CommandError, match="not a zip file"):
        call_command("import_task", str(tmp_path / "notes.zip"))


@pytest.mark.parametrize(
    ("replacement", "message"),
    [
        (
            {"scripts/eval.py": "def get_score(folder):\n    raise RuntimeError('answers do not match')\n"},
            "RuntimeError: answers do not match",
        ),
        (
            {"scripts/eval.py": "def get_score(folder):\n    return 'high'\n"},
            "get_score returned str 'high'; expected a number",
        ),
        (
            {"scripts/eval.py": "def get_score(folder):\n    return '0.5'\n"},
            "get_score returned str '0.5'; expected a number",
        ),
        (
            {"scripts/eval.py": "def get_score(folder):\n    return True\n"},
            "get_score returned bool True; expected a number",
        ),
        (
            {"scripts/prepare.py": "import sys\nprint('cannot build the data', file=sys.stderr)\nsys.exit(3)\n"},
            "prepare.py exited with code 3",
        ),
        ({"scripts/prepare.py": "name = input('dataset? ')\n"}, 'it asked on its standard input: "dataset?"'),
        ({"env/train.py": "raise SystemExit('the starter is broken')\n"}, "the starter is broken"),
    ],
)
@pytest.mark.django_db(transaction=True)
def test_validation_failures_say_what_failed(tmp_path, replacement, message):
    root = package_write(tmp_path / "broken", TINY_FILES | replacement)
    call_command("import_task", str(root))

    with pytest.raises(CommandError) as exc:
        call_command("validate_task", "broken")

    assert "broken v1 failed validation" in str(exc.value)
    assert message in str(exc.value)
    version = Task.objects.get(slug="broken").current_version
    assert version.status == "failed" and message in version.validation_log


@pytest.mark.django_db(transaction=True)
def test_the_documented_example_package_imports_and_validates(capsys, settings):
    call_command("import_task", str(settings.BASE_DIR / "docs" / "example-task"))
    call_command("validate_task", "example-task")
    assert "example-task v1 is ready: baseline mae = " in capsys.readouterr().out


@pytest.mark.django_db(transaction=True)
def test_a_prepare_that_needs_the_network_is_refused_unless_the_deployment_allows_it(tmp_path, settings):
    settings.BENCH_ALLOW_PREPARE_NETWORK = False
    manifest = TINY_FILES["task.toml"] + "\n[prepare]\nnetwork = true\n"
    call_command("import_task", str(package_write(tmp_path / "online", TINY_FILES | {"task.toml": manifest})))
    with pytest.raises(CommandError, match="prepare.py needs the network .* BENCH_ALLOW_PREPARE_NETWORK=1"):
        call_command("validate_task", "online")


@pytest.mark.django_db
def test_a_zip_with_a_path_twice_is_refused(nothing_imported, tmp_path):
    with pytest.raises(CommandError, match="holds tiny/env/a/b twice, or as both a file and a folder"):
        call_command("import_task", str(tiny_zip(tmp_path, extra={"tiny/env/a": "x", "tiny/env/a/b": "y"})))
    assert nothing_imported()


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        ("[metric]\nhigher_is_better = true\nsuccess_threshold = -3\n", "metric.success_threshold must be greater"),
        ("[metric]\nhigher_is_better = true\n[limits]\nmax_steps = -1\n", "limits.max_steps must be at least 1"),
        ("[metric]\nhigher_is_better = true\n[limits]\nmax_time_s = 0\n", "limits.max_time_s must be at least 1"),
        ("[metric]\nhigher_is_better = true\n[resources]\ncpus = -2\n", "resources.cpus must be at least 1"),
        ("[metric]\nhigher_is_better = true\n[resources]\nmemory_mb = 0\n", "resources.memory_mb must be at least"),
        ("[metric]\nhigher_is_better = true\n[resources]\ngpus = -1\n", "resources.gpus must be at least 0"),
        ("[metric]\nhigher_is_better = true\nsuccess_threshold = nan\n", "must be a number"),
    ],
)
@pytest.mark.django_db
def test_out_of_range_manifest_values_are_refused_by_name(nothing_imported, tmp_path, manifest, message):
    root = package_write(tmp_path / "ranges", TINY_FILES | {"task.toml": manifest})
    with pytest.raises(CommandError, match=message):
        call_command("import_task", str(root))
    assert nothing_imported()


@pytest.mark.parametrize("slug", ["Bad Slug/../x", "x" * 64, "-leading", "UPPER"])
@pytest.mark.django_db
def test_a_slug_that_is_not_a_slug_is_refused(nothing_imported, client, tmp_path, slug):
    with pytest.raises(CommandError, match="is not valid: expected lowercase letters"):
        call_command("import_task", str(package_write(tmp_path / "tiny")), f"--slug={slug}")
    assert nothing_imported()
    assert client.get("/tasks/").status_code == 200


@pytest.mark.django_db
def test_links_and_pipes_in_a_package_folder_are_refused_without_waiting(nothing_imported, tmp_path):
    import os

    root = package_write(tmp_path / "tiny")
    os.mkfifo(root / "env" / "pipe")
    with pytest.raises(CommandError, match="env/pipe is not a regular file"):
        call_command("import_task", str(root))
    (root / "env" / "pipe").unlink()
    (root / "env" / "link.txt").symlink_to("/etc/passwd")
    with pytest.raises(CommandError, match="env/link.txt is a link"):
        call_command("import_task", str(root))
    assert nothing_imported()


@pytest.mark.django_db
def test_refused_zips_leave_no_temporary_folders(nothing_imported, tmp_path, monkeypatch):
    import tempfile

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    empty = tmp_path / "empty.zip"
    zipfile.ZipFile(empty, "w").close()
    with pytest.raises(CommandError, match="the zip holds no files; expected a task folder"):
        call_command("import_task", str(empty))
    with pytest.raises(CommandError, match="a path with '..'"):
        call_command("import_task", str(tiny_zip(tmp_path, extra={"../evil.txt": "x"})))
    assert list(scratch.iterdir()) == []
    assert nothing_imported()


@pytest.mark.django_db
def test_exports_to_a_place_that_cannot_be_written_say_so(tiny_task, tmp_path):
    with pytest.raises(CommandError, match="cannot write .*No such file or directory"):
        call_command("export_task", "tiny", str(tmp_path / "missing" / "tiny.zip"))
    run = RunFactory(task_version=tiny_task)
    with pytest.raises(CommandError, match="cannot write .*Is a directory"):
        call_command("export_log", str(run.pk), str(tmp_path))


def encrypted(data: bytes) -> bytes:
    """A zip's bytes with every member flagged as encrypted, as a zip tool's password option leaves it (zipfile
    writes no encrypted zips; the flag alone is what reading one trips on)."""
    flagged = bytearray(data)
    for signature, flag_offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):  # local headers, central directory
        start = flagged.find(signature)
        while start != -1:
            flagged[start + flag_offset] |= 0x1
            start = flagged.find(signature, start + 4)
    return bytes(flagged)


def zip_with_dot_member(data: bytes) -> bytes:
    """A zip's bytes with one more member, a file named '.'."""
    buffer = io.BytesIO(data)
    with zipfile.ZipFile(buffer, "a") as archive:
        archive.writestr(".", "x")
    return buffer.getvalue()


ZIP_TRICKS = [
    (encrypted, r"the zip holds an encrypted member \('[^']+'\); zip the package without a password"),
    (zip_with_dot_member, r"the zip holds a file named '\.', which is no file name; every file needs a name"),
]


@pytest.mark.parametrize(("trick", "message"), ZIP_TRICKS)
@pytest.mark.django_db
def test_an_encrypted_member_or_one_named_dot_is_refused_by_name(
    nothing_imported, tmp_path, monkeypatch, trick, message
):
    import tempfile

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    path = tiny_zip(tmp_path)
    path.write_bytes(trick(path.read_bytes()))
    with pytest.raises(CommandError, match=message):
        call_command("import_task", str(path))
    assert list(scratch.iterdir()) == []
    assert nothing_imported()
