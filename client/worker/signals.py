"""SIGTERM and SIGINT for a worker run from the main thread: the first signal stops the
dequeuing and gives running jobs the grace period; a second one releases them at once.
The previous handlers come back when the worker's run ends.

A signal handler runs on the main thread between two bytecodes, possibly while that
thread holds one of the worker's locks: the callbacks given here must not block on a
lock (Worker.stop only tries its lock, which is reentrant besides).
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from types import FrameType

log = logging.getLogger("pinledger.worker")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def install_stop_signals(
    name: str,
    grace_s: float,
    *,
    stopping: threading.Event,
    stop: Callable[[], None],
    stop_now: Callable[[], None],
) -> Callable[[], None]:
    """Route SIGTERM and SIGINT to `stop` (or `stop_now` when `stopping` is already
    set); returns the function that puts the previous handlers back. Off the main
    thread (where Python cannot install handlers) nothing is installed."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        signame = signal.Signals(signum).name
        if stopping.is_set():
            log.warning("%s: %s again: releasing running jobs now", name, signame)
            stop_now()
            return
        log.warning(
            "%s: %s: stopping; running jobs get %g s to finish, then go back to the "
            "queue (send %s again to release them now)",
            name,
            signame,
            grace_s,
            signame,
        )
        stop()

    for sig in previous:
        signal.signal(sig, on_signal)

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    return restore


__all__ = ["STOP_SIGNALS", "install_stop_signals"]
