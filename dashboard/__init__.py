"""The web dashboard (issue 15): every queue and every job's life in a browser.

Served by `pinledger serve` on the admin HTTP port and by the standalone
`pinledger dashboard`. Server-rendered HTML from the templates beside this package,
reading through the Store read ports and acting through the API core (service/api), so
every action is an event in the ledger with the dashboard user as its actor.

Pure parts, each unit-tested: `paging` (keyset page tokens), `auth` (sessions and CSRF
tokens), `timeline` (a job's history as bars and marks on a time axis), `failures`
(failed jobs grouped by the first line of their last error, in a queue or across
queues), `overview` (the first page's rates, ages, capped counts and totals).
"""
