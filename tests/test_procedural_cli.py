"""``raymem procedural …`` commands, run as subprocesses against the live server."""

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

RAYMEM = [sys.executable, "-m", "raymem.cli", "procedural"]
NOW = datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)  # ahead of the actor's timer
COMMANDS = (
    "status",
    "enable",
    "disable",
    "capture",
    "actions",
    "patterns",
    "annotate",
    "suppress",
    "inject",
    "evaluate",
    "metrics",
    "skills",
    "review",
)


def procedural_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RAYMEM, *args], capture_output=True, text=True, timeout=120)


def ok(*args: str) -> str:
    out = procedural_cli(*args)
    assert out.returncode == 0, out.stderr
    return out.stdout


def actions_file(path: Path) -> Path:
    """Six sessions in which update_node fails until create_node ran, as JSON Lines."""
    lines = []
    for number in range(6):
        plan = [("update_node", "failure", "NodeNotFoundError"), ("create_node", "success", None)]
        plan.append(("update_node", "success", None))
        for index, (action_type, outcome, error_code) in enumerate(plan):
            action = {
                "session_id": f"s{number}",
                "action_type": action_type,
                "target_type": "node",
                "target_ids": [f"n{number}"],
                "outcome": outcome,
                "error_code": error_code,
                "intent": "rename a node",
                "at": (NOW + timedelta(minutes=number, seconds=index)).isoformat(),
            }
            lines.append(json.dumps(action))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_capture_evaluate_and_read_back(serve_app, profile_name, tmp_path):
    target = ["--profile", profile_name, "--url", serve_app]
    assert f"procedural memory on for {profile_name}" in ok("enable", *target)
    captured = ok("capture", str(actions_file(tmp_path / "actions.jsonl")), *target)
    assert captured.startswith("actions: 18 stored, 0 duplicates")
    assert "18 actions (18 open)" in ok("status", *target)

    later = (NOW + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S")
    evaluated = ok("evaluate", "--now", later, *target)
    assert evaluated.startswith("6 sequences closed; patterns: 1 promoted")

    listed = json.loads(ok("patterns", "--json", *target))["patterns"]
    [pattern] = listed
    assert "run create_node first" in ok("patterns", *target)
    block = ok(
        "inject", "--type", "update_node", "--target-type", "node", "--target", "n9", *target
    )
    assert block.startswith("Past experience") and "run create_node first" in block

    ok("annotate", pattern["id"], "--note", "The importer creates nodes.", *target)
    assert "note: The importer creates nodes." in ok("patterns", *target)
    ok("suppress", pattern["id"], *target)
    assert "[suppressed]" in ok("patterns", *target)
    nothing = ok("inject", "--type", "update_node", "--target-type", "node", *target)
    assert nothing.strip() == "(nothing to inject)"

    failures = ok("actions", "--outcome", "failure", "--limit", "3", *target).splitlines()
    assert failures[0].startswith("AT") and len(failures) == 4
    assert all("NodeNotFoundError" in line for line in failures[1:])

    assert "task_success_rate" in ok("metrics", *target)
    rows = ok("metrics", "task_success_rate", *target).splitlines()
    assert rows[0].split() == ["AT", "VALUE", "SAMPLES", "BASELINE", "DELTA"]
    assert rows[-1].split()[2:4] == ["1.000", "6"]

    [candidate] = json.loads(ok("skills", "--status", "candidate", "--json", *target))["skills"]
    assert f"{candidate['id']}: active" in ok("review", candidate["id"], *target)
    assert "[active] rename a node" in ok("skills", *target)
    assert f"procedural memory off for {profile_name}" in ok("disable", *target)


def test_errors_are_one_line_and_exit_1(serve_app, profile_name, tmp_path):
    target = ["--profile", profile_name, "--url", serve_app]
    missing = procedural_cli("status", *target)
    assert missing.returncode == 1 and "profile_not_found" in missing.stderr
    broken = tmp_path / "broken.json"
    broken.write_text('{"actions": [{"session_id": "s1", "outcome": "meh"}]}')
    ok("enable", *target)
    refused = procedural_cli("capture", str(broken), *target)
    assert refused.returncode == 1 and "(400 invalid_request)" in refused.stderr
    usage = procedural_cli("annotate", "p1", *target)
    assert usage.returncode == 2 and "--note" in usage.stderr


def test_every_procedural_command_has_help():
    for command in COMMANDS:
        out = procedural_cli(command, "--help")
        assert out.returncode == 0 and "--url" in out.stdout and "--profile" in out.stdout
