"""The transactional copier's runner without a broker: what it reads from the copier's stdout,
its settings' checks, its command line (the copier itself runs in
tests/scenarios/test_transactions_versions.py)."""

from __future__ import annotations

from pathlib import Path

from lab.txn_copier.build import MAIN_CLASS, CopierClasspath
from lab.txn_copier.run import CopierLabSettings, Transactions, copier_command


def test_the_copiers_lines_count_its_transactions_and_say_when_it_runs() -> None:
    said = Transactions()
    assert said.readiness("ready 3") is True
    for line in ("committed 100", "aborted 40", "committed 7", "abortable x", "fenced", ""):
        assert said.readiness(line) is None
    assert said.counts == {"committed": 2, "aborted": 1, "abortable": 1}
    assert said.committed() == 2


def test_settings_are_checked() -> None:
    good = CopierLabSettings("b:9092", Path("lab"), "4.4.0")
    assert good.problems() == []
    bad = CopierLabSettings("b:9092", Path("lab"), "4.4.0", messages=0, abort_percent=101)
    assert bad.problems() == ["abort_percent: 0 to 100", "messages: expected >= 1, got 0"]


def test_the_command_runs_the_class_on_the_versions_jars() -> None:
    classpath = CopierClasspath("3.9.2", Path("/jars"), Path("/classes"))
    command = copier_command(classpath, ["--source", "s"])
    assert command[-3:] == [MAIN_CLASS, "--source", "s"]
    assert command[command.index("-cp") + 1] == "/jars/*:/classes"
