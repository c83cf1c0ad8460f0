"""Agents for mlab-bench and the SDK they are written with.

This package runs inside the agent sandbox: it must not import Django or anything of the platform.
"""
