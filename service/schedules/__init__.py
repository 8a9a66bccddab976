"""Periodic jobs (issue 42; decision 0038): the schedules a queue's config lists, the
ticks they name, and which tick is due."""
