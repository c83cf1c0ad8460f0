"""Starter: a small multilayer perceptron on the raw MNIST-1D signals, trained for a few epochs."""

import numpy as np
import pandas as pd
import torch
from torch import nn

SEED = 0
EPOCHS = 10
BATCH_SIZE = 128
LEARNING_RATE = 0.001
HIDDEN_SIZE = 32

torch.manual_seed(SEED)
np.random.seed(SEED)
torch.set_num_threads(2)

train = pd.read_csv("train.csv")
test = pd.read_csv("test.csv")
features = [c for c in train.columns if c.startswith("x")]

X = torch.tensor(train[features].values, dtype=torch.float32)
y = torch.tensor(train["label"].values, dtype=torch.long)
X_test = torch.tensor(test[features].values, dtype=torch.float32)

# Carve a validation split out of the training data.
permutation = torch.randperm(len(X))
n_valid = len(X) // 5
valid_idx, train_idx = permutation[:n_valid], permutation[n_valid:]


def make_model():
    return nn.Sequential(nn.Linear(len(features), HIDDEN_SIZE), nn.ReLU(), nn.Linear(HIDDEN_SIZE, 10))


def fit(model, X_fit, y_fit):
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(EPOCHS):
        model.train()
        order = torch.randperm(len(X_fit))
        for start in range(0, len(X_fit), BATCH_SIZE):
            batch = order[start : start + BATCH_SIZE]
            optimizer.zero_grad()
            loss = loss_fn(model(X_fit[batch]), y_fit[batch])
            loss.backward()
            optimizer.step()
    return model


def predict(model, X_in):
    model.eval()
    with torch.no_grad():
        return model(X_in).argmax(dim=1)


model = fit(make_model(), X[train_idx], y[train_idx])
valid_accuracy = (predict(model, X[valid_idx]) == y[valid_idx]).float().mean().item()
print(f"validation accuracy: {valid_accuracy:.4f}")

# Retrain on all the training data and predict the test set.
torch.manual_seed(SEED)
model = fit(make_model(), X, y)
pd.DataFrame({"id": test["id"], "label": predict(model, X_test).numpy()}).to_csv("submission.csv", index=False)
print("wrote submission.csv")
