import pandas as pd
from sklearn.model_selection import train_test_split
from sklearn.tree import DecisionTreeRegressor

train = pd.read_csv("train.csv")
test = pd.read_csv("test.csv")
features = [c for c in train.columns if c != "progression"]
X_train, X_valid, y_train, y_valid = train_test_split(train[features], train["progression"], random_state=0)

model = DecisionTreeRegressor(max_depth=2, random_state=0)
model.fit(X_train, y_train)
print(f"validation mae: {(model.predict(X_valid) - y_valid).abs().mean():.2f}")

model.fit(train[features], train["progression"])
pd.DataFrame({"id": test["id"], "progression": model.predict(test[features])}).to_csv("submission.csv", index=False)
