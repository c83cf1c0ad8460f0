"""Generate CLRS-style Bellman-Ford data: random weighted graphs and their shortest-path predecessor pointers.

As in the CLRS benchmark (Velickovic et al. 2022), the model is trained on small graphs (16 nodes) and tested on
larger ones (32 nodes). Graphs are Erdos-Renyi with an edge probability drawn per graph, undirected, with weights
uniform in (0, 1); a random spanning tree is added so that every node is reachable. The target for each node is its
predecessor on the shortest path from the source node (the source points to itself).
"""

import os

import numpy as np
from scipy.sparse.csgraph import dijkstra

HERE = os.path.dirname(os.path.abspath(__file__))
ENV = os.path.join(HERE, "..", "env")


def random_graph(rng, n_nodes):
    p = rng.uniform(0.15, 0.4)
    upper = np.triu(rng.random((n_nodes, n_nodes)) < p, k=1)
    order = rng.permutation(n_nodes)  # random spanning tree: attach each node to an earlier one
    for k in range(1, n_nodes):
        i, j = order[k], order[rng.integers(0, k)]
        upper[min(i, j), max(i, j)] = True
    adjacency = upper | upper.T
    weights = np.triu(rng.uniform(0.05, 1.0, (n_nodes, n_nodes)), k=1)
    weights = (weights + weights.T) * adjacency
    source = int(rng.integers(0, n_nodes))
    _, predecessors = dijkstra(weights, directed=False, indices=source, return_predecessors=True)
    predecessors[source] = source
    return weights.astype(np.float32), source, predecessors.astype(np.int64)


def make_split(rng, n_graphs, n_nodes):
    graphs = [random_graph(rng, n_nodes) for _ in range(n_graphs)]
    weights = np.stack([g[0] for g in graphs])
    sources = np.array([g[1] for g in graphs])
    pointers = np.stack([g[2] for g in graphs])
    return weights, sources, pointers


# The platform's secret seed (BENCH_TASK_SEED): a public one would let anyone generate the test graphs again.
rng = np.random.default_rng(int(os.environ.get("BENCH_TASK_SEED", "0")))
train_weights, train_sources, train_pointers = make_split(rng, 2000, 16)
test_weights, test_sources, test_pointers = make_split(rng, 300, 32)

np.savez_compressed(os.path.join(ENV, "train.npz"), weights=train_weights, source=train_sources, pointer=train_pointers)
np.savez_compressed(os.path.join(ENV, "test.npz"), weights=test_weights, source=test_sources)
np.savez_compressed(os.path.join(HERE, "answer.npz"), pointer=test_pointers)
print(f"wrote {len(train_weights)} training graphs of 16 nodes and {len(test_weights)} test graphs of 32 nodes")
