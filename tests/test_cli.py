"""The ``raymem`` command line, run as a real subprocess against real servers."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from conftest import free_port, wait_until

RAYMEM = [sys.executable, "-m", "raymem.cli"]


def run(
    *args: str, env: dict[str, str] | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [*RAYMEM, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )
    if check:
        assert result.returncode == 0, result.stderr
    return result


@pytest.fixture
def conversation(tmp_path: Path) -> Path:
    path = tmp_path / "chat.jsonl"
    turns = [
        {"role": "user", "content": "Use pnpm, not npm. And dark mode by default."},
        {"role": "assistant", "content": "Noted: pnpm and dark mode."},
    ]
    path.write_text("\n".join(json.dumps(t) for t in turns))
    return path


def test_ingest_recall_and_profiles(serve_app, profile_name, conversation):
    url = ["--url", serve_app]
    first = run("ingest", str(conversation), "--profile", profile_name, "--session", "s1", *url)
    assert "messages: 2 stored, 0 duplicates" in first.stdout
    again = run("ingest", str(conversation), "--profile", profile_name, "--session", "s1", *url)
    assert "messages: 0 stored, 2 duplicates" in again.stdout
    recall = run(
        "recall", "Which package manager does the user prefer?", "--profile", profile_name, *url
    )
    assert "pnpm" in recall.stdout.splitlines()[1]
    as_json = json.loads(
        run("recall", "package manager", "-p", profile_name, "--json", *url).stdout
    )
    assert "pnpm" in as_json["memories"][0]["content"]
    listing = run("profiles", *url).stdout
    assert profile_name in listing
    rows = json.loads(run("profiles", "--json", *url).stdout)["profiles"]
    [row] = [r for r in rows if r["name"] == profile_name]
    assert row["messages"] == 2


def test_ingest_accepts_a_json_object_with_messages(serve_app, profile_name, tmp_path):
    path = tmp_path / "chat.json"
    path.write_text(
        json.dumps({"messages": [{"role": "user", "content": "My name is Ada Lovelace."}]})
    )
    out = run("ingest", str(path), "-p", profile_name, "-s", "s1", "--url", serve_app).stdout
    assert "memories: 1 added" in out


def test_errors_exit_nonzero_with_a_message(serve_app, tmp_path):
    missing = run("recall", "anything", "--profile", "not-there", "--url", serve_app, check=False)
    assert missing.returncode == 1 and "does not exist" in missing.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("{this is not json")
    parsed = run("ingest", str(bad), "-p", "x", "-s", "s", "--url", serve_app, check=False)
    assert parsed.returncode == 1 and "neither JSON nor JSON Lines" in parsed.stderr
    down = run("profiles", "--url", f"http://127.0.0.1:{free_port()}", check=False)
    assert down.returncode == 1 and "Cannot reach the server" in down.stderr


def test_every_command_has_help():
    top = run("--help").stdout
    for command in ("serve", "ingest", "recall", "profiles"):
        assert command in top
        assert "Usage:" in run(command, "--help").stdout


def test_serve_keeps_data_across_restarts_and_stops_on_ctrl_c(tmp_path, conversation):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    config = tmp_path / "raymem.toml"
    config.write_text(f'data_dir = "{tmp_path / "data"}"\n[server]\nport = {port}\n')

    def start() -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [*RAYMEM, "--config", str(config), "serve"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        wait_until(lambda: _healthy(url) or process.poll() is not None, timeout=180, interval=0.5)
        assert process.poll() is None, process.stdout.read() if process.stdout else ""
        return process

    def stop(process: subprocess.Popen[str]) -> str:
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=120)
        assert process.returncode == 0, output
        return output

    server = start()
    try:
        run("ingest", str(conversation), "-p", "keep", "-s", "s1", "--url", url)
    finally:
        output = stop(server)
    assert "raymem stopping" in output
    assert (tmp_path / "data" / "default" / "keep" / "profile.db").exists()

    server = start()
    try:
        out = run(
            "recall", "Which package manager does the user prefer?", "-p", "keep", "--url", url
        ).stdout
        assert "pnpm" in out
        again = run("ingest", str(conversation), "-p", "keep", "-s", "s1", "--url", url).stdout
        assert "0 stored, 2 duplicates" in again
    finally:
        stop(server)


def test_serve_refuses_a_public_address_without_keys(tmp_path):
    result = run("serve", "--host", "0.0.0.0", "--data-dir", str(tmp_path), check=False)
    assert result.returncode == 1
    assert "without API keys" in result.stderr


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False
