"""A 2D convolution layer (forward pass, followed by ReLU) written with explicit Python loops.

Shapes follow the channels-last convention:
    features: (batch, height, width, in_channels)
    kernels:  (kernel_size, kernel_size, in_channels, out_channels)
    biases:   (out_channels,)
    output:   (batch, out_height, out_width, out_channels) with
              out_height = (height + 2 * padding - kernel_size) // stride + 1 (same for the width)
"""

import time

import numpy as np

BATCH_SIZE = 32
IMAGE_SIZE = 32
IN_CHANNELS = 3
OUT_CHANNELS = 16
KERNEL_SIZE = 3
STRIDE = 1
PADDING = 1
REPEATS = 3


def relu(x):
    return np.maximum(x, 0)


def convolution_step(image_slice, kernel, bias):
    """One output value: the sum of an image patch multiplied elementwise by one kernel, plus the bias."""
    return np.sum(image_slice * kernel) + bias


def conv2d_forward(features, kernels, biases, stride=1, padding=0):
    """Convolve a batch of images with a bank of kernels and apply ReLU (see the module docstring for shapes)."""
    batch_size, height, width, in_channels = features.shape
    kernel_size, _, kernel_in_channels, out_channels = kernels.shape
    assert in_channels == kernel_in_channels, "the kernels' input channels must match the features' channels"

    padded = np.pad(features, ((0, 0), (padding, padding), (padding, padding), (0, 0)), mode="constant")
    out_height = (height + 2 * padding - kernel_size) // stride + 1
    out_width = (width + 2 * padding - kernel_size) // stride + 1
    output = np.zeros((batch_size, out_height, out_width, out_channels))

    for index in range(batch_size):
        image = padded[index]
        for h in range(out_height):
            for w in range(out_width):
                top = h * stride
                left = w * stride
                image_slice = image[top : top + kernel_size, left : left + kernel_size, :]
                for channel in range(out_channels):
                    kernel = kernels[:, :, :, channel]
                    output[index, h, w, channel] = convolution_step(image_slice, kernel, biases[channel])
    return relu(output)


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    features = rng.standard_normal((BATCH_SIZE, IMAGE_SIZE, IMAGE_SIZE, IN_CHANNELS))
    kernels = rng.standard_normal((KERNEL_SIZE, KERNEL_SIZE, IN_CHANNELS, OUT_CHANNELS))
    biases = rng.standard_normal(OUT_CHANNELS)
    timings = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        output = conv2d_forward(features, kernels, biases, stride=STRIDE, padding=PADDING)
        timings.append(time.perf_counter() - start)
    print(f"output shape {output.shape}, checksum {output.sum():.6f}")
    print(f"validation seconds: {min(timings):.4f}")
