"""The system calls the bwrap sandbox refuses, as a seccomp filter bubblewrap installs before it runs the code
(``--seccomp FD``), in the spirit of Docker's default profile:

- the kernel keyring (``add_key``, ``request_key``, ``keyctl``): keys belong to a uid, not a sandbox, so a key one
  run's code added could be read by the next run's code of the same uid;
- new namespaces and joining others (``unshare``, ``setns``, and ``clone`` with ``CLONE_NEWUSER``): a user
  namespace inside the sandbox is a second sandbox the platform does not control;
- ``clone3``, whose flags a filter cannot read: it fails with ENOSYS, and the C library falls back to ``clone``;
- on x86_64, the x32 system call numbers, which would reach the same calls by other numbers.

Everything else is allowed. The program is classic BPF, built here (no library needed); ``filter_fd`` hands it to
bubblewrap as a file descriptor that is read once.
"""

from __future__ import annotations

import errno
import os
import platform
import struct

# struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6]
NR, ARCH, ARG0_LOW = 0, 4, 16
CLONE_NEWUSER = 0x10000000
X32_SYSCALL_BIT = 0x40000000

# (audit arch, system call numbers) of the machines this runs on
ARCHES = {
    "x86_64": (
        0xC000003E,
        {"add_key": 248, "request_key": 249, "keyctl": 250, "unshare": 272, "setns": 308, "clone": 56, "clone3": 435},
    ),
    "aarch64": (
        0xC00000B7,
        {"add_key": 217, "request_key": 218, "keyctl": 219, "unshare": 97, "setns": 268, "clone": 220, "clone3": 435},
    ),
}
REFUSED = ("add_key", "request_key", "keyctl", "unshare", "setns")

LD_W_ABS, JEQ_K, JGE_K, JSET_K, RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
RET_KILL_PROCESS = 0x80000000


class SeccompUnsupported(Exception):
    """No filter for this machine's architecture."""


def _instruction(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def filter_program(machine: str | None = None) -> bytes:
    """The filter for ``machine`` (this one by default) as the kernel's ``struct sock_filter`` array."""
    machine = machine or platform.machine()
    if machine not in ARCHES:
        raise SeccompUnsupported(f"no seccomp filter for {machine}; known: {', '.join(ARCHES)}")
    audit_arch, numbers = ARCHES[machine]
    # Each entry: (code, jump-if-true target, jump-if-false target, k); targets are labels, resolved below.
    program: list[tuple[int, str | int, str | int, int]] = [
        (LD_W_ABS, 0, 0, ARCH),
        (JEQ_K, "next", "kill", audit_arch),  # a call made under another architecture's numbers
        (LD_W_ABS, 0, 0, NR),
    ]
    if machine == "x86_64":
        program.append((JGE_K, "eperm", "next", X32_SYSCALL_BIT))
    for name in REFUSED:
        program.append((JEQ_K, "eperm", "next", numbers[name]))
    program += [
        (JEQ_K, "enosys", "next", numbers["clone3"]),
        (JEQ_K, "next", "allow", numbers["clone"]),
        (LD_W_ABS, 0, 0, ARG0_LOW),
        (JSET_K, "eperm", "allow", CLONE_NEWUSER),
    ]
    labels = {"allow": len(program), "eperm": len(program) + 1, "enosys": len(program) + 2, "kill": len(program) + 3}
    returns = [RET_ALLOW, RET_ERRNO | errno.EPERM, RET_ERRNO | errno.ENOSYS, RET_KILL_PROCESS]

    def offset(target: str | int, at: int) -> int:
        if target == "next":
            return 0
        if isinstance(target, int):
            return target
        return labels[target] - at - 1

    code = b"".join(_instruction(op, offset(jt, at), offset(jf, at), k) for at, (op, jt, jf, k) in enumerate(program))
    return code + b"".join(_instruction(RET_K, 0, 0, value) for value in returns)


def filter_fd() -> int:
    """A file descriptor holding the filter, at its start: bubblewrap reads it to its end (``--seccomp FD``).
    The caller passes it to the child and closes its own copy once the child has started."""
    fd = os.memfd_create("mlab-seccomp", os.MFD_CLOEXEC)
    os.write(fd, filter_program())
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
