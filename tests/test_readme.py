"""The README's runnable examples, run against the live test server.

A fenced ```bash or ```python block is runnable when an HTML comment (invisible on
GitHub) stands on the line before it:

    <!-- doctest -->                                   run it; it must exit 0
    <!-- doctest expect="REGEX" expect='REGEX' -->     and its output must match each

Blocks run in the README's order, in one working folder, against the test server:
``http://127.0.0.1:8000`` and ``localhost:8000`` become the server's address,
``my-project`` a profile of this run, and ``RAYMEM_URL`` points the CLI there.
"""

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

README = Path(__file__).parent.parent / "README.md"
BLOCK = re.compile(
    r"^<!-- doctest(?P<options>[^>]*?)-->\n```(?P<language>bash|python)\n(?P<code>.*?)^```",
    re.MULTILINE | re.DOTALL,
)
EXPECT = re.compile(r"""expect=(["'])(.*?)\1""")  # either quote, the other inside
README_URL, README_HOST, README_PROFILE = "http://127.0.0.1:8000", "localhost:8000", "my-project"
BLOCK_TIMEOUT_S = 300  # a first call activates a profile and loads models, on a loaded machine
RUN_PROFILE = f"readme-{uuid.uuid4().hex[:8]}"  # one per run: blocks build on each other


class Block:
    def __init__(self, match: re.Match[str]) -> None:
        self.language, self.code = match["language"], match["code"]
        self.expect = [re.compile(found[1]) for found in EXPECT.findall(match["options"])]
        self.line = README.read_text()[: match.start()].count("\n") + 2  # the fence's line

    def __repr__(self) -> str:
        return f"README.md:{self.line}:{self.language}"


def runnable_blocks() -> list[Block]:
    return [Block(match) for match in BLOCK.finditer(README.read_text())]


BLOCKS = runnable_blocks()


def test_the_quick_start_is_marked_runnable():
    assert {block.language for block in BLOCKS} == {"bash", "python"}
    assert all(block.expect for block in BLOCKS)  # each checks what it prints


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("readme")


@pytest.mark.parametrize("block", BLOCKS, ids=repr)
def test_readme_block_runs(block: Block, serve_app: str, workdir: Path) -> None:
    host = serve_app.removeprefix("http://")
    code = (
        block.code.replace(README_URL, serve_app)
        .replace(README_HOST, host)
        .replace(README_PROFILE, RUN_PROFILE)
    )
    command = [sys.executable, "-c", code] if block.language == "python" else ["bash", "-ec", code]
    env = {
        **os.environ,
        "RAYMEM_URL": serve_app,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    out = subprocess.run(
        command, cwd=workdir, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S
    )
    shown = f"{block!r} printed:\n{out.stdout}\n{out.stderr}"
    assert out.returncode == 0, shown
    for pattern in block.expect:
        assert pattern.search(out.stdout), f"{pattern.pattern!r} not found; {shown}"
