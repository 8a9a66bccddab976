"""The `pinledger` command line: the server's and the operators' commands (`client` and
`worker` are dispatched before this module is imported: cli/launcher.py)."""

from __future__ import annotations

import argparse
import getpass
import importlib.metadata
import logging
import secrets
import sys
from collections.abc import Callable, Sequence

from pinledger.cli import cancel as cancel_cli
from pinledger.cli import config as config_cli
from pinledger.cli import (
    doctor,
    import_pinlater,
    move_partition,
    queue_pause,
    queue_resize,
    skip_record,
    upgrade_format,
)
from pinledger.cli import migrate as migrate_cli
from pinledger.cli import replay as replay_cli
from pinledger.cli import schedules as schedules_cli
from pinledger.cli import shards as shards_cli
from pinledger.cli import trace as trace_cli
from pinledger.cli.demo import run_demo
from pinledger.ledger import codec, formats
from pinledger.ledger.adapters import KafkaClientLog
from pinledger.ledger.codec import CodecError
from pinledger.ledger.log import LogError
from pinledger.ledger.times import parse_ms
from pinledger.projections.factory import check_store, open_store
from pinledger.projections.projector import ProjectionRunner
from pinledger.projections.store import LedgerStore, StoreError, StoreRefusedError
from pinledger.service.assembly import open_configured_store, open_log
from pinledger.service.config import Config, ConfigError
from pinledger.service.listeners import PortInUseError
from pinledger.service.ownership.maintenance.ledger_format import UnreadableFormatError
from pinledger.service.processes.supervisor import die_with_supervisor, run_processes
from pinledger.service.security import tls
from pinledger.service.security.password import hash_password, hash_password_scrypt
from pinledger.service.server import DashboardServer, Server
from pinledger.service.shards.shard_map import load_shard_map

log = logging.getLogger("pinledger")


def _store(config: Config, schema: str | None = None) -> LedgerStore:
    if schema is None:  # the live store: every shard of a shard map
        return open_configured_store(config)
    return open_store(config.store_url, schema)


def cmd_migrate(config: Config, args: argparse.Namespace) -> int:
    if config.store_shards:
        shards = load_shard_map(config.store_shards, config.store_url)
        return migrate_cli.run_shards(shards, config.schema, args.check, args.allow_pause)
    return migrate_cli.migrate_store(config.store_url, config.schema, args.check, args.allow_pause)


def cmd_project(config: Config, args: argparse.Namespace) -> int:
    """Run the projection until interrupted (or, with --once, until caught up)."""
    store = _store(config)
    store.migrate()
    kafka = open_log(config)
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
    return replay_cli.run(config, args)


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
        # The processes would each fail on TLS files that cannot be used: say it once.
        tls.server_context(config)
        return run_processes(config, processes, args.verbose)
    return Server(config, shares_port=args.worker is not None).run_forever()


def cmd_dashboard(config: Config, _: argparse.Namespace) -> int:
    DashboardServer(config).run_forever()
    return 0


def on_log(
    run: Callable[[Config, argparse.Namespace, KafkaClientLog], int],
) -> Callable[[Config, argparse.Namespace], int]:
    """A command that works on the log alone: opened for it, closed after."""

    def command(config: Config, args: argparse.Namespace) -> int:
        log = open_log(config)
        try:
            return run(config, args, log)
        finally:
            log.close()

    return command


def queue_command(config: Config, args: argparse.Namespace, log: KafkaClientLog) -> int:
    if args.queue_command in ("pause", "resume"):
        return queue_pause.run(config, args, log)
    return queue_resize.run(config, args, log)


def cmd_doctor(config: Config, args: argparse.Namespace) -> int:
    # The store's server must take this client: a refusal (TLS, a password) is one line
    # and exit 2, as Kafka's are; a store that is down only gets a line of its own.
    try:
        check_store(config.store_url)
    except StoreRefusedError:
        raise
    except StoreError as exc:
        print(f"pinledger doctor: {exc}", file=sys.stderr)
    return on_log(doctor.run)(config, args)


def cmd_hash_password(_: Config, args: argparse.Namespace) -> int:
    password = getpass.getpass("admin password: ") if args.password is None else args.password
    if args.pinlater:
        salt = args.salt if args.salt is not None else secrets.token_hex(8)
        print(f"PINLEDGER_ADMIN_SALT={salt}")
        print(f"PINLEDGER_ADMIN_PASSWORD_SHA256={hash_password(password, salt)}")
        return 0
    if args.salt is not None:
        raise ConfigError("--salt goes with --pinlater (scrypt makes a random salt of its own)")
    # Quoted: the value holds `$`, which a shell would expand.
    print(f"PINLEDGER_ADMIN_PASSWORD_HASH='{hash_password_scrypt(password)}'")
    return 0


def version_line() -> str:
    """This release and the version of the ledger's records it writes and reads."""
    try:
        release = importlib.metadata.version("pinledger")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout, not installed
        release = "unknown (not installed)"
    reads = ", ".join(str(f) for f in sorted(formats.READS))
    return (
        f"pinledger {release} (ledger records: codec version {codec.VERSION}; "
        f"ledger formats read: {reads})"
    )


class _PrintVersion(argparse.Action):
    """argparse's "version" action wraps the line at the terminal's width; a script
    that reads the version wants it on one line."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(version_line())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pinledger", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    parser.add_argument(
        "--version",
        action=_PrintVersion,
        nargs=0,
        help="print pinledger's version and the ledger record formats it reads, and exit",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    migrate_cli.add_arguments(
        commands.add_parser(
            "migrate", help="apply the projection schema's migrations (on every shard)"
        )
    )
    commands.add_parser(
        "shards", help="the store's shards and the health of each (exit 1: one is not healthy)"
    )

    project = commands.add_parser("project", help="project the log into the store")
    project.add_argument("--once", action="store_true", help="stop when caught up")
    project.add_argument("--batch", type=int, default=5000, help="records per transaction")

    replay_cli.add_arguments(
        commands.add_parser(
            "replay",
            help="check the live projection against the log (verify in memory, or rebuild "
            "into a scratch schema with --into-schema)",
        ),
        _time_arg,
    )

    commands.add_parser(
        "client", help="PinLater's client tool: queues, jobs, load (`client --help`)"
    )
    commands.add_parser(
        "demo", help="a short tour: a server, a queue, a worker with retries, a trace"
    )
    commands.add_parser(
        "worker",
        help="run a handler for every job of a queue: `worker MODULE:HANDLER --queue Q` "
        "(`worker --help`)",
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

    upgrade_format.add_arguments(
        commands.add_parser(
            "upgrade-format",
            help="raise the ledger format the cluster writes, once every server reads it "
            "(the last step of a rolling upgrade; exit 2: refused)",
        )
    )

    queue_pause.add_arguments(
        queue_resize.add_arguments(
            commands.add_parser(
                "queue",
                help="change a queue: `queue resize Q N` grows it live, `queue pause Q` "
                "and `queue resume Q` hold back and hand out its jobs",
            )
        )
    )

    move_partition.add_arguments(
        commands.add_parser(
            "move-partition",
            help="move a queue partition's projection to another store shard, live "
            "(--from SHARD: drain a shard; exit 2: refused)",
        )
    )

    skip_record.add_arguments(
        commands.add_parser(
            "skip-record",
            help="skip a queue record no store commits or no release decodes, recorded in "
            "the ledger, so that its paused partition resumes (exit 2: refused)",
        )
    )

    config_cli.add_arguments(
        commands.add_parser(
            "config",
            help="the settings in force and where each came from, secrets hidden "
            "(--check: validate them without starting; exit 1: a problem)",
        )
    )

    cancel_cli.add_arguments(
        commands.add_parser(
            "cancel",
            help="cancel PENDING or running jobs: they end FAILED, the canceller in their "
            "status and history (exit 1: some were not cancelled)",
        )
    )

    schedules_cli.add_arguments(
        commands.add_parser(
            "schedules",
            help="the queues' periodic jobs with their last and next tick (exit 1: a "
            "schedule's queue does not exist)",
        )
    )

    hashing = commands.add_parser(
        "hash-password",
        help="print the setting that stores the admin password (deleteQueue, the dashboard)",
    )
    hashing.add_argument("--password", help="the password (default: ask without echo)")
    hashing.add_argument(
        "--pinlater",
        action="store_true",
        help="PinLater's form instead (SHA-256 of password + salt: fast to guess; for a "
        "config PinLater shares)",
    )
    hashing.add_argument("--salt", help="with --pinlater: the salt (default: a random one)")
    return parser


COMMANDS: dict[str, Callable[[Config, argparse.Namespace], int]] = {
    "migrate": cmd_migrate,
    "shards": shards_cli.run,
    "project": cmd_project,
    "replay": cmd_replay,
    "demo": cmd_demo,
    "trace": trace_cli.run,
    "import-pinlater": import_pinlater.run,
    "serve": cmd_serve,
    "dashboard": cmd_dashboard,
    "doctor": cmd_doctor,
    "upgrade-format": on_log(upgrade_format.run),
    "queue": on_log(queue_command),
    "move-partition": on_log(move_partition.run),
    "skip-record": on_log(skip_record.run),
    "hash-password": cmd_hash_password,
    "cancel": cancel_cli.run,
    "schedules": schedules_cli.run,
}


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.command == "config":
        # It shows settings that cannot be used too, and tells every problem, where
        # the other commands stop at the first.
        return config_cli.run(args)
    try:
        config = Config.from_env()
    except ConfigError as exc:
        print(f"pinledger: {exc}", file=sys.stderr)
        return 2
    try:
        return COMMANDS[args.command](config, args)
    except (
        LogError,
        StoreError,
        CodecError,
        ValueError,
        PortInUseError,
        UnreadableFormatError,
    ) as exc:
        print(f"pinledger {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
