"""Starter: a small random forest on a handful of numeric columns."""

import pandas as pd
from sklearn.ensemble import RandomForestRegressor
from sklearn.metrics import mean_absolute_error
from sklearn.model_selection import train_test_split

train = pd.read_csv("train.csv")
test = pd.read_csv("test.csv")
features = ["Lot_Area", "Year_Built", "Gr_Liv_Area", "Full_Bath", "Bedroom_AbvGr", "TotRms_AbvGrd"]
target = "Sale_Price"

X_train, X_valid, y_train, y_valid = train_test_split(train[features], train[target], test_size=0.2, random_state=0)


def make_model():
    return RandomForestRegressor(n_estimators=10, max_depth=5, random_state=0)


model = make_model().fit(X_train, y_train)
print(f"validation MAE: {mean_absolute_error(y_valid, model.predict(X_valid)):.1f}")

model = make_model().fit(train[features], train[target])
pd.DataFrame({"id": test["id"], "Sale_Price": model.predict(test[features])}).to_csv("submission.csv", index=False)
print("wrote submission.csv")
