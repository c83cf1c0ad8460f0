"""How the evaluator runs inference.py (read-only; you do not need to change it).

load() imports inference.py, loads the model and warms it up (not timed). Each request is one prompt; generate's
tokens are sent back as a JSON list of integers. Each request is timed from outside, from the moment the prompt is
sent until the whole list has come back.
"""

import json

import torch


def load():
    torch.set_num_threads(2)
    import inference

    model, tokenizer = inference.load_model()
    inference.generate(model, tokenizer, "Hello!", 4)  # warm-up
    return inference.generate, model, tokenizer


def answer(state, request):
    generate, model, tokenizer = state
    asked = json.loads(request)
    tokens = generate(model, tokenizer, asked["prompt"], asked["max_new_tokens"])
    if torch.is_tensor(tokens):
        tokens = tokens.reshape(-1).tolist()
    return json.dumps([int(t) for t in tokens]).encode()
