from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from .base import Limits, Mount, Sandbox, SandboxError, host_python_paths
from .seccomp import filter_fd
from .supervised import SupervisedSandbox

# The read-only system: enough to run Python and its native libraries, nothing of the host's data.
SYSTEM_DIRS = ["/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/etc"]
HIDDEN_ETC = ["/etc/shadow", "/etc/gshadow", "/etc/ssh", "/etc/ssl/private"]


class BwrapSandbox(Sandbox):
    """bubblewrap: unprivileged Linux namespaces. No network, read-only system, private /tmp and /proc."""

    name = "bwrap"

    def __init__(
        self, python: str, *, ids: tuple[int, int] | None, persistent: bool = False, gpu_devices: str = ""
    ) -> None:
        self.gpu_devices = gpu_devices
        self.bwrap = shutil.which("bwrap")
        if not self.bwrap:
            raise SandboxError("BENCH_SANDBOX=bwrap but bubblewrap is not installed (apt-get install bubblewrap)")
        self.python = python
        self.python_dirs = host_python_paths(python)
        # The platform's editable install has a .pth that imports its finder at every interpreter start (7 ms each):
        # the platform's own code is nothing sandboxed code needs, so the sandbox sees that .pth empty. Another
        # package installed editable stays as it is.
        pths = (d.glob("lib/python3*/site-packages/__editable__*mlab_bench*.pth") for d in self.python_dirs)
        self.editable_pths = sorted(str(p) for found in pths for p in found)
        self.ids = ids
        #: Whether a run's scripts share one sandbox with a supervisor in it (``keep``) or get one each.
        self.persistent = persistent
        self.setpriv = shutil.which("setpriv")
        if self.ids is not None and not self.setpriv:
            raise SandboxError(
                "the worker runs as root, so sandboxed code must drop to an unprivileged user, which needs "
                "setpriv (util-linux); install util-linux or run the worker as an unprivileged user"
            )

    def command(
        self,
        argv: Sequence[str],
        *,
        mounts: Sequence[Mount],
        cwd: str,
        env: dict[str, str],
        network: bool,
        tmp_mb: int = 1024,
        seccomp_fd: int | None = None,
        gpus: int = 0,
    ) -> list[str]:
        cmd = [self.bwrap, "--die-with-parent", "--new-session", "--as-pid-1", "--hostname", "sandbox"]
        if seccomp_fd is not None:
            cmd += ["--seccomp", str(seccomp_fd)]  # no keyring, no new namespaces (seccomp.py)
        if self.ids is not None:
            # As root: namespaces without a user namespace, then setpriv drops to the sandbox user with no
            # capabilities (below), so the code is an ordinary unprivileged process on the host.
            cmd += ["--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"]
            if not network:
                cmd.append("--unshare-net")
        else:
            # As an unprivileged worker: a user namespace, with every capability dropped inside it, and no
            # further one inside it.
            cmd += ["--unshare-all", "--unshare-user", "--disable-userns", "--cap-drop", "ALL"]
            if network:
                cmd.append("--share-net")
        for path in SYSTEM_DIRS:
            if os.path.islink(path):
                cmd += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                cmd += ["--ro-bind", path, path]
        for path in HIDDEN_ETC:
            if os.path.isdir(path):
                cmd += ["--tmpfs", path]
            elif os.path.exists(path):
                cmd += ["--ro-bind", "/dev/null", path]
        cmd += ["--proc", "/proc", "--dev", "/dev"]
        cmd += ["--perms", "1777", "--size", str(tmp_mb * 1024 * 1024), "--tmpfs", "/tmp"]
        # multiprocessing's semaphores (joblib, DataLoader workers) are files in /dev/shm: the sandbox user's own.
        cmd += ["--perms", "1777", "--size", str(tmp_mb * 1024 * 1024), "--tmpfs", "/dev/shm"]
        cmd += ["--ro-bind-try", "/sys/devices/system/cpu", "/sys/devices/system/cpu"]
        if gpus:  # the task's GPUs: their device files, the driver's, and which they are
            for device in gpu_devices(gpus, self.gpu_devices)[0]:
                cmd += ["--dev-bind", device, device]
            env = {**env, **self.gpu_env(gpus)}
        # After the private /tmp: an interpreter installed under /tmp (a CI checkout) stays visible. Folders
        # above it (such as root's home) are made traversable: the sandbox user must reach the interpreter.
        made: set[Path] = set()
        for path in self.python_dirs:
            cmd += _parents(path, made)
            cmd += ["--ro-bind", str(path), str(path)]
        for pth in self.editable_pths:
            cmd += ["--ro-bind", "/dev/null", pth]
        for mount in mounts:
            if mount.hide == "folder":
                cmd += ["--tmpfs", mount.target, "--remount-ro", mount.target]
                continue
            if mount.hide == "file":
                cmd += ["--ro-bind", "/dev/null", mount.target]
                continue
            cmd += _parents(Path(mount.target), made)
            cmd += ["--bind" if mount.writable else "--ro-bind", str(mount.source), mount.target]
        cmd += ["--chdir", cwd, "--clearenv"]
        for key, value in env.items():
            cmd += ["--setenv", key, value]
        if self.ids is not None:
            uid, gid = self.ids
            drop = [self.setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--no-new-privs"]
            drop += ["--inh-caps=-all", "--bounding-set=-all", "--"]
            return [*cmd, "--", *drop, *argv]
        return [*cmd, "--", *argv]

    def gpu_env(self, gpus: int) -> dict[str, str]:
        """What tells CUDA which of the bound GPUs are the sandbox's ({} without GPUs)."""
        if not gpus:
            return {}
        indices = gpu_devices(gpus, self.gpu_devices)[1]
        return {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": ",".join(indices)}

    def keep(self, *, mounts: Sequence[Mount], limits: Limits) -> SupervisedSandbox | None:
        if not self.persistent:
            return None
        return SupervisedSandbox(self, mounts=mounts, limits=limits)

    def popen(
        self,
        argv: Sequence[str],
        *,
        mounts: Sequence[Mount],
        cwd: str,
        env: dict[str, str] | None = None,
        limits: Limits | None = None,
        network: bool = False,
        stdin: int | None = subprocess.DEVNULL,
        stdout: int | None = subprocess.PIPE,
        stderr: int | None = subprocess.PIPE,
        pass_fds: Sequence[int] = (),
    ) -> subprocess.Popen:
        full_env = self.environment(env, str(Path(self.python).parent))
        limits = limits or Limits()
        seccomp = filter_fd()
        try:
            cmd = self.command(
                argv,
                mounts=mounts,
                cwd=cwd,
                env=full_env,
                network=network,
                tmp_mb=limits.tmp_mb,
                seccomp_fd=seccomp,
                gpus=limits.gpus,
            )
            return self.start(
                cmd,
                limits=limits,
                what="bubblewrap",
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                env={"PATH": "/usr/bin:/bin"},
                pass_fds=(*pass_fds, seccomp),
            )
        finally:
            os.close(seccomp)  # the child has its own copy


#: What a GPU's code needs beside its own device file: the driver's control, memory and mode devices.
GPU_SHARED_DEVICES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset")


def gpu_devices(count: int, pattern: str) -> tuple[list[str], list[str]]:
    """The device files to bind for ``count`` GPUs (the first of those ``pattern`` finds, with the driver's shared
    ones) and their indices, for CUDA_VISIBLE_DEVICES; SandboxError when the worker has fewer."""
    found = sorted(glob.glob(pattern), key=lambda path: (len(path), path))
    if len(found) < count:
        raise SandboxError(
            f"the task asks for {count} GPU{'s' if count > 1 else ''}; this worker has {len(found)} "
            f"({pattern}: BENCH_GPU_DEVICES)"
        )
    chosen = found[:count]
    indices = [re.sub(r"\D", "", os.path.basename(path)) or str(n) for n, path in enumerate(chosen)]
    return [*chosen, *(path for path in GPU_SHARED_DEVICES if os.path.exists(path))], indices


def _is_bound(path: Path) -> bool:
    """Folders already provided by the read-only system binds (creating them again would fail)."""
    return any(path == Path(d) or Path(d) in path.parents for d in SYSTEM_DIRS)


def _parents(path: Path, made: set[Path]) -> list[str]:
    """Create the folders above a mount point as 0755 (bwrap would otherwise copy restrictive modes such as
    root's home, and the sandbox user could not reach the mount)."""
    args = []
    for parent in reversed(path.parents):
        if str(parent) in ("/", "/tmp") or parent in made or _is_bound(parent):
            continue
        args += ["--perms", "0755", "--dir", str(parent)]
        made.add(parent)
    return args
