"""The MySQL/MariaDB store's numbered migrations (*.sql): package data, read through
importlib.resources (projections/mysql/sql.py).
"""
