"""The supervisor: PID 1 of a sandbox kept for a run, which runs one command at a time on request.

Plain standard-library Python, no Django: it runs inside the sandbox with the sandbox's interpreter, as the sandbox
user (``python -I -S -c <this file's source> <fd>``; isolated mode, so nothing in the writable workspace or /tmp
is ever imported). It talks to the worker over one Unix seqpacket socket (fd ``<fd>``), one JSON message each way:

- ``{"op": "run", "argv", "cwd", "env", "rlimits": [[resource, soft, hard], ...], "timeout"}`` with the write
  ends of the command's stdout and stderr pipes attached (SCM_RIGHTS): the worker reads the output itself.
  The answer, once the command is over and nothing it started is left: ``{"exit", "cpu", "rss_kb",
  "timed_out", "retire"}``, or ``{"error"}`` when it could not be started. ``retire``: the sandbox could not be
  put back as it was (/tmp could not be emptied, or the supervisor's own rlimits, priority or scheduling were changed
  from inside, which a process of the same user may do): the supervisor exits, and the worker starts a new sandbox.
- ``{"op": "kill"}`` while a command runs: kill it and everything it started now (the answer above follows).

After each command every other process of the sandbox is killed (``kill(-1, SIGKILL)`` from PID 1 reaches all of
them and never PID 1) and reaped, /tmp and /dev/shm are emptied and System V IPC objects are removed, so the
next command starts as in a fresh sandbox (POSIX message queues, which need a filesystem the sandbox does not
mount to be listed, are the exception; they are small and bounded per user). The supervisor is not dumpable: code
running as the same user cannot ptrace it or open its /proc files (its socket among them); as PID 1 of the
namespace it gets no signal from inside it that it does not handle, and it handles none. When the socket closes
(the worker is gone) it kills everything and exits.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import select
import shutil
import signal
import socket
import sys
import time

PR_SET_DUMPABLE = 4
RLIMITS = [getattr(resource, name) for name in sorted(dir(resource)) if name.startswith("RLIMIT_")]
IPC_RMID = 0
MAX_MESSAGE = 1 << 20
BACKSTOP_S = 5.0  # past the command's own timeout: the worker kills first, this only guards a lost worker
OOM_SCORE_ADJ = b"1000"  # the command goes first when the sandbox's memory runs out, the supervisor last


LIBC = ctypes.CDLL(None, use_errno=True)


def set_dumpable(value: int) -> None:
    if LIBC.prctl(PR_SET_DUMPABLE, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl(PR_SET_DUMPABLE, {value}) failed")


def harden() -> None:
    set_dumpable(0)
    # Python handles SIGINT; as PID 1 with no handler, no signal sent from inside the sandbox reaches us.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def send(sock: socket.socket, message: dict) -> None:
    sock.send(json.dumps(message).encode())


def receive(sock: socket.socket) -> tuple[dict, list[int]]:
    """One message and the file descriptors attached to it; EOFError when the worker has gone."""
    data, fds, _flags, _addr = socket.recv_fds(sock, MAX_MESSAGE, 4)
    try:
        if not data:
            raise EOFError
        message = json.loads(data)
        if not isinstance(message, dict):
            raise ValueError("a message is a JSON object")
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return message, fds


def spawn(request: dict, stdout: int, stderr: int) -> int:
    """Fork the command with its streams, its limits and its environment; the child never returns."""
    pid = os.fork()
    if pid:
        return pid
    try:
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(stdout, 1)
        os.dup2(stderr, 2)
        os.closerange(3, 1 << 20)
        os.setsid()
        for signum in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT):
            signal.signal(signum, signal.SIG_DFL)
        set_dumpable(1)  # as exec would; nothing else runs in the sandbox now to make use of it
        with open("/proc/self/oom_score_adj", "wb", buffering=0) as fh:
            fh.write(OOM_SCORE_ADJ)
        for which, soft, hard in request["rlimits"]:
            resource.setrlimit(which, (soft, hard))
        os.chdir(request["cwd"])
        os.execvpe(request["argv"][0], request["argv"], request["env"])
    except BaseException as exc:  # noqa: BLE001 - the child reports and exits, whatever went wrong
        os.write(2, f"sandbox: could not run {request['argv'][0]}: {exc}\n".encode(errors="replace"))
    os._exit(127)


def kill_all_but_me() -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(-1, signal.SIGKILL)


def kill_everything() -> None:
    """Kill and reap every process of the sandbox but this one (children, orphans, whatever they started)."""
    while True:
        kill_all_but_me()
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def tmp_tree(root: str = "/tmp") -> set[str]:
    """Every path under ``root`` (/tmp, or /dev/shm), on its own filesystem: what the sandbox put there when it
    started (the folders of mounts of the interpreter, when it lives under /tmp) is kept; a folder of another
    filesystem (a mount) is listed but not entered."""
    found: set[str] = set()
    try:
        root_dev = os.lstat(root).st_dev
    except OSError:
        return found
    for folder, subfolders, names in os.walk(root):
        for name in names:
            found.add(os.path.join(folder, name))
        for name in list(subfolders):
            path = os.path.join(folder, name)
            found.add(path)
            try:
                if os.lstat(path).st_dev != root_dev:
                    subfolders.remove(name)
            except OSError:
                subfolders.remove(name)
    return found


def empty_tmp(kept: set[str], root: str = "/tmp") -> bool:
    """What a command left in /tmp (or /dev/shm) goes (it would count against the next one's memory: both are in
    RAM), all but ``kept`` (what was there when the sandbox started); False when it is not as it started (then the
    sandbox retires: the next command gets a new one)."""
    try:
        entries = tmp_tree(root) - kept
    except (OSError, RecursionError):
        return False
    for path in sorted(entries, key=len):
        if not os.path.lexists(path):
            continue  # inside a folder removed already
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)
        except (OSError, RecursionError):
            pass
    try:
        return tmp_tree(root) == kept
    except (OSError, RecursionError):
        return False


def own_state() -> list:
    """The supervisor's own rlimits, priority, scheduling policy and CPUs. Code of the same uid may change them
    (prlimit, setpriority, sched_setscheduler and sched_setaffinity need no ptrace access); a supervisor whose state
    changed retires after its answer, before the change can make it fail or stall."""
    limits = [resource.getrlimit(which) for which in RLIMITS]
    return [limits, os.getpriority(os.PRIO_PROCESS, 0), os.sched_getscheduler(0), sorted(os.sched_getaffinity(0))]


def cpu_seconds(request: dict, status: int, usage: object) -> float:
    """The command's CPU time. One stopped by SIGXCPU used its CPU limit by the kernel's clock (whole ticks), which
    rusage (scaled to the time it really ran) can show as less where ticks are stolen, as on a virtual machine."""
    used = usage.ru_utime + usage.ru_stime
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGXCPU:
        for which, soft, _hard in request["rlimits"]:
            if which == resource.RLIMIT_CPU:
                used = max(used, float(soft))
    return used


def remove_ipc() -> None:
    """System V shared memory, semaphores and message queues a command left (the sandbox has an IPC namespace of
    its own, so these are the sandbox's only): they would outlive it and hold memory."""
    for kind, remove in (("shm", LIBC.shmctl), ("sem", LIBC.semctl), ("msg", LIBC.msgctl)):
        try:
            with open(f"/proc/sysvipc/{kind}") as fh:
                rows = fh.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) < 2 or not fields[1].isdigit():
                continue
            if kind == "sem":
                remove(int(fields[1]), 0, IPC_RMID)
            else:
                remove(int(fields[1]), IPC_RMID, None)


def run(sock: socket.socket, request: dict, fds: list[int], state: list, kept: set[str]) -> bool:
    """Run one command to its end and answer; False when the sandbox must end (the worker has gone, or it is not
    as the first command found it)."""
    if request.get("op") != "run" or len(fds) != 2:
        for fd in fds:
            os.close(fd)
        send(sock, {"error": f"expected a run request with two streams, got {request.get('op')!r}"})
        return True
    try:
        pid = spawn(request, fds[0], fds[1])
    except OSError as exc:
        send(sock, {"error": f"could not start the command: {exc}"})
        return True
    finally:
        for fd in fds:
            os.close(fd)
    pidfd = os.pidfd_open(pid)
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    poller.register(sock, select.POLLIN)
    deadline = time.monotonic() + float(request.get("timeout") or 1e9) + BACKSTOP_S
    timed_out = gone = False
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        events = dict(poller.poll(min(left, 3600) * 1000))
        if pidfd in events:
            break
        if sock.fileno() in events:
            try:
                message, extra = receive(sock)
            except (EOFError, OSError):
                gone = True
                break
            except ValueError:
                continue
            for fd in extra:
                os.close(fd)
            if message.get("op") == "kill":
                break
    os.close(pidfd)
    if timed_out or gone or os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        kill_all_but_me()
    _, status, usage = os.wait4(pid, 0)
    kill_everything()
    clean = all([empty_tmp(kept), empty_tmp(set(), "/dev/shm")])  # both emptied, whatever the first gives
    remove_ipc()
    if gone:
        return False
    retire = not clean or own_state() != state
    send(
        sock,
        {
            "exit": os.waitstatus_to_exitcode(status),
            "cpu": cpu_seconds(request, status, usage),
            "rss_kb": usage.ru_maxrss,
            "timed_out": timed_out,
            "retire": retire,
        },
    )
    return not retire


def main() -> None:
    sock = socket.socket(fileno=int(sys.argv[1]))
    os.set_inheritable(sock.fileno(), False)
    harden()
    state = own_state()
    kept = tmp_tree()
    send(sock, {"ready": os.getpid()})
    while True:
        try:
            request, fds = receive(sock)
        except (EOFError, OSError):
            break
        except ValueError as exc:
            send(sock, {"error": f"unreadable request: {exc}"})
            continue
        if request.get("op") == "kill":
            continue  # a kill that crossed the answer of the command it was meant for: nothing runs now
        if not run(sock, request, fds, state, kept):
            break
    kill_everything()
    # Until the worker closes its end: a message of its still unread when we exit would reset the connection
    # and lose our last answer on its side.
    with contextlib.suppress(EOFError, OSError, ValueError):
        while True:
            for fd in receive(sock)[1]:
                os.close(fd)


if __name__ == "__main__":
    main()
