"""The bottom layer: helpers every app uses (pagination, roles, the shared cache, errors, health, the API schema).
Nothing here imports an app above it."""
