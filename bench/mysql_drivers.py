"""The MySQL driver measurement behind docs/decisions/0016-mysql-store.md: mysqlclient
(C, libmariadb) against PyMySQL (pure Python), on the same MariaDB and the same rows.

    python3 -m pip install mysqlclient   # not a dependency: it needs a C compiler,
    python3 -m bench.mysql_drivers [rows] # pkg-config and libmariadb-dev to build

Each driver inserts `rows` job-shaped rows (a 512-byte body) with executemany in
batches of 500 (one multi-row INSERT per batch, as both drivers rewrite it), then
reads them all back by keyset pages of 1000 on the primary key, bodies included. Each
figure is the best of 3 runs, in rows per second.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

CREATE = """CREATE TABLE drv_jobs (
    queue VARCHAR(255) NOT NULL, `partition` INT NOT NULL, local_id BIGINT NOT NULL,
    priority SMALLINT NOT NULL, state SMALLINT NOT NULL, body LONGBLOB NOT NULL,
    custom_status TEXT NOT NULL, run_after BIGINT NOT NULL,
    PRIMARY KEY (queue, `partition`, local_id)) ENGINE=InnoDB"""
INSERT = (
    "INSERT INTO drv_jobs (queue, `partition`, local_id, priority, state, body, "
    "custom_status, run_after) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
)
PAGE = (
    "SELECT local_id, priority, state, body, custom_status, run_after FROM drv_jobs "
    "WHERE queue = %s AND `partition` = %s AND local_id > %s ORDER BY local_id LIMIT 1000"
)


def _connect(module: str, dsn: str, db: str) -> Any:
    url = urlsplit(dsn)
    host, port = url.hostname or "127.0.0.1", url.port or 3306
    user, password = url.username or "", url.password or ""
    if module == "MySQLdb":
        import MySQLdb  # noqa: PLC0415 (each driver only when measured)

        return MySQLdb.connect(
            host=host,
            port=port,
            user=user,
            password=password,
            database=db,
            autocommit=False,
        )
    import pymysql  # noqa: PLC0415

    return pymysql.connect(
        host=host,
        port=port,
        user=user,
        password=password,
        database=db,
        autocommit=False,
    )


def _best(runs: int, work: Callable[[], float]) -> float:
    return min(work() for _ in range(runs))


def measure(module: str, dsn: str, rows: int) -> tuple[float, float]:
    admin = _connect(module, dsn, urlsplit(dsn).path.lstrip("/"))
    cur = admin.cursor()
    cur.execute("DROP DATABASE IF EXISTS drv_bench")
    cur.execute("CREATE DATABASE drv_bench")
    admin.close()
    conn = _connect(module, dsn, "drv_bench")
    cur = conn.cursor()
    body = os.urandom(512)
    data = [("q", 0, i, 1, 0, body, "", 1_700_000_000_000 + i) for i in range(rows)]

    def insert() -> float:
        cur.execute("DROP TABLE IF EXISTS drv_jobs")
        cur.execute(CREATE)
        start = time.perf_counter()
        for i in range(0, rows, 500):
            cur.executemany(INSERT, data[i : i + 500])
        conn.commit()
        return time.perf_counter() - start

    def read() -> float:
        start = time.perf_counter()
        after, seen = -1, 0
        while True:
            cur.execute(PAGE, ("q", 0, after))
            page = cur.fetchall()
            if not page:
                break
            seen += len(page)
            after = page[-1][0]
        conn.commit()
        assert seen == rows
        return time.perf_counter() - start

    wrote = _best(3, insert)
    read_s = _best(3, read)
    cur.execute("DROP DATABASE drv_bench")
    conn.close()
    return rows / wrote, rows / read_s


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    dsn = os.environ.get(
        "PINLEDGER_MYSQL_DSN", "mysql://pinledger:pinledger@127.0.0.1:33069/pinledger"
    )
    for module, name in (("pymysql", "PyMySQL"), ("MySQLdb", "mysqlclient")):
        inserts, reads = measure(module, dsn, rows)
        print(f"{name:12} insert {inserts:10,.0f} rows/s   keyset read {reads:10,.0f} rows/s")


if __name__ == "__main__":
    main()
