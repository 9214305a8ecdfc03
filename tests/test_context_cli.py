"""``raymem context …`` commands, run as subprocesses against the live server."""

import json
import subprocess
import sys

RAYMEM = [sys.executable, "-m", "raymem.cli", "context"]


def context_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RAYMEM, *args], capture_output=True, text=True, timeout=120)


def test_blocks_work_items_context_and_refs_from_the_command_line(
    serve_app, profile_name, tmp_path
):
    target = ["-p", profile_name, "--url", serve_app]
    added = context_cli("add", "user", "Prefers metric units.", *target)
    assert added.returncode == 0, added.stderr
    assert "Prefers metric units." in added.stdout
    again = context_cli("add", "user", "prefers METRIC units.", *target)
    assert "already there" in again.stdout
    listing = json.loads(context_cli("blocks", *target, "--json").stdout)
    [user] = [block for block in listing["blocks"] if block["name"] == "user"]
    assert user["entries"] == ["Prefers metric units."]

    assert context_cli("set-limit", "tiny", "10", *target).returncode == 0
    full = context_cli("add", "tiny", "far more than ten characters", *target)
    assert full.returncode == 1 and "block_full" in full.stderr

    opened = context_cli("open", "Plan the garden", "--todo", "Buy seeds", *target)
    assert opened.returncode == 0, opened.stderr
    item_id = opened.stdout.split()[0]
    assert "[ ] Buy seeds" in opened.stdout
    shown = context_cli("show", "units", "--budget", "300", *target)
    assert shown.returncode == 0, shown.stderr
    assert "Prefers metric units." in shown.stdout and "Plan the garden" in shown.stdout
    assert "/300 characters" in shown.stderr
    assert len(shown.stdout.rstrip("\n")) <= 300

    closed = json.loads(
        context_cli("close", item_id, "--outcome", "Seeds sown.", *target, "--json").stdout
    )
    ref = closed["episode"]["source_ref"]
    assert ref in context_cli("episodes", *target).stdout
    resolved = json.loads(context_cli("ref", ref, *target).stdout)
    assert resolved["kind"] == "episode" and resolved["episode"]["work_item_id"] == item_id
    bad = context_cli("ref", "not-a-ref", *target)
    assert bad.returncode == 1 and "invalid_ref" in bad.stderr

    turns = tmp_path / "turns.json"
    turns.write_text(json.dumps([{"role": "user", "content": "My bike is a green Brompton."}]))
    flushed = context_cli("flush", str(turns), "-s", "f1", *target)
    assert flushed.returncode == 0, flushed.stderr
    assert "1 stored" in flushed.stdout


def test_every_context_command_has_help():
    commands = ["show", "blocks", "set-limit", "add", "replace", "remove", "open", "close"]
    for command in [*commands, "work", "episodes", "ref", "flush"]:
        result = context_cli(command, "--help")
        assert result.returncode == 0 and "Usage:" in result.stdout, command
