"""Who sandboxed code runs as, and the ownership of the folders it may write.

A worker running as root must not run untrusted code as root: even in namespaces, root keeps power over
kernel settings and mounts. So, when the worker is root, sandboxed processes drop to an unprivileged user
(``SandboxConfig.ids``: nobody by default) with no capabilities. The folders they write are laid out so that
user can create and change its own files but not the task's: folders are root's with the sticky bit (like
/tmp: nobody removes or renames what is not theirs), the task's read-only files stay root's and read-only
(they may be hard links to shared blobs), every other file belongs to the sandbox user.

A worker that is not root runs sandboxes as itself, in a user namespace; it cannot separate owners, so the
runner copies read-only files instead of linking them (see ``Sandbox.protects_links``).

``ids`` below is the sandbox's ``(uid, gid)``, or None when sandboxed code runs as the worker: then there is
nothing to lay out.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path


def _walk(root: Path):
    """Every folder and file below root (iteratively; links are not followed)."""
    stack = [root]
    while stack:
        folder = stack.pop()
        yield folder, True
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
                else:
                    yield Path(entry.path), False


def writable_for_sandbox(
    root: Path, ids: tuple[int, int] | None, *, read_only: set[str] = frozenset(), sticky: bool = True
) -> None:
    """Lay out ownership so sandboxed code may write below root, except the read-only files.

    sticky: folders stay root's with mode 1777 (the sandbox user cannot remove or rename root's files or
    folders); otherwise everything goes to the sandbox user (for scratch folders such as a prepare.py run).
    """
    if ids is None:
        return
    uid, gid = ids
    root = Path(root)
    for path, is_dir in _walk(root):
        rel = path.relative_to(root).as_posix()
        if is_dir:
            if sticky:
                os.chown(path, 0, 0, follow_symlinks=False)
                os.chmod(path, 0o1777)
            else:
                os.chown(path, uid, gid, follow_symlinks=False)
                os.chmod(path, 0o755)
        elif rel in read_only:
            continue
        elif not path.is_symlink():
            os.chown(path, uid, gid, follow_symlinks=False)


def owned_by_root(root: Path, ids: tuple[int, int] | None) -> None:
    """Take a folder back from the sandbox user (after prepare.py): root's, not writable by others."""
    if ids is None:
        return
    for path, is_dir in _walk(Path(root)):
        with contextlib.suppress(FileNotFoundError):
            st = os.lstat(path)
            os.chown(path, 0, 0, follow_symlinks=False)
            if not stat.S_ISLNK(st.st_mode):
                os.chmod(path, (st.st_mode & 0o755) | (0o755 if is_dir else 0o644))
