"""Stands for MLAgentBench's LLM.py, which reads API keys and builds provider clients: the adapter must never import
it (it gives the agent the platform's gateway under this module's name instead)."""

raise RuntimeError("the package's own LLM.py was imported")
