"""Every migration says how it runs while servers serve, on its first line
(docs/decisions/0024-online-migrations.md): the declaration's parser, the loader's
refusals, what a run plans, and a simple check that no shipped migration declared
online holds a statement Postgres or MariaDB would run under a long lock."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pinledger.projections.migration_plan import (
    Migration,
    MigrationFileError,
    Mode,
    declaration,
    plan,
)
from pinledger.projections.mysql import sql as my_sql
from pinledger.projections.pg import sql as pg_sql
from pinledger.projections.sql.named_queries import split_statements

ALL = frozenset(Mode)

# A pause's reason: one line of text without double quotes.
reasons = st.text(
    st.characters(blacklist_characters='"\n\r', blacklist_categories=("Cs", "Cc")),
    min_size=1,
).filter(lambda text: text.strip() == text)


@given(reason=reasons)
def test_a_pause_gives_back_its_reason(reason: str) -> None:
    text = f'-- pinledger: pause "{reason}"\nDROP TABLE t;\n'
    assert declaration("0009_x.sql", text, ALL) == (Mode.PAUSE, reason)


@pytest.mark.parametrize("mode", [Mode.ONLINE, Mode.CONCURRENTLY])
def test_online_and_concurrently_take_no_reason(mode: Mode) -> None:
    assert declaration("0009_x.sql", f"-- pinledger: {mode.value}\nSELECT 1;\n", ALL) == (
        mode,
        None,
    )


@pytest.mark.parametrize(
    ("first_line", "said"),
    [
        ("-- Adds an index.", "its first line must say how it runs"),
        ("", "its first line must say how it runs"),
        ("CREATE INDEX i ON t (a);", "its first line must say how it runs"),
        ("--pinledger: online", "its first line must say how it runs"),
        ("-- pinledger: offline", "unknown way to run 'offline'"),
        ("-- pinledger: pause", "only a pause, gives its reason"),
        ('-- pinledger: pause ""', "its first line must say how it runs"),
        ('-- pinledger: online "fast"', "only a pause, gives its reason"),
    ],
)
def test_a_missing_or_unknown_declaration_is_refused(first_line: str, said: str) -> None:
    with pytest.raises(MigrationFileError, match=said) as refused:
        declaration("0009_x.sql", f"{first_line}\nCREATE INDEX i ON t (a);\n", ALL)
    assert "0009_x.sql" in str(refused.value)


@given(first=st.text(st.characters(blacklist_characters="\n")))
def test_only_the_three_spellings_parse(first: str) -> None:
    spelled = re.fullmatch(r'-- pinledger: (online|concurrently|pause "[^"]+")\s*', first)
    try:
        declaration("0009_x.sql", first + "\nSELECT 1;\n", ALL)
    except MigrationFileError:
        assert spelled is None
    else:
        assert spelled is not None


def test_mariadb_has_no_concurrently() -> None:
    with pytest.raises(MigrationFileError, match="not a way this database runs migrations"):
        declaration("0003_x.sql", "-- pinledger: concurrently\nSELECT 1;\n", my_sql.MODES)


def _folder(tmp_path: Path, text: str) -> Path:
    (tmp_path / "0001_x.sql").write_text(text, encoding="utf-8")
    return tmp_path


def test_a_concurrent_migration_must_build_its_indexes_so_a_rerun_can_repair_them(
    tmp_path: Path,
) -> None:
    plain = "-- pinledger: concurrently\nCREATE INDEX i ON t (a);\n"
    with pytest.raises(MigrationFileError, match="CONCURRENTLY IF NOT EXISTS"):
        pg_sql.load(_folder(tmp_path, plain))
    no_if = "-- pinledger: concurrently\nCREATE INDEX CONCURRENTLY i ON t (a);\n"
    with pytest.raises(MigrationFileError, match="CONCURRENTLY IF NOT EXISTS"):
        pg_sql.load(_folder(tmp_path, no_if))
    body = "-- pinledger: concurrently\nDO $$ BEGIN PERFORM 1; END $$;\n"
    with pytest.raises(MigrationFileError, match=r"\$\$"):
        pg_sql.load(_folder(tmp_path, body))
    good = (
        "-- pinledger: concurrently\n"
        "CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS i ON t (a);\n"
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS j ON t (b) WHERE b > 0;\n"
    )
    [loaded] = pg_sql.load(_folder(tmp_path, good))
    assert [pg_sql.index_built(s) for s in loaded.statements] == ["i", "j"]


def _migration(version: int, mode: Mode) -> Migration:
    reason = "why" if mode is Mode.PAUSE else None
    return Migration(version, f"{version:04d}_m.sql", mode, reason, "", ())


def test_a_new_schema_needs_no_pause_and_a_schema_in_use_does() -> None:
    shipped = [_migration(1, Mode.ONLINE), _migration(2, Mode.PAUSE), _migration(3, Mode.ONLINE)]
    new = plan("s", shipped, applied=set())
    assert [m.version for m in new.pending] == [1, 2, 3]
    assert new.needs_pause() == ()
    in_use = plan("s", shipped, applied={1})
    assert [m.version for m in in_use.needs_pause()] == [2]
    assert plan("s", shipped, applied={1, 2}).needs_pause() == ()
    assert [m.version for m in plan("s", shipped, applied={1}, upto=1).pending] == []


# --- every shipped migration declares a way to run, and the online ones are online ---

# Statements Postgres runs under a lock that stops writes for as long as the work takes
# (a table rewrite, a scan, an index build): never in a migration declared online.
_PG_TABLE_MADE = re.compile(r"^CREATE TABLE (?:IF NOT EXISTS )?(\w+)", re.IGNORECASE)
_PG_PLAIN_INDEX = re.compile(
    r"^CREATE (?:UNIQUE )?INDEX (?!CONCURRENTLY)(?:IF NOT EXISTS )?\w+ ON (?:ONLY )?(\w+)",
    re.IGNORECASE,
)
_PG_LONG_LOCKS = {
    "an ADD COLUMN with a volatile default (rewrites the table)": re.compile(
        r"ADD COLUMN[^,;]*(?:DEFAULT[^,;]*\b(?:random|clock_timestamp|gen_random_uuid|"
        r"uuid_generate_v\d|nextval|timeofday)\s*\(|\b(?:small|big)?serial\b)",
        re.IGNORECASE,
    ),
    "SET NOT NULL (scans the table)": re.compile(r"\bSET NOT NULL\b", re.IGNORECASE),
    "ALTER COLUMN ... TYPE (rewrites the table)": re.compile(
        r"\bALTER (?:COLUMN )?\w+ (?:SET DATA )?TYPE\b", re.IGNORECASE
    ),
}


def pg_long_locks(statements: tuple[str, ...] | list[str]) -> list[str]:
    """What in these statements would hold a long lock on a table in use."""
    made = {m[1].lower() for s in statements if (m := _PG_TABLE_MADE.match(s))}
    found = []
    for statement in statements:
        index = _PG_PLAIN_INDEX.match(statement)
        if index and index[1].lower() not in made:
            found.append(f"a plain CREATE INDEX on {index[1]}: {statement}")
        found.extend(
            f"{what}: {statement}"
            for what, pattern in _PG_LONG_LOCKS.items()
            if pattern.search(statement)
        )
    return found


@pytest.mark.parametrize(
    "statement",
    [
        "CREATE INDEX jobs_ready ON jobs (queue, partition) WHERE state = 0",
        "CREATE UNIQUE INDEX IF NOT EXISTS u ON jobs (queue)",
        "ALTER TABLE jobs ADD COLUMN token uuid DEFAULT gen_random_uuid()",
        "ALTER TABLE jobs ADD COLUMN seq bigserial",
        "ALTER TABLE jobs ALTER COLUMN custom_status SET NOT NULL",
        "ALTER TABLE jobs ALTER COLUMN priority TYPE integer",
        "ALTER TABLE jobs ALTER COLUMN priority SET DATA TYPE integer",
    ],
)
def test_the_check_finds_each_long_lock(statement: str) -> None:
    assert pg_long_locks([statement])


@pytest.mark.parametrize(
    "statements",
    [
        ["CREATE TABLE t (a int)", "CREATE INDEX t_a ON t (a)"],
        ["CREATE INDEX CONCURRENTLY IF NOT EXISTS i ON jobs (queue)"],
        ["ALTER TABLE jobs ADD COLUMN note text"],
        ["ALTER TABLE jobs ADD COLUMN seen bigint NOT NULL DEFAULT 0"],
    ],
)
def test_the_check_lets_brief_locks_pass(statements: list[str]) -> None:
    assert pg_long_locks(statements) == []


def test_every_shipped_migration_declares_how_it_runs() -> None:
    # Loading refuses a file without a declaration: both loads succeeding is the check.
    pg, my = pg_sql.migrations(), my_sql.migrations()
    assert [m.version for m in pg] == list(range(1, len(pg) + 1))
    assert [m.version for m in my] == list(range(1, len(my) + 1))
    for migration in pg + my:
        assert migration.text.startswith("-- pinledger: ")
        assert (migration.reason is not None) == (migration.mode is Mode.PAUSE)


def test_no_postgres_migration_declared_online_holds_a_long_lock() -> None:
    for migration in pg_sql.migrations():
        if migration.mode is Mode.ONLINE:
            assert pg_long_locks(migration.statements) == [], migration.name


def test_the_ready_window_indexes_are_built_concurrently() -> None:
    """The issue's case: 0005 used to stop every write to jobs for the whole build."""
    ready = next(m for m in pg_sql.migrations() if m.name == "0005_ready_window.sql")
    assert ready.mode is Mode.CONCURRENTLY
    assert [pg_sql.index_built(s) for s in ready.statements] == ["jobs_ready", "jobs_claimed"]


# MariaDB: an online ALTER or CREATE INDEX must say LOCK=NONE (so MariaDB refuses it
# instead of locking when it cannot be done online), and every statement must be safe to
# run again: its DDL commits statement by statement, so a rerun meets the first half.
_MY_ALTERS = re.compile(r"^(?:ALTER TABLE|CREATE (?:UNIQUE )?INDEX)\b", re.IGNORECASE)
_MY_CREATES = re.compile(r"^CREATE (?:TABLE|(?:UNIQUE )?INDEX)\b", re.IGNORECASE)


def test_mariadb_online_migrations_say_lock_none_and_can_run_again() -> None:
    for migration in my_sql.migrations():
        for statement in migration.statements:
            if migration.mode is Mode.ONLINE and _MY_ALTERS.match(statement):
                assert re.search(r"\bLOCK\s*=\s*NONE\b", statement, re.IGNORECASE), statement
            if _MY_CREATES.match(statement):
                assert "IF NOT EXISTS" in statement.upper(), (migration.name, statement)


def test_split_statements_keeps_each_statement_whole() -> None:
    text = (
        "-- pinledger: online\n-- a comment; not a statement\n"
        "CREATE TABLE a (x int);\n\nCREATE TABLE b (\n  y int\n);\n"
    )
    assert split_statements(text) == ["CREATE TABLE a (x int)", "CREATE TABLE b (\n  y int\n)"]
