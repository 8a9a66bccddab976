"""The `pinledger` command line."""

from __future__ import annotations

import argparse
import getpass
import logging
import secrets
import sys
import time
import uuid
from collections.abc import Callable, Sequence

from pinledger.ledger.codec import CodecError
from pinledger.ledger.kafka import KafkaLog, KafkaSettings
from pinledger.ledger.log import LogError
from pinledger.ledger.times import parse_ms
from pinledger.projections.factory import open_store
from pinledger.projections.projector import Bound, ProjectionRunner, Scope
from pinledger.projections.replay import ReplayReport, replay
from pinledger.projections.store import LedgerStore, StoreError
from pinledger.service.cli import asof as asof_cli
from pinledger.service.cli import doctor, import_pinlater
from pinledger.service.cli import trace as trace_cli
from pinledger.service.cli.demo import run_demo
from pinledger.service.cli.tool import main as client_main
from pinledger.service.config import Config, ConfigError
from pinledger.service.password import hash_password
from pinledger.service.processes.supervisor import die_with_supervisor, run_processes
from pinledger.service.server import DashboardServer, Server

log = logging.getLogger("pinledger")


def _store(config: Config, schema: str | None = None) -> LedgerStore:
    return open_store(config.store_url, schema or config.schema)


def _log(config: Config) -> KafkaLog:
    return KafkaLog(
        KafkaSettings(
            bootstrap=config.kafka,
            client_id=config.server_id,
            topics=config.topic_policy(),
            append_timeout_ms=round(config.append_timeout_s * 1000),
        )
    )


def cmd_migrate(config: Config, _: argparse.Namespace) -> int:
    store = _store(config)
    try:
        applied = store.migrate()
    finally:
        store.close()
    print(
        f"schema {config.schema}: " + (f"applied {', '.join(applied)}" if applied else "up to date")
    )
    return 0


def cmd_project(config: Config, args: argparse.Namespace) -> int:
    """Run the projection until interrupted (or, with --once, until caught up)."""
    store = _store(config)
    store.migrate()
    kafka = _log(config)
    runner = ProjectionRunner(store, kafka, config.topic_prefix, max_records=args.batch)
    try:
        if args.once:
            events = runner.catch_up()
            print(f"projected {events} events; caught up")
            return 0
        print(
            f"projecting {config.topic_prefix}* into schema {config.schema}; Ctrl-C stops",
            flush=True,
        )
        while True:
            runner.step(timeout_ms=500)
    except KeyboardInterrupt:
        return 0
    finally:
        runner.close()
        kafka.close()
        store.close()


def _progress_printer() -> Callable[[int, int], None]:
    started = time.monotonic()
    last = [0.0]

    def show(done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] < 1.0:
            return
        last[0] = now
        rate = done / max(now - started, 1e-9)
        print(f"  replayed {done:,} of ~{total:,} events ({rate:,.0f}/s)", flush=True)

    return show


def _print_report(report: ReplayReport, scratch: LedgerStore) -> None:
    rate = report.events / max(report.seconds, 1e-9)
    print(
        f"replayed {report.events:,} events in {report.seconds:.2f}s ({rate:,.0f} events/s) "
        f"into schema {scratch.schema}"
    )
    if not report.compared:
        print("bounded replay (--until-offset/--until-time): state at that point:")
        for queue, state, priority, count in scratch.job_counts():
            print(f"  {queue:<24} {state.name:<12} p{priority}  {count:>8,}")
        return
    if report.identical:
        print("identical: the replayed projection equals the live tables")
        return
    print("DIFFERENT: the replayed projection does not match the live tables")
    for diff in report.diffs:
        if diff.only_live or diff.only_replay:
            print(
                f"  {diff.table}: {diff.only_live} rows only live, "
                f"{diff.only_replay} rows only in the replay"
            )
            for row in diff.live_samples:
                print(f"    live:   {row}")
            for row in diff.replay_samples:
                print(f"    replay: {row}")


def _time_arg(text: str) -> int:
    try:
        return parse_ms(text)
    except ValueError as exc:
        # argparse prints this as a one-line usage error.
        raise argparse.ArgumentTypeError(str(exc)) from None


def _at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def cmd_replay(config: Config, args: argparse.Namespace) -> int:
    if args.as_of is not None or args.explain or args.json:
        return asof_cli.run(config, args)
    bound = Bound(
        offset=args.until_offset,
        at=args.until_time,
    )
    scope = Scope(
        queues=frozenset(args.queue) if args.queue else None, partition=args.partition, bound=bound
    )
    scratch_name = args.scratch or f"replay_{uuid.uuid4().hex[:8]}"
    live = _store(config)
    scratch = _store(config, scratch_name)
    kafka = _log(config)
    try:
        print(
            f"replaying {'all queues' if scope.queues is None else ', '.join(args.queue)}"
            f"{'' if args.partition is None else f' partition {args.partition}'} from "
            f"{config.kafka} into schema {scratch_name}",
            flush=True,
        )
        report = replay(live, scratch, kafka, config.topic_prefix, scope, _progress_printer())
        _print_report(report, scratch)
        return 0 if report.identical else 1
    finally:
        kafka.close()
        live.close()
        if args.keep:
            scratch.close()
            print(f"kept schema {scratch_name}")
        else:
            scratch.drop()


def cmd_demo(config: Config, _: argparse.Namespace) -> int:
    return run_demo(config)


def cmd_serve(config: Config, args: argparse.Namespace) -> int:
    logging.getLogger("pinledger.service").setLevel(logging.INFO)
    # Partition ownership is the owners' consumer group: its joins, assignments and
    # revocations (a few lines per rebalance) are what explains a partition that is
    # served late.
    logging.getLogger("kafka.coordinator").setLevel(logging.INFO)
    processes = config.processes if args.processes is None else args.processes
    if args.worker is not None:
        # One of a supervisor's processes: its log lines say which.
        for handler in logging.getLogger().handlers:
            handler.setFormatter(
                logging.Formatter(
                    f"%(asctime)s %(levelname)s [process {args.worker}] %(name)s: %(message)s"
                )
            )
        die_with_supervisor(args.supervisor)
    elif processes > 1:
        return run_processes(config, processes, args.verbose)
    Server(config).run_forever()
    return 0


def cmd_dashboard(config: Config, _: argparse.Namespace) -> int:
    DashboardServer(config).run_forever()
    return 0


def cmd_doctor(config: Config, args: argparse.Namespace) -> int:
    log = _log(config)
    try:
        return doctor.run(config, args, log)
    finally:
        log.close()


def cmd_hash_password(_: Config, args: argparse.Namespace) -> int:
    salt = args.salt if args.salt is not None else secrets.token_hex(8)
    password = getpass.getpass("admin password: ") if args.password is None else args.password
    print(f"PINLEDGER_ADMIN_SALT={salt}")
    print(f"PINLEDGER_ADMIN_PASSWORD_SHA256={hash_password(password, salt)}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pinledger", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    commands = parser.add_subparsers(dest="command", required=True)

    commands.add_parser("migrate", help="apply the projection schema's migrations")

    project = commands.add_parser("project", help="project the log into the store")
    project.add_argument("--once", action="store_true", help="stop when caught up")
    project.add_argument("--batch", type=int, default=5000, help="records per transaction")

    rep = commands.add_parser(
        "replay", help="rebuild the projection from the log into a scratch schema and diff it"
    )
    rep.add_argument("--queue", action="append", help="only this queue (repeatable)")
    rep.add_argument("--partition", type=int, help="only this partition")
    rep.add_argument("--until-offset", type=int, help="stop before this offset per partition")
    rep.add_argument("--until-time", type=_time_arg, help="stop after this time (ms or ISO-8601)")
    rep.add_argument("--scratch", help="scratch schema name (default: a fresh one)")
    rep.add_argument("--keep", action="store_true", help="keep the scratch schema")
    asof_cli.add_arguments(rep)

    commands.add_parser(
        "client", help="PinLater's client tool: queues, jobs, load (`client --help`)"
    )
    commands.add_parser(
        "demo", help="a short tour: a server, a queue, a worker with retries, a trace"
    )

    trace_cli.add_arguments(
        commands.add_parser("trace", help="a job's history: every step, verdict and attempt")
    )

    import_pinlater.add_arguments(
        commands.add_parser(
            "import-pinlater",
            help="append the jobs of a PinLater MySQL deployment to the ledger (idempotent)",
        )
    )

    serve = commands.add_parser("serve", help="run a PinLater server (Thrift, default port 9010)")
    serve.add_argument(
        "--processes",
        type=_at_least_one,
        help="server processes sharing the port, one per core (default: PINLEDGER_PROCESSES, 1)",
    )
    # Set by the supervisor of --processes for each process it starts.
    serve.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    serve.add_argument("--supervisor", type=int, default=0, help=argparse.SUPPRESS)
    commands.add_parser(
        "dashboard",
        help="the web dashboard alone, on the admin port (PINLEDGER_ADMIN_PORT), for the "
        "cluster on PINLEDGER_KAFKA and PINLEDGER_PG_DSN",
    )

    doctor.add_arguments(
        commands.add_parser(
            "doctor", help="check the Kafka settings that keep the ledger safe (exit 1: unsafe)"
        )
    )

    hashing = commands.add_parser(
        "hash-password", help="print the salt and hash settings for the deleteQueue password"
    )
    hashing.add_argument("--password", help="the password (default: ask without echo)")
    hashing.add_argument("--salt", help="the salt (default: a random one)")
    return parser


COMMANDS: dict[str, Callable[[Config, argparse.Namespace], int]] = {
    "migrate": cmd_migrate,
    "project": cmd_project,
    "replay": cmd_replay,
    "demo": cmd_demo,
    "trace": trace_cli.run,
    "import-pinlater": import_pinlater.run,
    "serve": cmd_serve,
    "dashboard": cmd_dashboard,
    "doctor": cmd_doctor,
    "hash-password": cmd_hash_password,
}


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["client"]:
        # The client tool has PinLater's flags and its own parser; it needs no Config.
        return client_main(argv[1:])
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        config = Config.from_env()
    except ConfigError as exc:
        print(f"pinledger: {exc}", file=sys.stderr)
        return 2
    try:
        return COMMANDS[args.command](config, args)
    except (LogError, StoreError, CodecError, ValueError) as exc:
        print(f"pinledger {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
