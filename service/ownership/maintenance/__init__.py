"""The owner's maintenance duties, one module each, as River's maintenance services
are (internal/maintenance/job_rescuer.go, job_cleaner.go, ...):

- claim_timeouts.py (River's rescuer): a claim not renewed within the claim timeout
  becomes a TimedOut record;
- garbage_collection.py (River's cleaner): a finished job past its TTL becomes a
  Collected record;
- timeline_retention.py: the timeline's day partitions made ahead of the clock and
  dropped past the history retention, on a thread of its own;
- schedule.py: when the duties of the owner thread run (`Maintenance`).

Claim timeouts and garbage collection decide from the state and act through the log,
on the owner thread, only over partitions that serve (caught up, so their state is
complete). An error of theirs ends the owner's pass, which the owner loop survives
(loop.py); the retention thread survives its own.
"""
