"""The escape suite: what a script run through Execute Script tries, and how each attempt is contained, in
each isolating sandbox this machine has (bwrap; docker on a real engine). After every attempt the environment
still works (the run can go on)."""

import functools
import os
import re
import subprocess
import threading
import time

import pytest

from runner.actions.environment import TaskPackages
from runner.sandbox import Limits


@pytest.fixture
def make_env(make_env, backend):
    """The Environment maker of tests/runner/conftest.py, in the backend under test."""
    return functools.partial(make_env, sandbox=backend)


def run_script(env, source: str):
    (env.workspace / "attempt.py").write_text(source)
    outcome = env.execute("Execute Script", {"script_name": "attempt.py"})
    # Whatever happened, the environment goes on.
    (env.workspace / "ok.py").write_text("print('still fine')")
    assert "still fine" in env.execute("Execute Script", {"script_name": "ok.py"}).observation
    return outcome


def test_reading_a_host_file_by_path_by_dotdot_and_by_symlink_fails(make_env, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET")
    env = make_env()
    os.symlink(secret, env.workspace / "link.txt")
    source = f"""
for path in [{str(secret)!r}, "../" * 12 + {str(secret).lstrip("/")!r}, "link.txt"]:
    try:
        print(open(path).read())
    except OSError as exc:
        print("blocked", type(exc).__name__)
"""
    outcome = run_script(env, source)
    assert "TOP SECRET" not in outcome.observation
    assert outcome.observation.count("blocked") == 3


def test_hidden_task_files_are_not_visible(make_env, tiny_task):
    from runner.execution.preparation import task_version_prepare

    prepared = task_version_prepare(tiny_task)
    answer = prepared.scripts_dir / "answer.txt"
    assert answer.exists()
    outcome = run_script(make_env(), f"import os\nprint(os.path.exists({str(answer)!r}))")
    assert "False" in outcome.observation


def test_the_workers_environment_and_processes_are_not_visible(make_env):
    source = f"""
import os
print(sorted(p for p in os.listdir("/proc") if p.isdigit()))
print(os.path.exists("/proc/{os.getpid()}/environ"))
"""
    outcome = run_script(make_env(), source)
    assert "False" in outcome.observation
    assert "['1'" in outcome.observation  # only the sandbox's own processes


KEYRING_AND_NAMESPACES = """
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
# add_key("user", "note", "secret", 6, KEY_SPEC_USER_KEYRING): a key the next run of this uid could read
numbers = {"x86_64": (248, 250), "aarch64": (217, 219)}[os.uname().machine]
key = libc.syscall(numbers[0], b"user", b"note", b"secret", 6, -4)
print("add_key", key, errno.errorcode.get(ctypes.get_errno()))
print("keyctl", libc.syscall(numbers[1], 0, -4, 0), errno.errorcode.get(ctypes.get_errno()))  # the user keyring's id
print("unshare", libc.unshare(0x10000000), errno.errorcode.get(ctypes.get_errno()))  # CLONE_NEWUSER
pid = os.fork()  # an ordinary child still works (clone without new namespaces)
if pid == 0:
    os._exit(7)
print("fork", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


def test_the_kernel_keyring_and_new_user_namespaces_are_refused(make_env):
    """Keys belong to a uid, not a sandbox: one run's key would be the next run's to read. A user namespace made
    inside the sandbox would be a sandbox of the code's own."""
    outcome = run_script(make_env(), KEYRING_AND_NAMESPACES)
    lines = dict(line.split(" ", 1) for line in outcome.observation.splitlines() if line.split(" ")[0] in
                 ("add_key", "keyctl", "unshare", "fork"))  # fmt: skip
    assert lines["add_key"].startswith("-1 E"), outcome.observation
    assert lines["keyctl"].startswith("-1 E"), outcome.observation
    assert lines["unshare"].startswith("-1 E"), outcome.observation
    assert lines["fork"] == "7", outcome.observation


# Calls Docker's default profile refuses a process without capabilities, and ptrace and process_vm_readv, which it
# allows: (name, x86_64 number, aarch64 number, arguments). Each fails with an error the script sees, and it goes on.
REFUSED_CALLS = [
    ("io_uring_setup", 425, 425, "1, ctypes.create_string_buffer(128)"),
    ("perf_event_open", 298, 241, "None, 0, -1, -1, 0"),
    ("userfaultfd", 323, 282, "0"),
    ("personality", 135, 92, "0x0400000"),  # READ_IMPLIES_EXEC
    ("process_vm_readv", 310, 270, "os.getppid(), None, 0, None, 0, 0"),
    ("ptrace", 101, 117, "0, 0, 0, 0"),  # PTRACE_TRACEME
    ("bpf", 321, 280, "0, None, 0"),
    ("mount", 165, 40, 'b"none", b"/tmp", b"tmpfs", 0, None'),
    ("mincore", 27, 232, "None, 0, None"),  # which pages of a shared file are cached: another sandbox's reads
    ("inotify_init1", 294, 26, "0"),  # a watch on a shared file
    ("clone3", 435, 435, "None, 0"),  # ENOSYS: the C library falls back to clone
]


@pytest.mark.parametrize(("name", "x86_64", "aarch64", "args"), REFUSED_CALLS, ids=[c[0] for c in REFUSED_CALLS])
def test_a_system_call_outside_the_allowlist_fails_with_an_error_and_the_script_goes_on(make_env, name, x86_64,
                                                                                        aarch64, args):  # fmt: skip
    source = f"""
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
number = {{"x86_64": {x86_64}, "aarch64": {aarch64}}}[os.uname().machine]
result = libc.syscall(number, {args})
print("{name}", result, errno.errorcode.get(ctypes.get_errno()))
print("after")
"""
    outcome = run_script(make_env(), source)
    expected = "ENOSYS" if name in ("inotify_init1", "clone3") else "EPERM"
    assert f"{name} -1 {expected}" in outcome.observation, outcome.observation
    assert "after" in outcome.observation and not outcome.error


def test_another_architectures_call_numbers_are_refused(make_env):
    source = """
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
print("native", libc.syscall(39 if os.uname().machine == "x86_64" else 172) > 0, flush=True)  # getpid
if os.uname().machine == "x86_64":
    print("x32", libc.syscall(39 | 0x40000000), errno.errorcode.get(ctypes.get_errno()), flush=True)
"""
    outcome = run_script(make_env(), source)
    assert "native True" in outcome.observation, outcome.observation
    # bwrap refuses another architecture's numbers; docker's profile gives the 32-bit ABIs the same policy
    assert re.search(r"x32 (-1 ENOSYS|\d+ None)", outcome.observation) or "x32" not in outcome.observation, (
        outcome.observation
    )


SENDER = """
import fcntl, os, struct, time
shared = open("/opt/task-packages/shared.txt")
fcntl.flock(shared, fcntl.LOCK_EX)  # a lock the receiver would see held: one bit
fcntl.fcntl(shared, fcntl.F_SETLK, struct.pack("hhqqi", fcntl.F_RDLCK, 0, 0, 0, 0))
open("locked", "w").write("1")
for _ in range(600):  # until the receiver has looked
    if os.path.exists("done"):
        break
    time.sleep(0.05)
    shared.read()  # what a watch on the file would see
    shared.seek(0)
print("sender done")
"""
RECEIVER = """
import ctypes, errno, fcntl, os, struct
shared = open("/opt/task-packages/shared.txt")
try:
    fcntl.flock(shared, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("flock free")
except BlockingIOError:
    print("flock held")
query = fcntl.fcntl(shared, fcntl.F_GETLK, struct.pack("hhqqi", fcntl.F_WRLCK, 0, 0, 0, 0))
print("posix", "free" if struct.unpack("hhqqi", query)[0] == fcntl.F_UNLCK else "held")
print("proc/locks", sum(f":{os.fstat(shared.fileno()).st_ino} " in line for line in open("/proc/locks")))
libc = ctypes.CDLL(None, use_errno=True)
print("inotify", libc.inotify_init1(0), errno.errorcode.get(ctypes.get_errno()))
"""


def test_two_sandboxes_cannot_signal_each_other_through_a_lock_or_a_watch_on_a_shared_file(make_env, tmp_path):
    """Both see the same read-only file (here the task's packages folder, bound into each). The sender takes a
    flock and a POSIX lock on it; the receiver finds both free, no lock on it in /proc/locks, and no inotify."""
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "shared.txt").write_text("one file, two sandboxes\n")
    sender = make_env(name="sender", packages=TaskPackages(shared))
    receiver = make_env(name="receiver", packages=TaskPackages(shared))
    (sender.workspace / "send.py").write_text(SENDER)
    (receiver.workspace / "look.py").write_text(RECEIVER)
    sent = {}
    send = {"script_name": "send.py"}
    thread = threading.Thread(target=lambda: sent.update(o=sender.execute("Execute Script", send)))
    thread.start()
    try:
        for _ in range(600):
            if (sender.workspace / "locked").exists():
                break
            time.sleep(0.05)
        assert (sender.workspace / "locked").exists(), "the sender never took its locks"
        seen = receiver.execute("Execute Script", {"script_name": "look.py"}).observation
    finally:
        (sender.workspace / "done").write_text("1")
        thread.join(60)
    assert "sender done" in sent["o"].observation, sent["o"].observation
    assert "flock free" in seen and "posix free" in seen, seen
    assert "proc/locks 0" in seen, seen
    assert "inotify -1 ENOSYS" in seen, seen


@pytest.mark.parametrize("address", [("127.0.0.1", 5432), ("10.0.0.1", 80), ("8.8.8.8", 53)])
def test_no_network(make_env, address):
    source = f"""
import socket
try:
    socket.create_connection({address!r}, timeout=3)
    print("CONNECTED")
except OSError as exc:
    print("blocked", exc)
"""
    outcome = run_script(make_env(), source)
    assert "CONNECTED" not in outcome.observation and "blocked" in outcome.observation


def test_a_fork_bomb_is_contained(make_env):
    env = make_env(limits=Limits(processes=64), action_timeout_s=10)
    source = """
import os, time
children = 0
while True:
    try:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        children += 1
    except OSError:
        print("fork refused after", children, flush=True)
        time.sleep(60)
"""
    outcome = run_script(env, source)
    assert outcome.error
    assert "fork refused after" in outcome.observation or "processes" in outcome.observation


def test_a_memory_bomb_is_stopped_with_a_memory_message(make_env):
    env = make_env(limits=Limits(memory_mb=256))
    outcome = run_script(env, "blocks = [bytearray(64 * 1024 * 1024) for _ in range(64)]\nprint('ALLOCATED')")
    assert "ALLOCATED" not in outcome.observation
    assert "memory" in outcome.observation.lower()


def test_a_huge_file_hits_the_file_size_limit(make_env):
    env = make_env(limits=Limits(file_size_mb=20))
    source = """
with open("big.bin", "wb") as fh:
    for _ in range(100):
        fh.write(b"x" * 1024 * 1024)
print("WROTE")
"""
    outcome = run_script(env, source)
    assert "WROTE" not in outcome.observation
    assert "File too large" in outcome.observation or "file size limit" in outcome.observation
    assert (env.workspace / "big.bin").stat().st_size <= 20 * 1024 * 1024


def test_filling_the_workspace_stops_the_script(make_env):
    env = make_env(workspace_limit_mb=30, action_timeout_s=60)
    source = """
import time
for i in range(1000):
    with open(f"fill{i}.bin", "wb") as fh:
        fh.write(b"x" * 5 * 1024 * 1024)
    time.sleep(0.05)
print("FILLED")
"""
    outcome = run_script(env, source)
    assert "FILLED" not in outcome.observation
    assert "over its limit of 30 MB" in outcome.observation


def test_filling_tmp_is_bounded(make_env):
    env = make_env(limits=Limits(tmp_mb=32))
    source = """
try:
    with open("/tmp/fill.bin", "wb") as fh:
        for _ in range(100):
            fh.write(b"x" * 1024 * 1024)
    print("FILLED")
except OSError as exc:
    print("blocked", exc)
"""
    outcome = run_script(env, source)
    assert "FILLED" not in outcome.observation and "No space left" in outcome.observation


def test_an_infinite_loop_is_stopped_at_the_action_time_limit(make_env):
    env = make_env(action_timeout_s=3)
    outcome = run_script(env, "while True:\n    pass")
    assert outcome.error and "3-second time limit" in outcome.observation


def test_killing_the_parent_and_everything_else_reaches_only_the_sandbox(make_env):
    bystander = subprocess.Popen(["sleep", "60"])  # a process of the worker's, outside the sandbox
    try:
        source = f"""
import os, signal
for target in (os.getppid(), -1, 1, {os.getpid()}, {bystander.pid}):
    try:
        os.kill(target, signal.SIGKILL)
    except OSError as exc:
        print("kill", target, type(exc).__name__, flush=True)
print("SURVIVED")
"""
        run_script(make_env(), source)  # which also checks that the environment still works afterwards
        time.sleep(0.5)
        assert bystander.poll() is None, "a sandboxed script killed a process outside its sandbox"
        # This test process (the worker's stand-in) is alive to check it.
    finally:
        bystander.kill()
        bystander.wait()


def test_the_cpu_time_limit_stops_a_busy_script_with_a_message(make_env):
    env = make_env(limits=Limits(cpu_seconds=1), action_timeout_s=30)
    outcome = run_script(env, "while True:\n    pass")
    assert outcome.error and "CPU time limit of 1 s" in outcome.observation
