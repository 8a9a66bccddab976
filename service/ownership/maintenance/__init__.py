"""Every periodic duty of a server, one module each, as River's maintenance services are
(internal/maintenance/job_rescuer.go, job_cleaner.go, ...), and the one scheduler that
runs them all (River's queue_maintainer.go):

- duty.py: what a duty is to the scheduler (`Duty`: a name, a `Schedule`, `run(now)`,
  and its `Scope`: every server, or the catalog partition's owner alone);
- scheduler.py: the lanes a server's duties run in, each duty's interval, backoff and
  health, one start and one stop (`Scheduler`);
- duties.py: the one builder, which makes a server's duties from the owner's parts and
  lists them in their lanes (a table there says which runs where, and why);

the duties:

- claim_timeouts.py (River's rescuer): a claim not renewed within the claim timeout
  becomes a TimedOut record;
- garbage_collection.py (River's cleaner): a finished job past its TTL becomes a
  Collected record;
- ledger_format.py: the cluster's ledger format, followed from the catalog;
- queue_sizes.py: a queue resized when its `partitions` in the queue config changes;
- retirement.py: the drained partitions of a shrunk queue retired;
- adaptation.py: the partitions of an adaptive queue chosen from what it measures;
- members.py: the owners' group's live members, this server's rate shares and the
  watchdog (watchdog.py) after each listing;
- timeline_retention.py: the timeline's day partitions made ahead of the clock and
  dropped past the history retention;
- queue_gauges.py: each queue's jobs by state for /metrics.

Claim timeouts and garbage collection decide from the state and act through the log,
on the owner thread, only over partitions that serve (caught up, so their state is
complete); an error of theirs ends the owner's pass, which the owner loop survives
(loop.py). Every other duty's error is the scheduler's to log and retry.
"""
