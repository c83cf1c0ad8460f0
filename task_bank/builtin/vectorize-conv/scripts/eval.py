"""Score the convolution task: run conv2d_forward from the submission's conv.py, check it, and time it.

The submission runs in a child process; this process sends it inputs, times each call from the outside and
checks every result, so the submission's code can neither touch the clock nor the score. The score is the best
(minimum) wall time in seconds of repeated calls on the benchmark shape (at least 5, more for fast code until
about 2 s have been measured, at most 100), each call on fresh hidden random inputs and each result checked
against a reference. A wrong result on any hidden input raises ValueError.
"""

import importlib.util
import multiprocessing
import os
import sys
import traceback
from time import perf_counter

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
MIN_REPEATS = 5
MAX_REPEATS = 100
MEASURE_SECONDS = 2.0
RTOL = 1e-4
ATOL = 1e-4


def reference_conv2d_forward(features, kernels, biases, stride=1, padding=0):
    """A vectorised reference (checked against the loop version on the stored cases) for the timed inputs."""
    kernel_size = kernels.shape[0]
    padded = np.pad(features, ((0, 0), (padding, padding), (padding, padding), (0, 0)), mode="constant")
    windows = np.lib.stride_tricks.sliding_window_view(padded, (kernel_size, kernel_size), axis=(1, 2))
    windows = windows[:, ::stride, ::stride]  # (batch, out_h, out_w, in_channels, k, k)
    output = np.einsum("bhwcij,ijco->bhwo", windows, kernels, optimize=True) + biases
    return np.maximum(output, 0)


def _serve(connection, submission_folder):
    """The child process: load the submission, then run it on what the parent sends."""
    try:
        function = load_submission(submission_folder)
        connection.send(("ready",))
    except BaseException as exc:
        connection.send(("error", "".join(traceback.format_exception_only(exc)).strip()))
        return
    stored, output = None, None
    while True:
        message = connection.recv()
        try:
            if message[0] == "check":
                features, kernels, biases, stride, padding = message[1:]
                connection.send(
                    ("output", np.asarray(function(features, kernels, biases, stride=stride, padding=padding)))
                )
            elif message[0] == "load":
                stored, output = message[1:], None
                connection.send(("loaded",))
            elif message[0] == "go":
                features, kernels, biases, stride, padding = stored
                output = function(features, kernels, biases, stride=stride, padding=padding)
                connection.send(("done",))
            elif message[0] == "fetch":
                connection.send(("output", np.asarray(output)))
            else:
                return
        except BaseException:
            connection.send(("error", traceback.format_exc(limit=-3)))


class Submission:
    """conv2d_forward of the submission, running in its own process."""

    def __init__(self, submission_folder):
        context = multiprocessing.get_context("spawn")
        self.connection, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(child, os.path.abspath(submission_folder)), daemon=True)
        self.process.start()
        child.close()
        self.expect("ready")

    def expect(self, kind):
        try:
            message = self.connection.recv()
        except EOFError:
            raise ValueError("the submission's process ended unexpectedly (it crashed or exited)") from None
        if message[0] == "error":
            raise ValueError(f"conv2d_forward failed: {message[1]}")
        if message[0] != kind:
            raise ValueError(f"the submission's process answered {message[0]!r}; expected {kind!r}")
        return message

    def check_call(self, *args):
        self.connection.send(("check", *args))
        return self.expect("output")[1]

    def timed_call(self, *args):
        self.connection.send(("load", *args))
        self.expect("loaded")
        start = perf_counter()
        self.connection.send(("go",))
        self.expect("done")
        elapsed = perf_counter() - start
        self.connection.send(("fetch",))
        return self.expect("output")[1], elapsed

    def close(self):
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5)


def load_submission(submission_folder):
    path = os.path.join(submission_folder, "conv.py")
    if not os.path.exists(path):
        raise FileNotFoundError("conv.py was not found in the workspace; expected it to define conv2d_forward")
    sys.path.insert(0, os.path.abspath(submission_folder))
    spec = importlib.util.spec_from_file_location("submitted_conv", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    function = getattr(module, "conv2d_forward", None)
    if not callable(function):
        raise ValueError(
            "conv.py does not define conv2d_forward(features, kernels, biases, stride=1, padding=0); "
            "keep that function name and signature"
        )
    return function


def check(name, output, expected):
    output = np.asarray(output)
    if output.shape != expected.shape:
        raise ValueError(f"conv2d_forward returned shape {output.shape} on {name}; expected {expected.shape}")
    if not np.all(np.isfinite(output)):
        raise ValueError(f"conv2d_forward returned non-finite values on {name}")
    if not np.allclose(output, expected, rtol=RTOL, atol=ATOL):
        error = float(np.max(np.abs(output - expected)))
        raise ValueError(
            f"conv2d_forward gives a wrong result on {name} (max absolute difference {error:.3g}); it must "
            "return the same values as the original loop implementation"
        )


def get_score(submission_folder="../env"):
    cases = np.load(os.path.join(HERE, "cases.npz"))
    if not os.path.exists(os.path.join(submission_folder, "conv.py")):
        raise FileNotFoundError("conv.py was not found in the workspace; expected it to define conv2d_forward")
    submission = Submission(submission_folder)
    try:
        # 1. Correctness on small hidden cases with various shapes, strides and paddings.
        for i in range(int(cases["n_checks"])):
            stride, padding = (int(v) for v in cases[f"stride_padding_{i}"])
            output = submission.check_call(
                cases[f"features_{i}"], cases[f"kernels_{i}"], cases[f"biases_{i}"], stride, padding
            )
            check(f"hidden case {i} (stride {stride}, padding {padding})", output, cases[f"expected_{i}"])

        # 2. Timing on the benchmark shape: one untimed warm-up, then the best of several calls on fresh inputs.
        batch, height, width, cin, cout, k, stride, padding = (int(v) for v in cases["benchmark_shape"])
        rng = np.random.default_rng()  # fresh random inputs on every evaluation: nothing can be computed in advance
        timings = []
        for repeat in range(MAX_REPEATS + 1):
            if len(timings) >= MIN_REPEATS and sum(timings) >= MEASURE_SECONDS:
                break
            features = rng.standard_normal((batch, height, width, cin))
            kernels = rng.standard_normal((k, k, cin, cout))
            biases = rng.standard_normal(cout)
            expected = reference_conv2d_forward(features, kernels, biases, stride=stride, padding=padding)
            output, elapsed = submission.timed_call(features, kernels, biases, stride, padding)
            check(f"timed input {repeat}", output, expected)
            if repeat > 0:
                timings.append(elapsed)
        return float(min(timings))
    finally:
        submission.close()


if __name__ == "__main__":
    print(get_score())
