"""MLAgentBench's 13 task folders, as its repository has them: what each needs to run (read from its prepare.py and
starter script), for the page that shows which of them this deployment has and how their validation went."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from .package import packages_check

#: MLAgentBench's Python environment of October 2023, every package pinned (the file says how it was made).
ENVIRONMENT_FILE = Path(__file__).with_name("mlagentbench-environment.txt")

KAGGLE = "a Kaggle competition's files ({}), after its rules are accepted on Kaggle's site; prepare.py asks on "
KAGGLE += "standard input"


@dataclass(frozen=True)
class Folder:
    folder: str  # its name in MLAgentBench/benchmarks/
    name: str  # the name its paper's tables give it
    data: str  # where its data comes from
    packages: str  # what its starter imports beyond the standard library
    gpu: str = ""  # "needed", "used when present", or ""


FOLDERS = (
    Folder("cifar10", "cifar10", "CIFAR-10, downloaded by prepare.py through torchvision", "torch, torchvision, pandas",
           "used when present"),
    Folder("imdb", "imdb", "IMDb reviews from Hugging Face, downloaded by the starter", "torch, datasets, pandas"),
    Folder("ogbn-arxiv", "ogbn-arxiv", "the OGB arXiv graph, downloaded by prepare.py",
           "torch, torch-geometric, ogb, pandas", "used when present"),
    Folder("house-price", "house-price", KAGGLE.format("home-data-for-ml-course"), "pandas, scikit-learn"),
    Folder("spaceship-titanic", "spaceship-titanic", KAGGLE.format("spaceship-titanic"),
           "pandas, scikit-learn, seaborn"),
    Folder("amp-parkinsons-disease-progression-prediction", "parkinsons-disease",
           KAGGLE.format("amp-parkinsons-disease-progression-prediction"), "numpy, pandas, scikit-learn"),
    Folder("fathomnet", "fathomnet", KAGGLE.format("fathomnet-out-of-sample-detection") + ", then its images",
           "keras, numpy, pandas, scikit-learn, matplotlib"),
    Folder("feedback", "feedback", KAGGLE.format("feedback-prize-english-language-learning"),
           "torch, numpy, pandas, scikit-learn"),
    Folder("identify-contrails", "identify-contrails",
           KAGGLE.format("google-research-identify-contrails-reduce-global-warming"),
           "torch, numpy, pandas, scikit-learn", "used when present"),
    Folder("llama-inference", "llama-inference", "LLaMA-7B weights from Hugging Face, loaded by the starter",
           "torch, transformers, accelerate, peft, datasets", "needed"),
    Folder("vectorization", "vectorization", "none: the starter makes its own arrays", "numpy 1.x"),
    Folder("CLRS", "CLRS", "CLRS-30 from Google Cloud Storage, downloaded by the starter's code",
           "jax, dm-haiku, tensorflow, clrs (not in the environment: tfds-nightly ships as source only)"),
    Folder("babylm", "BabyLM", "the BabyLM corpus, downloaded by prepare.py with wget",
           "torch, transformers, datasets, evaluate"),
)  # fmt: skip


def environment() -> tuple[str, ...]:
    """MLAgentBench's environment: its packages, each pinned, as ``[environment] packages`` lists them."""
    lines = ENVIRONMENT_FILE.read_text().splitlines()
    return tuple(line for line in lines if line and not line.startswith("#"))


def bare_folder_packages() -> tuple[str, ...]:
    """The packages a bare MLAgentBench folder's scripts get (``BENCH_BARE_FOLDER_PACKAGES``): "mlagentbench" for
    its environment, "none" for the platform's own packages only, or requirement specifiers separated by spaces."""
    value = settings.BENCH_BARE_FOLDER_PACKAGES.strip()
    if value == "mlagentbench":
        return environment()
    if value in ("none", ""):
        return ()
    return packages_check(value.split(), where="BENCH_BARE_FOLDER_PACKAGES: package")
