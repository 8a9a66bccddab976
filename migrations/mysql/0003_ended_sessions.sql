-- pinledger: online
-- Dashboard sessions ended by a logout before their time, as Postgres's
-- migrations/0008_ended_sessions.sql.
CREATE TABLE IF NOT EXISTS ended_sessions (
    -- A digest of the session's cookie, never the cookie itself.
    id        VARCHAR(64) NOT NULL PRIMARY KEY,
    until_ms  BIGINT      NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
