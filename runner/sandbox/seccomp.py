"""The system calls sandboxed code may make: an allowlist, at least as strict as Docker's default seccomp profile is
for a process without capabilities, one policy for both sandboxes. bubblewrap installs it as a BPF program before it
runs the code (``--seccomp FD``: ``filter_fd``); the docker sandbox hands the same rules to its engine as a profile
(``docker_profile``).

- Allowed: the calls of ``ALLOWED``, the calls Docker's default profile allows to every process. A call not listed
  fails with EPERM ("Operation not permitted"), never a silent exit: ``ptrace`` and ``process_vm_readv`` (Docker
  allows them), ``io_uring_setup``, ``perf_event_open``, ``userfaultfd``, ``bpf``, ``mount``, the kernel keyring
  (``add_key``, ``keyctl``: keys belong to a uid, not a sandbox), ``unshare`` and ``setns`` (a namespace made inside
  would be a sandbox of the code's own), ``mincore`` (which pages of a shared file another sandbox read).
- Allowed with a condition, as Docker does: ``clone`` without namespace flags; ``socket`` of any family but AF_ALG
  and AF_VSOCK; ``personality`` with Docker's five values (not READ_IMPLIES_EXEC); ``fcntl`` with the commands of
  ``FCNTL_COMMANDS``. ``clone3``, whose flags a filter cannot read, fails with ENOSYS: the C library then uses clone.
- No channel between sandboxes. A file lock (``flock``; ``fcntl``'s F_SETLK, F_SETLKW, F_OFD_SETLK, F_OFD_SETLKW)
  succeeds without taking a lock, so no sandbox holds one that another could see, on a shared read-only file or in
  /proc/locks; locks inside one sandbox exclude nothing either. inotify and fanotify fail with ENOSYS: no watch on a
  shared file. ``fcntl``'s F_NOTIFY and F_SETLEASE are not listed (EPERM).
- Only this machine's native calls under bwrap: another architecture's numbers (x32, i386) fail with ENOSYS. The
  docker engine's runtime would kill such a call; its profile names the 32-bit ABIs too, which get the same policy.

The BPF program is libseccomp's (``libseccomp.so.2``, called through ctypes): it knows each architecture's numbers.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import os
import platform
from dataclasses import dataclass

# Docker's default profile's unconditional list (moby profiles/seccomp/default.json), less inotify, fanotify_mark,
# flock and mincore (below), fcntl (by command) and the calls of other architectures.
ALLOWED = tuple(
    """
    accept accept4 access adjtimex alarm arch_prctl bind brk cachestat capget capset chdir chmod chown clock_adjtime
    clock_getres clock_gettime clock_nanosleep close close_range connect copy_file_range creat dup dup2 dup3
    epoll_create epoll_create1 epoll_ctl epoll_pwait epoll_pwait2 epoll_wait eventfd eventfd2 execve execveat exit
    exit_group faccessat faccessat2 fadvise64 fallocate fchdir fchmod fchmodat fchmodat2 fchown fchownat fdatasync
    fgetxattr flistxattr fork fremovexattr fsetxattr fstat fstatfs fsync ftruncate futex futex_requeue futex_wait
    futex_waitv futex_wake futimesat getcpu getcwd getdents getdents64 getegid geteuid getgid getgroups getitimer
    getpeername getpgid getpgrp getpid getppid getpriority getrandom getresgid getresuid getrlimit get_robust_list
    get_thread_area getrusage getsid getsockname getsockopt gettid gettimeofday getuid getxattr getxattrat io_cancel
    ioctl io_destroy io_getevents io_pgetevents ioprio_get ioprio_set io_setup io_submit kill landlock_add_rule
    landlock_create_ruleset landlock_restrict_self lchown lgetxattr link linkat listen listmount listxattr
    listxattrat llistxattr lremovexattr lseek lsetxattr lstat madvise map_shadow_stack membarrier memfd_create
    memfd_secret mkdir mkdirat mknod mknodat mlock mlock2 mlockall mmap mprotect mq_getsetattr mq_notify mq_open
    mq_timedreceive mq_timedsend mq_unlink mremap mseal msgctl msgget msgrcv msgsnd msync munlock munlockall munmap
    name_to_handle_at nanosleep newfstatat open openat openat2 pause pidfd_open pidfd_send_signal pipe pipe2
    pkey_alloc pkey_free pkey_mprotect poll ppoll prctl pread64 preadv preadv2 prlimit64 process_mrelease pselect6
    pwrite64 pwritev pwritev2 read readahead readlink readlinkat readv recvfrom recvmmsg recvmsg remap_file_pages
    removexattr removexattrat rename renameat renameat2 restart_syscall rmdir rseq rt_sigaction rt_sigpending
    rt_sigprocmask rt_sigqueueinfo rt_sigreturn rt_sigsuspend rt_sigtimedwait rt_tgsigqueueinfo sched_getaffinity
    sched_getattr sched_getparam sched_get_priority_max sched_get_priority_min sched_getscheduler
    sched_rr_get_interval sched_setaffinity sched_setattr sched_setparam sched_setscheduler sched_yield seccomp
    select semctl semget semop semtimedop sendfile sendmmsg sendmsg sendto setfsgid setfsuid setgid setgroups
    setitimer setpgid setpriority setregid setresgid setresuid setreuid setrlimit set_robust_list setsid setsockopt
    set_thread_area set_tid_address setuid setxattr setxattrat shmat shmctl shmdt shmget shutdown sigaltstack
    signalfd signalfd4 socketpair splice stat statfs statmount statx symlink symlinkat sync sync_file_range syncfs
    sysinfo tee tgkill time timer_create timer_delete timer_getoverrun timer_gettime timer_settime timerfd_create
    timerfd_gettime timerfd_settime times tkill truncate umask uname unlink unlinkat uretprobe utime utimensat
    utimes vfork vmsplice wait4 waitid write writev
    """.split()  # noqa: SIM905 (a word list reads better than 300 quoted names)
)
#: fcntl's commands allowed: F_DUPFD, F_GETFD, F_SETFD, F_GETFL, F_SETFL, F_GETLK, F_SETOWN, F_GETOWN, F_SETSIG,
#: F_GETSIG, F_SETOWN_EX, F_GETOWN_EX, F_GETOWNER_UIDS, F_OFD_GETLK, F_GETLEASE, F_DUPFD_QUERY, F_CREATED_QUERY,
#: F_DUPFD_CLOEXEC, F_SETPIPE_SZ, F_GETPIPE_SZ, F_ADD_SEALS, F_GET_SEALS and the four read/write hint commands.
FCNTL_COMMANDS = (0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 15, 16, 17, 36, 1025, 1027, 1028, 1030, 1031, 1032, 1033, 1034,
                  1035, 1036, 1037, 1038)  # fmt: skip
#: fcntl's lock commands (F_SETLK, F_SETLKW, F_OFD_SETLK, F_OFD_SETLKW): they succeed without locking.
FCNTL_LOCKS = (6, 7, 37, 38)
#: Docker's personality values: PER_LINUX, UNAME26, PER_LINUX32 and the two with it, and the query 0xffffffff.
PERSONALITIES = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)
CLONE_NAMESPACES = 0x7E020000  # CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
AF_ALG, AF_VSOCK = 38, 40
WATCHES = ("inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch", "fanotify_init", "fanotify_mark")

# libseccomp's actions and comparisons
ACT_ALLOW = 0x7FFF0000
ATTR_ACT_BADARCH = 2  # SCMP_FLTATR_ACT_BADARCH
CMP_LT, CMP_EQ, CMP_GT, CMP_MASKED_EQ = 2, 4, 6, 7
DOCKER_OPS = {CMP_LT: "SCMP_CMP_LT", CMP_EQ: "SCMP_CMP_EQ", CMP_GT: "SCMP_CMP_GT", CMP_MASKED_EQ: "SCMP_CMP_MASKED_EQ"}
#: The architectures of a Docker profile, as Docker's default names them: the engine's runtime kills a call of any
#: other, so the 32-bit ones get the same policy, by name, rather than a silent end.
DOCKER_ARCHES = {
    "x86_64": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
    "aarch64": ["SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"],
}


def act_errno(number: int) -> int:
    return 0x00050000 | (number & 0xFFFF)


class SeccompUnsupported(Exception):
    """No filter can be built here (no libseccomp, or an architecture the docker profile does not name)."""


@dataclass(frozen=True)
class Rule:
    """Calls of these names get ``result`` (None: allowed; a number: that errno, 0 being success without effect)
    when their argument ``arg`` compares to ``value`` by ``op`` (no ``op``: always)."""

    names: tuple[str, ...]
    result: int | None = None
    arg: int = 0
    op: int = 0
    value: int = 0
    mask: int = 0

    @property
    def datums(self) -> tuple[int, int]:
        """The comparison's two numbers as libseccomp and Docker take them: a masked one's mask comes first."""
        return (self.mask, self.value) if self.op == CMP_MASKED_EQ else (self.value, 0)


def rules() -> list[Rule]:
    conditional = [
        Rule(("clone",), arg=0, op=CMP_MASKED_EQ, mask=CLONE_NAMESPACES, value=0),
        Rule(("socket",), arg=0, op=CMP_LT, value=AF_ALG),
        Rule(("socket",), arg=0, op=CMP_EQ, value=AF_ALG + 1),
        Rule(("socket",), arg=0, op=CMP_GT, value=AF_VSOCK),
        *(Rule(("personality",), arg=0, op=CMP_EQ, value=value) for value in PERSONALITIES),
        *(Rule(("fcntl",), arg=1, op=CMP_EQ, value=command) for command in FCNTL_COMMANDS),
        *(Rule(("fcntl",), 0, arg=1, op=CMP_EQ, value=command) for command in FCNTL_LOCKS),
    ]
    refused = [Rule(("clone3",), errno.ENOSYS), Rule(WATCHES, errno.ENOSYS), Rule(("flock",), 0)]
    return [Rule(ALLOWED), *conditional, *refused]


class _ArgCmp(ctypes.Structure):
    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


@functools.cache
def _libseccomp() -> ctypes.CDLL:
    name = ctypes.util.find_library("seccomp")
    if name is None:
        raise SeccompUnsupported("libseccomp is not installed (Debian: apt-get install libseccomp2)")
    lib = ctypes.CDLL(name, use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint, ctypes.POINTER(_ArgCmp),
    ]  # fmt: skip
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_attr_set.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32]
    return lib


@functools.cache
def filter_program() -> bytes:
    """The policy as this machine's BPF program (the kernel's ``struct sock_filter`` array)."""
    lib = _libseccomp()
    ctx = lib.seccomp_init(act_errno(errno.EPERM))
    if not ctx:
        raise SeccompUnsupported("libseccomp could not start a filter")
    try:
        if lib.seccomp_attr_set(ctx, ATTR_ACT_BADARCH, act_errno(errno.ENOSYS)) != 0:
            raise SeccompUnsupported("libseccomp refused the action for other architectures' calls")
        for rule in rules():
            action = ACT_ALLOW if rule.result is None else act_errno(rule.result)
            args = (_ArgCmp * 1)(_ArgCmp(rule.arg, rule.op, *rule.datums)) if rule.op else None
            for name in rule.names:
                number = lib.seccomp_syscall_resolve_name(name.encode())
                if number < 0:
                    continue  # not a call of this architecture
                if lib.seccomp_rule_add_array(ctx, action, number, 1 if args else 0, args) != 0:
                    raise SeccompUnsupported(f"libseccomp refused the rule for {name}")
        read, write = os.pipe()
        try:
            if lib.seccomp_export_bpf(ctx, write) != 0:
                raise SeccompUnsupported("libseccomp could not export the filter")
            os.close(write)
            write = -1
            chunks = []
            while chunk := os.read(read, 65536):
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(read)
            if write != -1:
                os.close(write)
    finally:
        lib.seccomp_release(ctx)


def filter_fd() -> int:
    """A file descriptor holding the filter, at its start: bubblewrap reads it to its end (``--seccomp FD``).
    The caller passes it to the child and closes its own copy once the child has started."""
    fd = os.memfd_create("mlab-seccomp", os.MFD_CLOEXEC)
    os.write(fd, filter_program())
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def docker_profile(machine: str | None = None) -> dict:
    """The policy as a Docker seccomp profile (``security_opt=["seccomp=<its JSON>"]``), for the engine's machine."""
    machine = machine or platform.machine()
    if machine not in DOCKER_ARCHES:
        raise SeccompUnsupported(f"no seccomp profile for {machine}; known: {', '.join(DOCKER_ARCHES)}")
    syscalls = []
    for rule in rules():
        entry: dict = {"names": list(rule.names), "action": "SCMP_ACT_ALLOW"}
        if rule.result is not None:
            entry |= {"action": "SCMP_ACT_ERRNO", "errnoRet": rule.result}
        if rule.op:
            value, two = rule.datums
            entry["args"] = [{"index": rule.arg, "value": value, "valueTwo": two, "op": DOCKER_OPS[rule.op]}]
        syscalls.append(entry)
    return {
        "defaultAction": "SCMP_ACT_ERRNO",
        "defaultErrnoRet": errno.EPERM,
        "architectures": DOCKER_ARCHES[machine],
        "syscalls": syscalls,
    }
