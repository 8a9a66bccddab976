"""pinledger: a drop-in PinLater job service built as an event-sourced job ledger.

The rooms live in the repository's top-level folders (ledger/, projections/,
service/, client/, thrift/, migrations/); this namespace package maps them under one
import name (docs/decisions/0009-package-layout.md).
"""
