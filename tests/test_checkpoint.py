"""The write-ahead log is folded into profile.db on hibernation and on a clean stop, so
copying profile.db alone copies every acknowledged write."""

import shutil
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from conftest import free_port, wait_until
from test_actors import live_actor_id

from raymem.actors.calls import ProfileCalls, run_blocking
from raymem.actors.layout import PROFILE_FILE
from raymem.actors.registry import ProfileRouter
from raymem.store.connection import open_sync

STOP_TIMEOUT_S = 120  # Serve and Ray shut down, then the files are checkpointed
START_TIMEOUT_S = 300  # a fresh Ray and the embedding model, on a loaded machine


def write_some(base: str) -> tuple[set[str], set[str]]:
    """Acknowledged writes through HTTP: two memories and one turn."""
    memories = {"The boiler is serviced every March.", "The spare key is under the blue pot."}
    for content in memories:
        httpx.post(f"{base}/memories", json={"content": content}, timeout=120).raise_for_status()
    turn = "Remind me about the boiler in February."
    httpx.post(
        f"{base}/sessions/s1/messages", json={"role": "user", "content": turn}, timeout=120
    ).raise_for_status()
    return memories, {turn}


def contents_of_a_copy(db: Path, folder: Path) -> tuple[set[str], set[str]]:
    """Copy ``db`` alone (no -wal, no -shm) and read what the copy holds."""
    folder.mkdir()
    copy = folder / PROFILE_FILE
    shutil.copyfile(db, copy)
    conn = open_sync(copy, read_only=False)
    try:
        memories = {row[0] for row in conn.execute("SELECT content FROM memories")}
        turns = {row[0] for row in conn.execute("SELECT content FROM messages")}
    finally:
        conn.close()
    return memories, turns


def test_a_hibernated_profiles_db_file_alone_holds_every_write(
    serve_app, server_settings, profile_name, tmp_path
):
    written = write_some(f"{serve_app}/v1/profiles/{profile_name}")
    run_blocking(ProfileCalls(ProfileRouter(server_settings), "default", profile_name).hibernate())
    wait_until(lambda: live_actor_id(server_settings, profile_name) is None, timeout=60)
    db = Path(server_settings.data_dir) / "default" / profile_name / PROFILE_FILE
    wal = db.with_name(PROFILE_FILE + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0
    assert contents_of_a_copy(db, tmp_path / "copy") == written


@pytest.fixture
def served_alone(tmp_path):
    """``raymem serve`` in its own process (its own Ray), stopped by the test."""
    port = free_port()
    data_dir = tmp_path / "data"
    command = [sys.executable, "-m", "raymem.cli", "serve", "--port", str(port)]
    process = subprocess.Popen(
        [*command, "--data-dir", str(data_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    yield process, f"http://127.0.0.1:{port}", data_dir
    if process.poll() is None:
        process.kill()
        process.wait()


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_after_a_clean_stop_profile_db_alone_holds_every_write(served_alone, tmp_path):
    process, url, data_dir = served_alone
    wait_until(lambda: process.poll() is not None or _healthy(url), timeout=START_TIMEOUT_S)
    assert process.poll() is None, process.stdout.read() if process.stdout else ""
    written = write_some(f"{url}/v1/profiles/kept")
    process.send_signal(signal.SIGINT)  # Ctrl-C
    output, _ = process.communicate(timeout=STOP_TIMEOUT_S)
    assert process.returncode == 0, output
    assert "raymem stopped" in output
    db = data_dir / "default" / "kept" / PROFILE_FILE
    assert not db.with_name(PROFILE_FILE + "-wal").exists()
    assert contents_of_a_copy(db, tmp_path / "copy") == written
