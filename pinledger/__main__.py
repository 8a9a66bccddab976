"""`python -m pinledger`: the same as the `pinledger` command."""

from pinledger.cli.launcher import main

if __name__ == "__main__":
    raise SystemExit(main())
