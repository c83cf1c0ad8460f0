"""The serving harness. Runs in the workspace's sandbox, where no hidden task file is: it imports the task's
serve script (a read-only file of the workspace) and answers the requests the platform sends on stdin.

    python /opt/mlab/harness/serve.py SERVE_SCRIPT

The serve script defines ``load() -> state`` (not timed: import the submission, load a model) and
``answer(state, request: bytes) -> bytes``. Frames on stdin and stdout are an 8-byte big-endian length and that
many bytes. The first frame out is empty, once ``load`` has returned; then one answer per request, in order.
The platform times each request from outside this process, from sending it to receiving the whole answer, so an
answer is only done when its bytes are: nothing can be deferred past it. Whatever the submission prints goes to
stderr, never into a frame.

Standard library only: it runs with the sandbox's interpreter and sees nothing of the platform.
"""

import importlib.util
import os
import struct
import sys
import traceback

HEADER = struct.Struct(">Q")


def read_exact(fd: int, size: int) -> bytes | None:
    """``size`` bytes from ``fd``, or None at the end of the stream."""
    chunks, left = [], size
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def write_frame(fd: int, data: bytes) -> None:
    view = memoryview(HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def serve_script_load(path: str):
    spec = importlib.util.spec_from_file_location("serve", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["serve"] = module
    spec.loader.exec_module(module)
    for name in ("load", "answer"):
        if not callable(getattr(module, name, None)):
            raise SystemExit(
                f"{os.path.basename(path)} does not define {name}(); a serve script defines load() "
                "and answer(state, request)"
            )
    return module


def main(argv: list[str]) -> int:
    # The frames keep descriptors of their own: a print, from here on, goes to stderr.
    requests, answers = os.dup(0), os.dup(1)
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    for fd in (requests, answers):
        os.set_inheritable(fd, False)
    module = serve_script_load(argv[1])
    state = module.load()
    write_frame(answers, b"")
    while (header := read_exact(requests, HEADER.size)) is not None:
        request = read_exact(requests, HEADER.unpack(header)[0])
        if request is None:
            break
        answer = module.answer(state, request)
        if not isinstance(answer, bytes | bytearray | memoryview):
            raise SystemExit(f"answer() returned {type(answer).__name__}; expected bytes")
        write_frame(answers, bytes(answer))
    return 0


if __name__ == "__main__":
    # The workspace (the working directory) is what the serve script imports from, as a script run there would.
    sys.path[0] = ""
    try:
        sys.exit(main(sys.argv))
    except SystemExit:
        raise
    except BaseException:  # noqa: BLE001 - the submission's own error, shown as it would be by python
        traceback.print_exc()
        sys.exit(1)
