"""How the evaluator runs conv.py (read-only; you do not need to change it).

The evaluator sends the inputs of one call at a time; conv2d_forward computes the output, which is sent back as
an array of float64 values. Each call is timed from outside, from the moment its inputs are sent until its whole
output has come back, so converting and sending the result is part of the call. Importing conv.py (load) is not
timed.
"""

import io

import numpy as np


def load():
    import conv

    return conv.conv2d_forward


def answer(conv2d_forward, request):
    with np.load(io.BytesIO(request), allow_pickle=False) as arrays:
        features, kernels, biases = arrays["features"], arrays["kernels"], arrays["biases"]
        stride, padding = (int(v) for v in arrays["stride_padding"])
    output = np.asarray(conv2d_forward(features, kernels, biases, stride=stride, padding=padding), dtype=np.float64)
    buffer = io.BytesIO()
    np.save(buffer, output, allow_pickle=False)
    return buffer.getvalue()
