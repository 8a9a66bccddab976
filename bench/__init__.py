"""The pinledger benchmark: `python -m bench` (see docs/performance.md)."""
