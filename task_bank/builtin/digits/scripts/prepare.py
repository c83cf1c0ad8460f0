"""Build the task data from scikit-learn's bundled digits (no download): train/test split, hidden answers."""

import os

import numpy as np
import pandas as pd
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

HERE = os.path.dirname(os.path.abspath(__file__))
ENV = os.path.join(HERE, "..", "env")

digits = load_digits()
pixels = pd.DataFrame(digits.data.astype(int), columns=[f"p{i}" for i in range(64)])
X_train, X_test, y_train, y_test = train_test_split(
    pixels, digits.target, test_size=0.3, random_state=0, stratify=digits.target
)
train = X_train.copy()
train.insert(0, "label", y_train)
train.to_csv(os.path.join(ENV, "train.csv"), index=False)
test = X_test.copy()
test.insert(0, "id", np.arange(len(test)))
test.to_csv(os.path.join(ENV, "test.csv"), index=False)
pd.DataFrame({"id": np.arange(len(test)), "label": y_test}).to_csv(os.path.join(HERE, "answer.csv"), index=False)
print(f"wrote {len(train)} training rows and {len(test)} test rows")
