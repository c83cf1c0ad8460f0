"""Score the convolution task: import conv2d_forward from the submission's conv.py, check it, and time it.

The score is the best (minimum) wall time in seconds of repeated calls on the benchmark shape (at least 5, more for
fast code until about 2 s have been measured, at most 100), each call on fresh hidden random inputs and each result
checked against a reference. A wrong result on any hidden input raises ValueError.
"""

import importlib.util
import os
import sys
from time import perf_counter as _clock  # bound before the submission is imported: it cannot swap the clock

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
    conv2d_forward = load_submission(submission_folder)
    cases = np.load(os.path.join(HERE, "cases.npz"))

    # 1. Correctness on small hidden cases with various shapes, strides and paddings.
    for i in range(int(cases["n_checks"])):
        stride, padding = (int(v) for v in cases[f"stride_padding_{i}"])
        output = conv2d_forward(
            cases[f"features_{i}"].copy(), cases[f"kernels_{i}"].copy(), cases[f"biases_{i}"].copy(),
            stride=stride, padding=padding,
        )  # fmt: skip
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
        start = _clock()
        output = conv2d_forward(features, kernels, biases, stride=stride, padding=padding)
        elapsed = _clock() - start
        check(f"timed input {repeat}", output, expected)
        if repeat > 0:
            timings.append(elapsed)
    return float(min(timings))


if __name__ == "__main__":
    print(get_score())
