"""The Postgres store's numbered migrations (*.sql) and, in mysql/, the MySQL store's:
package data, read through importlib.resources (projections/pg/sql.py,
projections/mysql/sql.py). Not an import name of its own: always `pinledger.migrations`.
"""
