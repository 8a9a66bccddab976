"""The queue-config file: PinLater's layout parses, mistakes are refused with a message
naming the entry and field, and the watcher applies edits but never a broken one."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import pytest

from pinledger.service.queue_config import (
    QueueConfig,
    QueueConfigError,
    QueueConfigWatcher,
    QueueSettings,
    parse_queue_config,
)


def doc(**queue_config: Any) -> str:
    return json.dumps({"queues": [{"name": "q", "queueConfig": queue_config}]})


def test_pinledger_layout() -> None:
    config = parse_queue_config(
        '{"queues": [{"name": "q", "queueConfig": {"maxJobsPerSecond": 2.5, "partitions": 4,'
        ' "drainPartitions": [0, 2]}}, {"name": "paused", "queueConfig": {"maxJobsPerSecond": 0}},'
        ' {"name": "plain", "queueConfig": {}}]}'
    )
    assert config.settings("q") == QueueSettings(2.5, 4, frozenset({0, 2}))
    assert config.settings("unlisted") == QueueSettings()
    assert config.rates() == {"q": 2.5, "paused": 0.0}


def test_empty_config() -> None:
    assert parse_queue_config("{}") == QueueConfig()
    assert parse_queue_config(b'{"queues": []}').rates() == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "not valid JSON"),
        ("[]", "must be a JSON object"),
        ('{"queue": []}', "unknown key 'queue'"),
        ('{"queues": {}}', '"queues" must be a list'),
        ('{"queues": [1]}', r"queues\[0\] must be an object"),
        ('{"queues": [{"queueConfig": {}}]}', r"queues\[0\].name must be a non-empty string"),
        ('{"queues": [{"name": "q", "config": {}}]}', "unknown key 'config'"),
        ('{"queues": [{"name": "q"}, {"name": "q"}]}', r"queues\[1\] \('q'\).*listed twice"),
        ('{"queues": [], "queues": []}', "'queues' appears twice"),
        (doc(maxJobsPerSecnd=1), r"queues\[0\] \('q'\): unknown key 'maxJobsPerSecnd'"),
        (doc(maxJobsPerSecond=-1), "maxJobsPerSecond must be a number >= 0"),
        (doc(maxJobsPerSecond=True), "maxJobsPerSecond must be a number"),
        (doc(maxJobsPerSecond="5"), "maxJobsPerSecond must be a number"),
        ('{"queues": [{"name": "q", "queueConfig": {"maxJobsPerSecond": Infinity}}]}', "number"),
        (doc(partitions=0), "partitions must be an integer >= 1"),
        (doc(partitions=2.0), "partitions must be an integer"),
        (doc(partitions=True), "partitions must be an integer"),
        (doc(drainPartitions=[-1]), "drainPartitions must be a list of partition numbers >= 0"),
        (doc(drainPartitions=[False]), "drainPartitions must be a list"),
        (doc(drainPartitions=3), "drainPartitions must be a list"),
    ],
)
def test_mistakes_are_refused_with_a_message_naming_them(text: str, message: str) -> None:
    with pytest.raises(QueueConfigError, match=message):
        parse_queue_config(text)


class Recorder:
    def __init__(self) -> None:
        self.applied: list[QueueConfig] = []

    def __call__(self, config: QueueConfig) -> None:
        self.applied.append(config)


def write(path: Path, text: str) -> None:
    """Write and move the mtime on, as an editor would a little later: coarse filesystem
    timestamps must not hide an edit in a fast test."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text)
    os.utime(path, ns=(before + 10**9, before + 10**9))


def test_reload_picks_up_an_edit(tmp_path: Path) -> None:
    path = tmp_path / "queues.json"
    write(path, doc(maxJobsPerSecond=1))
    seen = Recorder()
    watcher = QueueConfigWatcher(path, seen)
    assert seen.applied == [watcher.current]
    assert watcher.current.rates() == {"q": 1.0}
    assert not watcher.check()  # unchanged
    write(path, doc(maxJobsPerSecond=0))
    assert watcher.check()
    assert watcher.current.rates() == {"q": 0.0}
    assert seen.applied[-1] is watcher.current
    write(path, doc(maxJobsPerSecond=0) + "\n")  # same config, different bytes
    assert not watcher.check()
    assert len(seen.applied) == 2


def mounted_configmap(folder: Path, text: str, version: int, mtime_ns: int) -> Path:
    """Lay out or update `folder` as the kubelet mounts a ConfigMap as a directory:
    the file is a link to ..data/queues.json, ..data a link to a folder of this version,
    swapped by renaming a new link over it; the old version's folder is removed."""
    folder.mkdir(exist_ok=True)
    version_dir = folder / f"..2026_11_27_10_00_0{version}.{version}"
    version_dir.mkdir()
    (version_dir / "queues.json").write_text(text)
    os.utime(version_dir / "queues.json", ns=(mtime_ns, mtime_ns))
    data = folder / "..data"
    old = os.readlink(data) if data.is_symlink() else None
    (folder / "..data_tmp").symlink_to(version_dir.name)
    os.replace(folder / "..data_tmp", data)
    if old is not None:
        (folder / old / "queues.json").unlink()
        (folder / old).rmdir()
    link = folder / "queues.json"
    if not link.is_symlink():
        link.symlink_to("..data/queues.json")
    return link


def test_a_configmap_update_is_picked_up(tmp_path: Path) -> None:
    """Mounted as a directory (not with subPath, which never updates), a ConfigMap is
    updated by swapping a link to a new folder. The edit here keeps the file's size,
    and its mtime is the old one's (a tool that copies files with their times, or two
    edits within one tick of a coarse clock): the new file is told apart all the same."""
    mtime = 1_700_000_000 * 10**9
    path = mounted_configmap(tmp_path / "queues", doc(maxJobsPerSecond=50), 1, mtime)
    seen = Recorder()
    watcher = QueueConfigWatcher(path, seen)
    assert watcher.current.rates() == {"q": 50.0}
    mounted_configmap(tmp_path / "queues", doc(maxJobsPerSecond=60), 2, mtime)
    assert watcher.check()
    assert watcher.current.rates() == {"q": 60.0}
    assert seen.applied[-1] is watcher.current


def test_broken_edit_keeps_the_old_config(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "queues.json"
    write(path, doc(maxJobsPerSecond=1))
    seen = Recorder()
    watcher = QueueConfigWatcher(path, seen)
    write(path, doc(maxJobsPerSecond=-5))
    with caplog.at_level(logging.WARNING):
        assert not watcher.check()
        assert not watcher.check()  # an unchanged broken file is reported once
    assert watcher.current.rates() == {"q": 1.0}
    # Only this module's records: other libraries' threads may log meanwhile.
    (record,) = [r for r in caplog.records if r.name == "pinledger.service.queue_config"]
    assert "maxJobsPerSecond" in record.getMessage()
    assert "previous config stays in force" in record.getMessage()
    write(path, doc(maxJobsPerSecond=3))  # fixed
    assert watcher.check()
    assert watcher.current.rates() == {"q": 3.0}


def test_deleted_file_keeps_the_old_config(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "queues.json"
    write(path, doc(maxJobsPerSecond=1))
    watcher = QueueConfigWatcher(path, Recorder())
    path.unlink()
    with caplog.at_level(logging.WARNING):
        assert not watcher.check()
    assert "previous config stays in force" in caplog.text
    assert watcher.current.rates() == {"q": 1.0}


def test_broken_or_missing_file_at_startup_refuses_to_start(tmp_path: Path) -> None:
    path = tmp_path / "queues.json"
    with pytest.raises(QueueConfigError, match="cannot read"):
        QueueConfigWatcher(path, Recorder())
    write(path, "{")
    with pytest.raises(QueueConfigError, match="not valid JSON"):
        QueueConfigWatcher(path, Recorder())


def test_no_path_means_empty_config() -> None:
    seen = Recorder()
    watcher = QueueConfigWatcher(None, seen)
    watcher.start()
    assert not watcher.check()
    watcher.stop()
    assert seen.applied == [QueueConfig()]


def test_background_thread_applies_edits(tmp_path: Path) -> None:
    path = tmp_path / "queues.json"
    write(path, doc(maxJobsPerSecond=1))
    seen = Recorder()
    watcher = QueueConfigWatcher(path, seen, interval_s=0.01)
    watcher.start()
    try:
        write(path, doc(maxJobsPerSecond=7))
        for _ in range(500):
            if watcher.current.rates() == {"q": 7.0}:
                break
            time.sleep(0.01)
        assert watcher.current.rates() == {"q": 7.0}
    finally:
        watcher.stop()
