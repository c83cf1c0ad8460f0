"""Starter: a two-layer graph convolutional network (Kipf & Welling 2017) on the movie graph, in plain torch."""

import numpy as np
import pandas as pd
import torch
from sklearn.metrics import roc_auc_score
from torch import nn

SEED = 0
HIDDEN_SIZE = 16
EPOCHS = 100
LEARNING_RATE = 0.01
DROPOUT = 0.5
WEIGHT_DECAY = 0.0005
GENRES = ["Drama", "Comedy", "Action", "Thriller", "Adventure", "Romance", "Crime", "Sci-Fi"]

torch.manual_seed(SEED)
np.random.seed(SEED)
torch.set_num_threads(2)

nodes = pd.read_csv("nodes.csv").sort_values("node")
edges = pd.read_csv("edges.csv")
train_labels = pd.read_csv("train_labels.csv")
test_nodes = pd.read_csv("test_nodes.csv")
n_nodes = len(nodes)

# Node features: standardised numeric columns.
features = nodes[["year", "n_ratings", "mean_rating", "rating_std"]].fillna(0).values.astype(np.float32)
features = (features - features.mean(0)) / features.std(0)
X = torch.tensor(features)

# Normalised adjacency with self loops: D^-1/2 (A + I) D^-1/2, as a sparse tensor.
source = np.concatenate([edges["source"], edges["target"], np.arange(n_nodes)])
target = np.concatenate([edges["target"], edges["source"], np.arange(n_nodes)])
degree = np.bincount(source, minlength=n_nodes).astype(np.float32)
values = 1.0 / np.sqrt(degree[source] * degree[target])
adjacency = torch.sparse_coo_tensor(
    np.vstack([source, target]), values.astype(np.float32), (n_nodes, n_nodes), check_invariants=True
).coalesce()

labels = torch.zeros(n_nodes, len(GENRES))
labels[train_labels["node"].to_numpy(copy=True)] = torch.tensor(
    train_labels[GENRES].to_numpy(dtype=np.float32, copy=True)
)
labelled = train_labels["node"].values.copy()
np.random.shuffle(labelled)
n_valid = len(labelled) // 5
valid_nodes, fit_nodes = labelled[:n_valid], labelled[n_valid:]


class GCN(nn.Module):
    def __init__(self, in_size, hidden_size, out_size):
        super().__init__()
        self.layer1 = nn.Linear(in_size, hidden_size)
        self.layer2 = nn.Linear(hidden_size, out_size)
        self.dropout = nn.Dropout(DROPOUT)

    def forward(self, x):
        h = torch.relu(torch.sparse.mm(adjacency, self.layer1(self.dropout(x))))
        return torch.sparse.mm(adjacency, self.layer2(self.dropout(h)))


def train(train_nodes):
    torch.manual_seed(SEED)
    model = GCN(X.shape[1], HIDDEN_SIZE, len(GENRES))
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE, weight_decay=WEIGHT_DECAY)
    loss_fn = nn.BCEWithLogitsLoss()
    for epoch in range(EPOCHS):
        model.train()
        optimizer.zero_grad()
        loss = loss_fn(model(X)[train_nodes], labels[train_nodes])
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        return torch.sigmoid(model(X)).numpy()


def mean_auc(scores, node_ids):
    truth = labels[node_ids].numpy()
    return np.mean([roc_auc_score(truth[:, j], scores[node_ids, j]) for j in range(len(GENRES))])


scores = train(fit_nodes)
print(f"validation mean ROC AUC: {mean_auc(scores, valid_nodes):.4f}")

scores = train(labelled)
submission = pd.DataFrame(scores[test_nodes["node"].values], columns=GENRES)
submission.insert(0, "node", test_nodes["node"].values)
submission.to_csv("submission.csv", index=False)
print("wrote submission.csv")
