"""Profile hosts on demand drive Ray's autoscaler: a node is added when every host is
full, and removed once its profiles hibernate (``autoscaling_driver.py`` runs it in a
process of its own, since this one may already be connected to the session's Ray)."""

import json
import os
import subprocess
import sys
from pathlib import Path

DRIVER = Path(__file__).with_name("autoscaling_driver.py")


def test_a_full_host_adds_a_node_and_an_idle_one_lets_it_go(tmp_path):
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "HF_HUB_OFFLINE": "1"}
    run = subprocess.run(
        [sys.executable, str(DRIVER), str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-4000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    print(report)
    assert report["nodes_at_start"] == 1 and report["first_hosts"] == 1
    assert report["node_added_after_s"] > 0 and report["hosts"] == 2
    assert report["second_on_new_host"] is True
    assert report["host_stopped_after_s"] >= 0 and report["node_removed_after_s"] > 0
    assert report["answers_after_scale_down"] is True
