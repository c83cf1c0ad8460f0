"""Score the inference task: tokens per second of the submission's generate(), measured here, on hidden prompts.

eval.py composes random prompts, computes their reference outputs with its own float32 model, then imports
inference.py from the submission, calls its load_model() (not timed) and a short warm-up, and times generate() on
those prompts. Every output must equal the reference greedy decoding token for token, otherwise ValueError.
Score = the best, over the prompts, of generated tokens / seconds spent in generate (higher is better): the best of
several timings is the least disturbed by other processes on the machine.
"""

import importlib.util
import os
import random
import sys
from time import perf_counter as _clock  # bound before the submission is imported: it cannot swap the clock

import torch
from reference import MAX_NEW_TOKENS, load_reference, reference_generate

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


def load_submission(submission_folder):
    path = os.path.join(submission_folder, "inference.py")
    if not os.path.exists(path):
        raise FileNotFoundError("inference.py was not found in the workspace; expected load_model() and generate()")
    sys.path.insert(0, os.path.abspath(submission_folder))
    spec = importlib.util.spec_from_file_location("submitted_inference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name in ("load_model", "generate"):
        if not callable(getattr(module, name, None)):
            raise ValueError(
                f"inference.py does not define {name}(); expected load_model() -> (model, tokenizer) and "
                "generate(model, tokenizer, prompt, max_new_tokens) -> list of token ids"
            )
    return module


def as_token_list(tokens):
    if torch.is_tensor(tokens):
        tokens = tokens.reshape(-1).tolist()
    try:
        return [int(t) for t in tokens]
    except (TypeError, ValueError) as exc:
        raise ValueError(f"generate() returned {type(tokens).__name__}; expected a list of token ids") from exc


def get_score(submission_folder="../env"):
    torch.set_num_threads(2)
    # The reference outputs are computed before the submission is imported, so that its code cannot affect them.
    reference_model, reference_tokenizer = load_reference()
    prompts = random_prompts(N_PROMPTS)
    expected = [reference_generate(reference_model, reference_tokenizer, p, MAX_NEW_TOKENS) for p in prompts]
    del reference_model

    submission = load_submission(submission_folder)
    model, tokenizer = submission.load_model()
    submission.generate(model, tokenizer, "Hello!", 4)  # warm-up, not timed

    rates = []
    for prompt, reference in zip(prompts, expected, strict=True):
        start = _clock()
        tokens = submission.generate(model, tokenizer, prompt, MAX_NEW_TOKENS)
        seconds = _clock() - start
        tokens = as_token_list(tokens)
        if tokens != reference:
            raise ValueError(
                f"generate() output differs from the reference greedy decoding for the prompt {prompt!r}: "
                f"got {len(tokens)} tokens {reference_tokenizer.decode(tokens)!r}, expected {len(reference)} tokens "
                f"{reference_tokenizer.decode(reference)!r}; the optimised code must produce exactly the same tokens"
            )
        rates.append(len(tokens) / seconds)
    return float(max(rates))


if __name__ == "__main__":
    print(get_score())
