"""Score the inference task: tokens per second of the submission's generate(), measured here, on hidden prompts.

eval.py composes random prompts and computes their reference outputs with its own float32 model. The submission
runs in a child process: it imports inference.py, calls load_model() (not timed) and a short warm-up; this
process then sends it the prompts one by one and times each generate() call from the outside, so the
submission's code can neither touch the clock nor the score. Every output must equal the reference greedy
decoding token for token, otherwise ValueError.
Score = the best, over the prompts, of generated tokens / seconds spent in generate (higher is better): the best of
several timings is the least disturbed by other processes on the machine.
"""

import importlib.util
import multiprocessing
import os
import random
import sys
import traceback
from time import perf_counter

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


def _serve(connection, submission_folder):
    """The child process: load the submission and its model, then generate what the parent asks for."""
    try:
        torch.set_num_threads(2)
        submission = load_submission(submission_folder)
        model, tokenizer = submission.load_model()
        submission.generate(model, tokenizer, "Hello!", 4)  # warm-up, not timed
        connection.send(("ready",))
    except BaseException as exc:
        connection.send(("error", "".join(traceback.format_exception_only(exc)).strip()))
        return
    while True:
        message = connection.recv()
        if message[0] != "generate":
            return
        try:
            connection.send(("tokens", as_token_list(submission.generate(model, tokenizer, message[1], message[2]))))
        except BaseException:
            connection.send(("error", traceback.format_exc(limit=-3)))


class Submission:
    """generate() of the submission, running in its own process."""

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
            raise ValueError(f"the submission failed: {message[1]}")
        if message[0] != kind:
            raise ValueError(f"the submission's process answered {message[0]!r}; expected {kind!r}")
        return message

    def generate(self, prompt, max_new_tokens):
        """The tokens and the seconds the call took, measured here."""
        start = perf_counter()
        self.connection.send(("generate", prompt, max_new_tokens))
        tokens = self.expect("tokens")[1]
        return tokens, perf_counter() - start

    def close(self):
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5)


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

    if not os.path.exists(os.path.join(submission_folder, "inference.py")):
        raise FileNotFoundError("inference.py was not found in the workspace; expected load_model() and generate()")
    submission = Submission(submission_folder)
    rates = []
    try:
        for prompt, reference in zip(prompts, expected, strict=True):
            tokens, seconds = submission.generate(prompt, MAX_NEW_TOKENS)
            if tokens != reference:
                raise ValueError(
                    f"generate() output differs from the reference greedy decoding for the prompt {prompt!r}: got "
                    f"{len(tokens)} tokens {reference_tokenizer.decode(tokens)!r}, expected {len(reference)} tokens "
                    f"{reference_tokenizer.decode(reference)!r}; the optimised code must produce exactly the same "
                    "tokens"
                )
            rates.append(len(tokens) / seconds)
    finally:
        submission.close()
    return float(max(rates))


if __name__ == "__main__":
    print(get_score())
