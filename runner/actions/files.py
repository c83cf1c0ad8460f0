"""File actions: they act on the workspace directly (trusted code), through fs, which never follows a link."""

from __future__ import annotations

import time

from ..workspace import fs
from .catalogue import APPEND_FILE, COPY_FILE, LIST_FILES, READ_FILE, UNDO_EDIT_SCRIPT, WRITE_FILE
from .types import ActionEnv, EnvError

BACKUP_DIR = "backup"
MAX_READ_BYTES = 5 * 1024 * 1024
MAX_COPY_BYTES = 2 * 1024 * 1024 * 1024
MAX_INSPECT_LINES = 100


def _read_text(env: ActionEnv, name: str, shown: str) -> str:
    kind = fs.kind(env.workspace, name)
    if kind in ("dir", "missing"):
        raise EnvError(f"cannot read file {shown}")  # MLAgentBench's words for either
    if kind == "other":
        raise EnvError(f"cannot access file {shown} because it is not in the work directory.")
    try:
        data = fs.read_bytes(env.workspace, name, limit=MAX_READ_BYTES)
    except OverflowError as exc:
        raise EnvError(
            f"cannot read file {shown}: it is {exc.args[0]} bytes, over the {MAX_READ_BYTES} byte limit; "
            "use Inspect Script Lines or a script to look at parts of it."
        ) from None
    if b"\0" in data[:8192]:
        raise EnvError(f"cannot read file {shown}: it is a binary file ({len(data)} bytes).")
    return data.decode("utf-8", errors="replace")


def _backup(env: ActionEnv, name: str) -> None:
    """Keep the previous version of a file so Undo Edit Script can restore it (as MLAgentBench does)."""
    if fs.kind(env.workspace, name) != "file":
        return
    stamp = time.strftime("%Y-%m-%dT%H-%M-%S") + f"-{time.monotonic_ns() % 10**9:09d}"
    try:  # streamed and hole-preserving: the worker never holds the file
        fs.copy_file(env.workspace, name, f"{BACKUP_DIR}/{name.replace('/', '__')}_{stamp}", limit=MAX_COPY_BYTES)
    except OverflowError:
        raise EnvError(
            f"cannot keep a backup of {name}: it is over {MAX_COPY_BYTES} bytes; delete or shrink it with a script"
        ) from None


def _writable(env: ActionEnv, file_name: str) -> str:
    name = env.name(file_name)
    env.check_writable(file_name, name)
    if env.keeps_backups and name.split("/")[0] == BACKUP_DIR:
        raise EnvError(f"cannot write file {file_name}: the {BACKUP_DIR}/ folder is kept by the environment.")
    kind = fs.kind(env.workspace, name)
    if kind == "dir":
        raise EnvError(f"cannot write file {file_name} because it is a directory.")
    if kind == "other":
        raise EnvError(f"cannot write file {file_name} because it is a link or a special file.")
    return name


def list_files(env: ActionEnv, dir_path: str) -> str:
    name = env.name(dir_path or ".")
    if fs.kind(env.workspace, name) != "dir":
        raise EnvError(f"Cannot list file in the {dir_path} directory")
    entries = [
        fs.shown(n) + ("/" if is_dir else "") for n, is_dir in fs.list_dir(env.workspace, name) if n != "__pycache__"
    ]
    return "\n".join(entries) + ("\n" if entries else "")


def read_file(env: ActionEnv, file_name: str) -> str:
    return _read_text(env, env.name(file_name), file_name)


def write_file(env: ActionEnv, file_name: str, content: str) -> str:
    name = _writable(env, file_name)
    if env.keeps_backups:
        _backup(env, name)
    fs.write_bytes(env.workspace, name, content.encode("utf-8"), owner=env.owner)
    return f"File {file_name} written successfully."


def append_file(env: ActionEnv, file_name: str, content: str) -> str:
    name = _writable(env, file_name)
    if env.keeps_backups:
        _backup(env, name)
    fs.write_bytes(env.workspace, name, content.encode("utf-8"), append=True, owner=env.owner)
    return f"File {file_name} appended successfully."


def copy_file(env: ActionEnv, source: str, destination: str) -> str:
    failed = f"File {source} copy to {destination} failed. Check whether the source and destinations are valid."
    src = env.name(source)
    if fs.kind(env.workspace, src) != "file":
        raise EnvError(failed)
    if fs.kind(env.workspace, env.name(destination)) == "dir":
        raise EnvError(f"{failed} The destination is a folder: give the new file's name.")
    dst = _writable(env, destination)
    if env.keeps_backups:
        _backup(env, dst)
    try:  # streamed and hole-preserving: the worker holds one chunk, and a sparse file stays sparse
        fs.copy_file(env.workspace, src, dst, limit=MAX_COPY_BYTES, owner=env.owner)
    except OverflowError:
        raise EnvError(f"{failed} The source is over {MAX_COPY_BYTES} bytes.") from None
    return f"File {source} copied to {destination}"


def undo_edit_script(env: ActionEnv, script_name: str) -> str:
    name = env.name(script_name)
    env.check_writable(script_name, name)
    prefix = f"{name.replace('/', '__')}_"
    backups = []
    if fs.kind(env.workspace, BACKUP_DIR) == "dir":
        backups = sorted(
            n for n, is_dir in fs.list_dir(env.workspace, BACKUP_DIR) if not is_dir and n.startswith(prefix)
        )
    if not backups:
        raise EnvError("There is no change to undo.")
    latest = f"{BACKUP_DIR}/{backups[-1]}"
    fs.copy_file(env.workspace, latest, _writable(env, script_name), owner=env.owner)
    fs.unlink(env.workspace, latest)
    return f"Content of {script_name} after undo the most recent edit:\n" + _read_text(env, name, script_name)


def inspect_script_lines(env: ActionEnv, script_name: str, start_line_number: int, end_line_number: int) -> str:
    lines = _read_text(env, env.name(script_name), script_name).split("\n")
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
    LIST_FILES: list_files,
    READ_FILE: read_file,
    WRITE_FILE: write_file,
    APPEND_FILE: append_file,
    COPY_FILE: copy_file,
    UNDO_EDIT_SCRIPT: undo_edit_script,
}
