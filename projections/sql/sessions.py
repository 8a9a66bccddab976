"""Dashboard sessions ended before their time (dashboard/auth.py): not a
projection of the log, a note every server of the cluster reads (decision 0026)."""

from __future__ import annotations

from pinledger.projections.sql.base import SqlBase


class SqlEndedSessions(SqlBase):
    def end_session(self, session_id: str, until_ms: int, now: int) -> None:
        with self.dialect.session("ending a dashboard session", transaction=True) as session:
            # The rows of sessions that have expired anyway go at each logout: the
            # table holds at most the sessions ended within the last 8 hours.
            session.execute("forget_ended_sessions", {"now": now})
            session.execute("end_session", {"id": session_id, "until": until_ms})

    def session_ended(self, session_id: str) -> bool:
        return bool(self._all("checking a dashboard session", "session_ended", {"id": session_id}))
