"""The in-memory store: the fake of the store port (projections/store.py), held to
the real adapters by the store contract suite (tests/contract). Unit tests of the runtime
run on it; the server never does."""
