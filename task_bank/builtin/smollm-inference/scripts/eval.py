"""Score the inference task: tokens per second of the submission's generate(), measured by the platform, on
hidden prompts.

A served task: this file never runs the submission. make_requests composes random prompts and computes their
reference outputs with its own float32 model; the platform sends the prompts one at a time to inference.py, through
the workspace's serve.py (which loads the model and warms it up first, not timed), in the workspace's sandbox, and
times each from outside. Every output must equal the reference greedy decoding token for token, otherwise
ValueError. Score = the best, over the prompts, of generated tokens / seconds (higher is better): the best of
several timings is the least disturbed by other processes on the machine.
"""

import json
import os
import random

import torch
from reference import MAX_NEW_TOKENS, load_reference, load_reference_tokenizer, reference_generate

N_PROMPTS = 5
SUBJECTS = [
    "a lighthouse keeper",
    "a young baker",
    "an old fisherman",
    "a curious robot",
    "a lost puppy",
    "a village teacher",
    "a travelling musician",
    "a shy dragon",
    "a night-shift nurse",
    "a retired astronaut",
    "a clever fox",
    "a street painter",
    "a beekeeper",
    "a mountain guide",
    "a librarian",
    "a tiny snail",
]
SETTINGS = [
    "during a thunderstorm",
    "on the first day of spring",
    "in a busy market",
    "at the edge of a frozen lake",
    "inside an abandoned train station",
    "on a small island",
    "in a city without cars",
    "at a winter festival",
    "under a full moon",
    "in a desert town",
    "aboard a cargo ship",
    "in a forest of giant trees",
]
TASKS = [
    "Write a short story about {subject} {setting}.",
    "Describe a day in the life of {subject} {setting}.",
    "Write a diary entry by {subject} {setting}.",
    "Tell a bedtime story about {subject} {setting}.",
]


def random_prompts(n):
    """Prompts composed at random on every evaluation, so that no output can be prepared in advance."""
    chooser = random.SystemRandom()
    return [
        chooser.choice(TASKS).format(subject=chooser.choice(SUBJECTS), setting=chooser.choice(SETTINGS))
        for _ in range(n)
    ]


def make_requests(private_folder):
    """One request per hidden prompt; the reference outputs are kept for score_answers."""
    torch.set_num_threads(2)
    model, tokenizer = load_reference()
    prompts = random_prompts(N_PROMPTS)
    expected = [reference_generate(model, tokenizer, prompt, MAX_NEW_TOKENS) for prompt in prompts]
    with open(os.path.join(private_folder, "expected.json"), "w") as fh:
        json.dump({"prompts": prompts, "expected": expected}, fh)
    return [json.dumps({"prompt": p, "max_new_tokens": MAX_NEW_TOKENS}).encode() for p in prompts]


def score_answers(answers, seconds, private_folder, submission_folder="../env"):
    """The best rate over the prompts, once every output is the reference's, token for token."""
    with open(os.path.join(private_folder, "expected.json")) as fh:
        kept = json.load(fh)
    rates = []
    for prompt, reference, answer, took in zip(kept["prompts"], kept["expected"], answers, seconds, strict=True):
        tokens = token_list(answer)
        if tokens != reference:
            decode = load_reference_tokenizer().decode
            raise ValueError(
                f"generate() output differs from the reference greedy decoding for the prompt {prompt!r}: got "
                f"{len(tokens)} tokens {decode(tokens)!r}, expected {len(reference)} tokens "
                f"{decode(reference)!r}; the optimised code must produce exactly the same tokens"
            )
        rates.append(len(tokens) / took)
    return float(max(rates))


def token_list(answer):
    try:
        tokens = json.loads(answer)
    except ValueError:
        tokens = None
    if not isinstance(tokens, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in tokens):
        raise ValueError(f"generate() gave {answer[:200]!r}; expected a list of token ids")
    return tokens
