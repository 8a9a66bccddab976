-- pinledger: online
-- Dashboard sessions ended by a logout before their time: every server refuses their
-- cookie until it would have expired anyway (`until_ms`), when the row is forgotten.
-- Not a projection of the log: a session is not a job (decision 0026).
CREATE TABLE ended_sessions (
    -- A digest of the session's cookie, never the cookie itself.
    id        text    NOT NULL PRIMARY KEY,
    until_ms  bigint  NOT NULL
);
