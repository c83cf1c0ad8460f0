"""Make the hidden test cases for the convolution task (random arrays with fixed seeds, nothing downloaded).

cases.npz holds small correctness cases (odd shapes, strides and paddings) with the outputs of the original
loop-based implementation, plus the shape of the timed benchmark. eval.py checks the agent's
conv2d_forward on all of them and times it on fresh random inputs of the benchmark shape.
"""

import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def reference_conv2d_forward(features, kernels, biases, stride=1, padding=0):
    """The starter's loop-based implementation, kept here so that the reference cannot be edited by the agent."""
    batch_size, height, width, _ = features.shape
    kernel_size, _, _, out_channels = kernels.shape
    padded = np.pad(features, ((0, 0), (padding, padding), (padding, padding), (0, 0)), mode="constant")
    out_height = (height + 2 * padding - kernel_size) // stride + 1
    out_width = (width + 2 * padding - kernel_size) // stride + 1
    output = np.zeros((batch_size, out_height, out_width, out_channels))
    for index in range(batch_size):
        for h in range(out_height):
            for w in range(out_width):
                top, left = h * stride, w * stride
                image_slice = padded[index, top : top + kernel_size, left : left + kernel_size, :]
                for channel in range(out_channels):
                    output[index, h, w, channel] = np.sum(image_slice * kernels[:, :, :, channel]) + biases[channel]
    return np.maximum(output, 0)


# (batch, height, width, in_channels, out_channels, kernel_size, stride, padding)
CHECK_SHAPES = [
    (2, 9, 11, 4, 5, 3, 2, 0),
    (3, 16, 16, 3, 6, 5, 1, 2),
    (1, 7, 7, 2, 3, 1, 1, 0),
    (2, 12, 10, 3, 4, 3, 3, 1),
    (4, 32, 32, 3, 16, 3, 1, 1),
]
BENCHMARK_SHAPE = (32, 32, 32, 3, 16, 3, 1, 1)

rng = np.random.default_rng(12345)
arrays = {}
for i, (batch, height, width, cin, cout, k, stride, padding) in enumerate(CHECK_SHAPES):
    features = rng.standard_normal((batch, height, width, cin))
    kernels = rng.standard_normal((k, k, cin, cout))
    biases = rng.standard_normal(cout)
    arrays[f"features_{i}"] = features
    arrays[f"kernels_{i}"] = kernels
    arrays[f"biases_{i}"] = biases
    arrays[f"stride_padding_{i}"] = np.array([stride, padding])
    arrays[f"expected_{i}"] = reference_conv2d_forward(features, kernels, biases, stride=stride, padding=padding)
arrays["n_checks"] = np.array(len(CHECK_SHAPES))
arrays["benchmark_shape"] = np.array(BENCHMARK_SHAPE)
np.savez_compressed(os.path.join(HERE, "cases.npz"), **arrays)
print(f"wrote {len(CHECK_SHAPES)} correctness cases and the benchmark settings to cases.npz")
