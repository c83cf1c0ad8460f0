"""File actions: they act on the workspace directly (trusted code), inside its boundary only."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from .environment import EnvError, Environment

BACKUP_DIR = "backup"
MAX_READ_BYTES = 5 * 1024 * 1024
MAX_INSPECT_LINES = 100


def _read_text(path: Path, rel: str) -> str:
    if path.is_dir():
        raise EnvError(f"cannot read file {rel} because it is a directory.")
    if not path.is_file():
        raise EnvError(f"cannot read file {rel}: it does not exist.")
    size = path.stat().st_size
    if size > MAX_READ_BYTES:
        raise EnvError(
            f"cannot read file {rel}: it is {size} bytes, over the {MAX_READ_BYTES} byte limit; "
            "use Inspect Script Lines or a script to look at parts of it."
        )
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        raise EnvError(f"cannot read file {rel}: it is a binary file ({size} bytes).")
    return data.decode("utf-8", errors="replace")


def _backup(env: Environment, path: Path) -> None:
    """Keep the previous version of a file so Undo Edit Script can restore it (as MLAgentBench does)."""
    if not path.is_file():
        return
    rel = env.relative(path)
    backup_dir = env.workspace / BACKUP_DIR
    backup_dir.mkdir(exist_ok=True)
    stamp = time.strftime("%Y-%m-%dT%H-%M-%S") + f"-{time.monotonic_ns() % 10**9:09d}"
    shutil.copyfile(path, backup_dir / f"{rel.replace('/', '__')}_{stamp}")


def _write(env: Environment, file_name: str, content: str, mode: str) -> str:
    path = env.resolve(file_name)
    env.check_writable(file_name, path)
    if path.is_dir():
        raise EnvError(f"cannot write file {file_name} because it is a directory.")
    if env.relative(path).split("/")[0] == BACKUP_DIR:
        raise EnvError(f"cannot write file {file_name}: the {BACKUP_DIR}/ folder is kept by the environment.")
    path.parent.mkdir(parents=True, exist_ok=True)
    _backup(env, path)
    with open(path, mode, encoding="utf-8") as fh:
        fh.write(content)
    return file_name


def list_files(env: Environment, dir_path: str) -> str:
    path = env.resolve(dir_path or ".")
    if not path.is_dir():
        raise EnvError(f"Cannot list file in the {dir_path} directory")
    entries = []
    for entry in sorted(os.scandir(path), key=lambda e: e.name):
        if entry.name == "__pycache__":
            continue
        entries.append(entry.name + ("/" if entry.is_dir(follow_symlinks=False) else ""))
    return "\n".join(entries) + ("\n" if entries else "")


def read_file(env: Environment, file_name: str) -> str:
    return _read_text(env.resolve(file_name), file_name)


def write_file(env: Environment, file_name: str, content: str) -> str:
    _write(env, file_name, content, "w")
    return f"File {file_name} written successfully."


def append_file(env: Environment, file_name: str, content: str) -> str:
    _write(env, file_name, content, "a")
    return f"File {file_name} appended successfully."


def copy_file(env: Environment, source: str, destination: str) -> str:
    src = env.resolve(source)
    dst = env.resolve(destination)
    if not src.is_file():
        raise EnvError(
            f"File {source} copy to {destination} failed. Check whether the source and destinations are valid."
        )
    env.check_writable(destination, dst)
    if dst.is_dir():
        dst = dst / src.name
    dst.parent.mkdir(parents=True, exist_ok=True)
    _backup(env, dst)
    shutil.copyfile(src, dst)
    return f"File {source} copied to {destination}"


def undo_edit_script(env: Environment, script_name: str) -> str:
    path = env.resolve(script_name)
    env.check_writable(script_name, path)
    rel = env.relative(path)
    backup_dir = env.workspace / BACKUP_DIR
    prefix = f"{rel.replace('/', '__')}_"
    backups = sorted(p for p in backup_dir.glob(f"{prefix}*")) if backup_dir.is_dir() else []
    if not backups:
        raise EnvError("There is no change to undo.")
    latest = backups[-1]
    shutil.copyfile(latest, path)
    latest.unlink()
    return f"Content of {script_name} after undo the most recent edit:\n" + _read_text(path, script_name)


def inspect_script_lines(env: Environment, script_name: str, start_line_number: int, end_line_number: int) -> str:
    path = env.resolve(script_name)
    lines = _read_text(path, script_name).split("\n")
    start = max(start_line_number, 1)
    end = min(end_line_number, len(lines))
    if end < start:
        raise EnvError(
            f"the line numbers are out of range: {script_name} has {len(lines)} lines and you asked for "
            f"{start_line_number} to {end_line_number}."
        )
    if end - start + 1 > MAX_INSPECT_LINES:
        raise EnvError(f"the number of lines to display is limited to {MAX_INSPECT_LINES} lines")
    body = "\n".join(lines[start - 1 : end])
    return f"Here are the lines (the file ends at line {len(lines)}):\n\n{body}"


HANDLERS = {
    "List Files": list_files,
    "Read File": read_file,
    "Write File": write_file,
    "Append File": append_file,
    "Copy File": copy_file,
    "Undo Edit Script": undo_edit_script,
}
