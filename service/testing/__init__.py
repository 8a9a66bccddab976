"""The one testing place: in-memory fakes of the ports, a fake clock, and the fixtures
that start real servers. Tests and the benchmark import it; the server never does."""
