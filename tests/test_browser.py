"""The memory browser (/ui) and the API docs (/docs, /redoc) in a real headless Chromium.

The browser and its tabs are in ``browser_fixtures``; dreams, review and the write
controls are in ``test_browser_review``.
"""

import re

import httpx
import pytest
from browser_fixtures import TIMEOUT_S
from keyed_app import ALICE

REMOTE_ASSET = re.compile(r"""<(?:script|link)\b[^>]*\b(?:src|href)\s*=\s*["']?https?://""", re.I)
ASSET_URL = re.compile(r"""<(?:script|link)\b[^>]*\b(?:src|href)\s*=\s*["']([^"']+)["']""", re.I)


@pytest.fixture(scope="module")
def seeded(keyed_app) -> str:
    """Alice's profile with a superseded memory, a session of turns and an ingested one."""
    profile = "browser-demo"
    with httpx.Client(
        base_url=f"{keyed_app}/v1/profiles/{profile}",
        headers={"Authorization": f"Bearer {ALICE}"},
        timeout=TIMEOUT_S,
    ) as http:
        for content in ("I live in Budapest.", "I moved to Vienna in May 2026."):
            assert http.post("/memories", json={"content": content}).status_code == 201
        for role, content in [
            ("user", "Can you pin the Python version to 3.11?"),
            ("assistant", "Pinned Python 3.11 in pyproject.toml."),
        ]:
            turn = http.post("/sessions/s-pin/messages", json={"role": role, "content": content})
            assert turn.status_code == 201, turn.text
    return profile


def test_browse_profiles_memories_history_sessions_and_search(tab, keyed_app, seeded):
    page = tab.page
    page.goto(f"{keyed_app}/ui")
    page.locator("#token").fill(ALICE)  # asked once...
    page.locator("#token-form button").click()
    profile_link = page.locator("#profile-list a", has_text=seeded)
    profile_link.wait_for()
    counts = page.locator("#profile-list li").filter(has_text=seeded).locator(".counts")
    assert counts.inner_text() == "1 current memory · 2 turns · 1 session"
    tab.screenshot("ui-profiles")

    profile_link.click()
    rows = page.locator("#memory-rows tr")
    rows.nth(1).wait_for()
    assert rows.count() == 2
    old = page.locator("#memory-rows tr.superseded")
    assert "I live in Budapest." in old.inner_text()
    assert old.locator(".topic").inner_text() == page.locator("tr.current .topic").inner_text()
    old.click()
    versions = page.locator("#history li")
    versions.nth(1).wait_for()
    assert [text.split(" fact ·")[0] for text in versions.all_inner_texts()] == [
        "I live in Budapest.",
        "I moved to Vienna in May 2026.",
    ]
    assert "superseded" in versions.nth(0).inner_text()
    tab.screenshot("ui-memory-history")

    page.locator(".tabs a[data-tab=sessions]").click()
    page.locator("#session-rows tr", has_text="s-pin").click()
    turns = page.locator("#turns li")
    turns.nth(1).wait_for()
    assert "Pinned Python 3.11" in turns.nth(1).inner_text()
    tab.screenshot("ui-sessions")

    page.reload()  # ...and kept in session storage: no second question
    page.locator(".tabs a[data-tab=search]").click()
    assert page.locator("#token-form").is_hidden()
    page.locator("#query").fill("Which city did I move to?")
    page.locator("#search-form button").click()
    hits = page.locator("#hit-rows tr")
    hits.first.wait_for()
    first = hits.first.locator("td")
    assert "Vienna" in first.nth(2).inner_text()
    assert float(first.nth(3).inner_text()) > 0  # score
    assert first.nth(4).inner_text()  # the channels that found it
    assert re.search(r"hits in \d+\.\d ms", page.locator("#latency").inner_text())
    assert "Vienna" in page.locator("#answer").inner_text()
    tab.screenshot("ui-search")

    assert tab.errors == []
    assert tab.escaped == []


@pytest.fixture(scope="module")
def moved(keyed_app) -> tuple[str, str]:
    """A profile where a turn says what a newer memory replaced; its name and that memory's id."""
    profile = "browser-moved"
    with httpx.Client(
        base_url=f"{keyed_app}/v1/profiles/{profile}",
        headers={"Authorization": f"Bearer {ALICE}"},
        timeout=TIMEOUT_S,
    ) as http:
        turn = {
            "role": "user",
            "content": "I live in Budapest.",
            "created_at": "2026-01-10T09:00:00Z",
        }
        ingested = http.post("/ingest", json={"session_id": "s-home", "messages": [turn]})
        assert ingested.status_code == 200, ingested.text
        vienna = http.post("/memories", json={"content": "I moved to Vienna in May 2026."})
        assert vienna.status_code == 201, vienna.text
    return profile, vienna.json()["id"]


def test_search_marks_a_stale_turn_and_shows_what_holds_now(tab, keyed_app, moved):
    profile, vienna = moved
    page = tab.page
    page.goto(f"{keyed_app}/ui")
    page.locator("#token").fill(ALICE)
    page.locator("#token-form button").click()
    page.locator("#profile-list a", has_text=profile).click()
    page.locator(".tabs a[data-tab=search]").click()
    page.locator("#query").fill("Where does the user live?")
    page.locator("#search-form button").click()
    hits = page.locator("#hit-rows tr")
    hits.first.wait_for()
    assert "Vienna" in hits.first.locator("td.content").inner_text()
    assert hits.first.locator("td.status").inner_text().startswith("current")
    stale = page.locator("#hit-rows tr.stale", has_text="Budapest")
    assert stale.count() >= 1
    assert stale.first.locator("td.status").inner_text().startswith("stale")
    assert not page.locator("#hit-rows tr:not(.stale)", has_text="Budapest").count()

    stale.first.get_by_role("button", name="what holds now").click()
    versions = page.locator("#hit-history li")
    versions.nth(1).wait_for()
    assert "Budapest" in versions.nth(0).inner_text()
    assert "superseded" in versions.nth(0).inner_text()
    assert versions.nth(1).get_attribute("data-id") == vienna
    assert "current" in versions.nth(1).inner_text()
    tab.screenshot("ui-search-stale")
    assert tab.errors == []
    assert tab.escaped == []


def test_swagger_ui_renders_offline(tab, keyed_app):
    tab.page.goto(f"{keyed_app}/docs")
    operations = tab.page.locator(".swagger-ui .opblock")
    operations.first.wait_for()
    assert operations.count() >= 15
    assert tab.page.locator(".swagger-ui", has_text="/v1/profiles/{profile}/recall").count() == 1
    tab.screenshot("docs-swagger")
    assert tab.errors == []
    assert tab.escaped == []


def test_redoc_renders_offline(tab, keyed_app):
    tab.page.goto(f"{keyed_app}/redoc")
    tab.page.get_by_role("heading", name="Recall").first.wait_for()
    tab.screenshot("docs-redoc")
    # ReDoc's sidebar always asks for a logo from its CDN; the page's CSP refuses it.
    assert [e for e in tab.errors if "cdn.redoc.ly" not in e] == []
    assert tab.escaped == []


@pytest.mark.parametrize("page", ["/ui", "/docs", "/redoc"])
def test_pages_reference_only_assets_served_by_raymem(keyed_app, page):
    html = httpx.get(f"{keyed_app}{page}", timeout=TIMEOUT_S)
    assert html.status_code == 200
    assert not REMOTE_ASSET.search(html.text)
    assets = ASSET_URL.findall(html.text)
    assert assets
    base = re.search(r'<base href="([^"]+)"', html.text)
    for asset in assets:
        if asset.startswith("data:"):
            continue
        url = httpx.URL(f"{keyed_app}{page}").join(base.group(1) if base else "").join(asset)
        assert httpx.get(url, timeout=TIMEOUT_S).status_code == 200, url


def test_the_page_asks_for_a_key_only_where_keys_are_configured(serve_app, keyed_app):
    config = {
        url: httpx.get(f"{url}/ui/config", timeout=TIMEOUT_S) for url in (serve_app, keyed_app)
    }
    assert config[serve_app].json() == {"auth_required": False}
    assert config[keyed_app].json() == {"auth_required": True}
