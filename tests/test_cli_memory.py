"""``raymem memory …`` operator commands, run as subprocesses against the live server."""

import json
import subprocess
import sys

import httpx
import pytest

RAYMEM = [sys.executable, "-m", "raymem.cli", "memory"]


def memory_cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RAYMEM, *args], capture_output=True, text=True, timeout=120, input=stdin
    )


@pytest.fixture
def filled(serve_app, profile_name):
    base = f"{serve_app}/v1/profiles/{profile_name}"
    turns = [
        {"role": "user", "content": "I need to renew my passport by June."},
        {"role": "assistant", "content": "Noted, I will remind you."},
        {"role": "user", "content": "My cat is named Tofu."},
    ]
    httpx.post(
        f"{base}/ingest", json={"session_id": "chat-1", "messages": turns}, timeout=60
    ).raise_for_status()
    other = [{"role": "user", "content": "Use pnpm, not npm."}]
    httpx.post(
        f"{base}/ingest", json={"session_id": "chat-2", "messages": other}, timeout=60
    ).raise_for_status()
    return profile_name


def test_ls_lists_profiles_and_sessions(serve_app, filled):
    out = memory_cli("ls", "--url", serve_app)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("PROFILE") and filled in out.stdout
    sessions = memory_cli("ls", "--profile", filled, "--url", serve_app, "--json")
    listed = {s["id"]: s["message_count"] for s in json.loads(sessions.stdout)["sessions"]}
    assert listed == {"chat-1": 3, "chat-2": 1}
    table = memory_cli("ls", "-p", filled, "--url", serve_app).stdout
    assert "SESSION" in table.splitlines()[0] and "chat-1" in table


def test_show_prints_the_conversation_and_its_memories(serve_app, filled):
    out = memory_cli("show", "chat-1", "-p", filled, "--url", serve_app)
    assert out.returncode == 0, out.stderr
    assert "user: My cat is named Tofu." in out.stdout
    assert "[fact] My cat is named Tofu." in out.stdout
    assert "pnpm" not in out.stdout  # another session's memory
    data = json.loads(
        memory_cli("show", "chat-1", "-p", filled, "--url", serve_app, "--json").stdout
    )
    assert len(data["messages"]) == 3 and {m["session_id"] for m in data["memories"]} == {"chat-1"}


def test_search_ranks_with_score_method_and_latency(serve_app, filled):
    out = memory_cli("search", "Which package manager?", "-p", filled, "--url", serve_app)
    assert out.returncode == 0, out.stderr
    first = out.stdout.splitlines()[1]
    assert "pnpm" in first and "topic_key" in first
    assert "method hybrid" in out.stdout and " ms;" in out.stdout


def test_end_asks_unless_yes(serve_app, filled):
    declined = memory_cli("end", "chat-2", "-p", filled, "--url", serve_app, stdin="n\n")
    assert declined.returncode == 1 and "Aborted" in declined.stderr
    sessions = httpx.get(f"{serve_app}/v1/profiles/{filled}/sessions", timeout=60).json()[
        "sessions"
    ]
    assert all(s["ended_at"] is None for s in sessions)
    ended = memory_cli("end", "chat-2", "-p", filled, "--url", serve_app, "--yes")
    assert ended.returncode == 0 and "ended chat-2" in ended.stdout
    confirmed = memory_cli("end", "chat-1", "-p", filled, "--url", serve_app, stdin="y\n")
    assert confirmed.returncode == 0


def test_rm_deletes_a_session_then_the_profile(serve_app, filled):
    base = f"{serve_app}/v1/profiles/{filled}/memories"
    derived = httpx.get(base, params={"session_id": "chat-1"}, timeout=60).json()["memories"]
    assert derived
    out = memory_cli("rm", "chat-1", "-p", filled, "--url", serve_app, "--yes", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {
        "session_id": "chat-1",
        "messages_deleted": 3,
        "memories_forgotten": len(derived),
        "memories_erased": len(derived),
    }
    left = httpx.get(f"{serve_app}/v1/profiles/{filled}/memories", timeout=60).json()["memories"]
    assert [m["content"] for m in left] == ["Use pnpm, not npm."]
    missing = memory_cli("rm", "chat-1", "-p", filled, "--url", serve_app, "--yes")
    assert missing.returncode == 1 and "does not exist" in missing.stderr
    usage = memory_cli("rm", "-p", filled, "--url", serve_app)
    assert usage.returncode == 2 and "--all" in usage.stderr
    both = memory_cli("rm", "chat-2", "-p", filled, "--all", "--url", serve_app, "--yes")
    assert both.returncode == 2 and "Name a SESSION or pass --all, not both" in both.stderr
    declined = memory_cli("rm", "-p", filled, "--all", "--url", serve_app, stdin="n\n")
    assert declined.returncode == 1
    assert httpx.get(f"{serve_app}/v1/profiles/{filled}/sessions", timeout=60).status_code == 200
    gone = memory_cli("rm", "-p", filled, "--all", "--url", serve_app, "--yes")
    assert gone.returncode == 0 and f"deleted profile {filled}" in gone.stdout
    assert httpx.get(f"{serve_app}/v1/profiles/{filled}/sessions", timeout=60).status_code == 404


def test_every_memory_command_has_help():
    for command in ("ls", "show", "search", "end", "rm", "erase"):
        out = memory_cli(command, "--help")
        assert out.returncode == 0 and "--url" in out.stdout and "--token" in out.stdout
