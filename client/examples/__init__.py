"""Examples of pinledger's client and worker; run them from the repository root, e.g.
`python -m pinledger.client.examples.enqueue_jobs` then `python -m examples.thumbnail_worker`."""
