"""What tests and the benchmark share beyond the ports' fakes (which sit beside their
ports: ledger/fake_log.py, ledger/fake_clock.py, projections/fake/): the runtime of a
whole server on the fakes, real servers started as processes, and collected spans. The
server never imports it."""
