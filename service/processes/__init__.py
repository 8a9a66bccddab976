"""`pinledger serve --processes N`: a supervisor and N server processes on one host
sharing the Thrift port (docs/decisions/0019-processes.md)."""
