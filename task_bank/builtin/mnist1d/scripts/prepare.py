"""Generate MNIST-1D with the mnist1d package's generator (no download): train/test split, hidden answers."""

import os

import numpy as np
import pandas as pd
from mnist1d.data import get_dataset_args, make_dataset

HERE = os.path.dirname(os.path.abspath(__file__))
ENV = os.path.join(HERE, "..", "env")

args = get_dataset_args()
args.num_samples = 10000  # 8000 training and 2000 test signals; every other setting is the paper's default
# The platform's secret seed (BENCH_TASK_SEED): the package's public default would let anyone generate the test set.
args.seed = int(os.environ.get("BENCH_TASK_SEED", "42"))
data = make_dataset(args)  # make_dataset builds the data from templates; get_dataset would try to download it

columns = [f"x{i}" for i in range(data["x"].shape[1])]
train = pd.DataFrame(data["x"].round(6), columns=columns)
train.insert(0, "label", data["y"])
train.to_csv(os.path.join(ENV, "train.csv"), index=False)

test = pd.DataFrame(data["x_test"].round(6), columns=columns)
test.insert(0, "id", np.arange(len(test)))
test.to_csv(os.path.join(ENV, "test.csv"), index=False)
pd.DataFrame({"id": np.arange(len(test)), "label": data["y_test"]}).to_csv(
    os.path.join(HERE, "answer.csv"), index=False
)
print(f"wrote {len(train)} training signals and {len(test)} test signals of length {len(columns)}")
