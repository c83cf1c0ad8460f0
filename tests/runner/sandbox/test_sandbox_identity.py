"""Who sandboxed code runs as when the worker is root: an unprivileged user with no capabilities, which
can change neither the system nor the read-only task data a workspace shares with other runs."""

import os
import stat

import pytest

from runner.execution.sandboxes import sandbox_config
from runner.sandbox.identity import writable_for_sandbox

as_root = pytest.mark.skipif(sandbox_config().ids is None, reason="the worker is not root here")


def run_script(env, source: str, name: str = "attempt.py"):
    (env.workspace / name).write_text(source)
    os.chown(env.workspace / name, *(sandbox_config().ids or (os.getuid(), os.getgid())))
    return env.execute("Execute Script", {"script_name": name})


@as_root
def test_sandboxed_code_is_an_unprivileged_user_without_capabilities(make_env):
    outcome = run_script(
        make_env(),
        """
import ctypes, os
print("uid", os.getuid(), "caps", open("/proc/self/status").read().split("CapEff:")[1].split()[0])
for path in ["/proc/sys/kernel/core_pattern", "/proc/sysrq-trigger"]:
    try:
        open(path, "w"); print("WROTE", path)
    except OSError as exc:
        print("blocked", path)
print("remount", ctypes.CDLL(None, use_errno=True).mount(b"none", b"/usr", None, 32 | 4096 | 1, None))
""",
    )
    assert "uid 65534 caps 0000000000000000" in outcome.observation
    assert "WROTE" not in outcome.observation
    assert "remount -1" in outcome.observation


@as_root
def test_renaming_the_folder_of_a_read_only_blob_does_not_make_it_writable(make_env, tmp_path):
    blob = tmp_path / "blob"
    blob.write_text("shared task data")
    blob.chmod(0o444)
    env = make_env()
    (env.workspace / "data").mkdir()
    os.link(blob, env.workspace / "data" / "train.csv")
    writable_for_sandbox(env.workspace, env.sandbox.ids, read_only={"data/train.csv"})
    env.read_only_files = ["data/train.csv"]
    outcome = run_script(
        env,
        """
import os
for attempt in ("rename", "chmod", "append", "unlink"):
    try:
        if attempt == "rename":
            os.rename("data", "data2")
        elif attempt == "chmod":
            os.chmod("data/train.csv", 0o666)
        elif attempt == "append":
            open("data/train.csv", "a").write("POISON")
        else:
            os.unlink("data/train.csv")
        print("DID", attempt)
    except OSError as exc:
        print("blocked", attempt)
""",
    )
    assert "DID" not in outcome.observation, outcome.observation
    assert blob.read_text() == "shared task data" and stat.S_IMODE(blob.stat().st_mode) == 0o444
