"""Score the convolution task: conv2d_forward of the submission's conv.py, checked and timed.

A served task: this file never runs the submission. make_requests writes the inputs of each call (small hidden
cases with various shapes, strides and paddings, then fresh random inputs of the benchmark shape) and keeps what
the check needs in the private folder; the platform sends them one at a time to conv.py, through the workspace's
serve.py, in the workspace's sandbox, and measures each call from outside. score_answers checks every output
against a reference and scores the best (minimum) of the timed calls, in seconds. A wrong result on any input
raises ValueError.
"""

import io
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
WARM_UPS = 1
TIMED = 5
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


def _array_bytes(**arrays):
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def make_requests(private_folder):
    """The calls' inputs, in order: every hidden case, the warm-up, then the timed calls on fresh inputs."""
    cases = np.load(os.path.join(HERE, "cases.npz"))
    requests, expected, names = [], {}, []
    for i in range(int(cases["n_checks"])):
        stride, padding = (int(v) for v in cases[f"stride_padding_{i}"])
        requests.append(
            _array_bytes(
                features=cases[f"features_{i}"],
                kernels=cases[f"kernels_{i}"],
                biases=cases[f"biases_{i}"],
                stride_padding=np.array([stride, padding]),
            )
        )
        expected[f"call_{len(names)}"] = cases[f"expected_{i}"]
        names.append(f"hidden case {i} (stride {stride}, padding {padding})")
    batch, height, width, cin, cout, k, stride, padding = (int(v) for v in cases["benchmark_shape"])
    rng = np.random.default_rng()  # fresh random inputs on every evaluation: nothing can be computed in advance
    for repeat in range(WARM_UPS + TIMED):
        features = rng.standard_normal((batch, height, width, cin))
        kernels = rng.standard_normal((k, k, cin, cout))
        biases = rng.standard_normal(cout)
        requests.append(
            _array_bytes(features=features, kernels=kernels, biases=biases, stride_padding=np.array([stride, padding]))
        )
        expected[f"call_{len(names)}"] = reference_conv2d_forward(
            features, kernels, biases, stride=stride, padding=padding
        )
        names.append(f"benchmark input {repeat}" + (" (warm-up)" if repeat < WARM_UPS else ""))
    np.savez(os.path.join(private_folder, "expected.npz"), names=np.array(names), **expected)
    return requests


def score_answers(answers, seconds, private_folder, submission_folder="../env"):
    """The best time of the timed calls, once every output is right."""
    kept = np.load(os.path.join(private_folder, "expected.npz"))
    names = [str(name) for name in kept["names"]]
    for index, (name, answer) in enumerate(zip(names, answers, strict=True)):
        try:
            output = np.load(io.BytesIO(answer), allow_pickle=False)
        except ValueError as exc:
            raise ValueError(f"the output for {name} is not an array ({exc})") from None
        check(name, output, kept[f"call_{index}"])
    return float(min(seconds[-TIMED:]))
