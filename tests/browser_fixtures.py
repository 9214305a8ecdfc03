"""A real headless Chromium for the browser tests: Debian's ``chromium`` driven by Playwright.

One browser for the test session (never a downloaded one). Every request that would
leave the server is aborted and recorded, as if the machine were offline. A
screenshot of each page goes to ``tests/artifacts/`` (gitignored).
"""

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, Route, sync_playwright

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).parent / "artifacts"
TIMEOUT_S = 120  # generous: the box running the suite may be loaded many times over


# One browser per test module, not per session: Playwright's sync API keeps an event
# loop running in the test thread while it is open, which the asyncio tests of later
# modules cannot share.
@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail("Debian's chromium is needed: apt-get install -y chromium (see .ci/run)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        yield browser
        browser.close()


class Tab:
    """One browser tab, offline but for the server, recording console errors and escapes."""

    def __init__(self, browser: Browser, server: str, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys = capsys
        self.context = browser.new_context(viewport={"width": 1280, "height": 800})
        self.context.set_default_timeout(TIMEOUT_S * 1000)
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.escaped: list[str] = []
        origin = "{0.scheme}://{0.netloc}/".format(urlsplit(server))
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))

        def only_the_server(route: Route) -> None:
            if route.request.url.startswith(origin):
                route.continue_()
            else:
                self.escaped.append(route.request.url)
                route.abort()

        self.context.route("**/*", only_the_server)

    def screenshot(self, name: str) -> None:
        ARTIFACTS.mkdir(exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        with self.capsys.disabled():  # printed even when pytest captures output
            print(f"\nscreenshot: {path}")


@pytest.fixture
def tab(browser, keyed_app, capsys) -> Iterator[Tab]:
    tab = Tab(browser, keyed_app, capsys)
    yield tab
    tab.context.close()


def sign_in(tab: Tab, server: str, key: str) -> None:
    """Open the browser page and give it ``key``, once: the page keeps it for the tab."""
    tab.page.goto(f"{server}/ui")
    tab.page.locator("#token").fill(key)
    tab.page.locator("#token-form button").click()
    tab.page.locator("#profile-list").wait_for()
