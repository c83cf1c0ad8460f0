import os

import numpy as np
import pandas as pd
from sklearn.datasets import load_diabetes
from sklearn.model_selection import train_test_split

data = load_diabetes(as_frame=True).frame.rename(columns={"target": "progression"})
train, test = train_test_split(data, test_size=0.25, random_state=0)
train.to_csv("../env/train.csv", index=False)
test = test.reset_index(drop=True)
test.drop(columns="progression").assign(id=np.arange(len(test))).to_csv("../env/test.csv", index=False)
here = os.path.dirname(os.path.abspath(__file__))
pd.DataFrame({"id": np.arange(len(test)), "progression": test["progression"]}).to_csv(
    os.path.join(here, "answer.csv"), index=False
)
