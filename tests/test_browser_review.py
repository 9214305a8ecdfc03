"""The memory browser's newer pages in a real headless Chromium: core blocks, patterns and
skills, dreams with their diffs, the review queue, and the write controls.

A key that may write sees Forget, Adopt / Discard and Approve / Reject, and what they do
is then checked through the API; a read-only key sees none of them, and the API refuses
the same request forced from its page. The browser and tabs are ``browser_fixtures``'.
"""

import asyncio
import concurrent.futures
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from browser_fixtures import TIMEOUT_S, Tab, sign_in
from conftest import wait_until
from keyed_app import ALICE, ALICE_READ_ONLY
from test_dreams import STALE
from test_dreams_http import seeded_archive
from test_procedural_http import learn_the_precondition

USER_NOTE = "Prefers short answers with the command first."
SKILL = {
    "name": "rename-node",
    "when_to_use": "Renaming an ontology node",
    "steps": ["Create the node if it is missing", "Update its label"],
}
FORGETTABLE = "My locker code at the gym is 4711."
# A forced write from a read-only page: the page's own token, no control needed.
FORCE = """async ([path, method]) => {
  const token = sessionStorage.getItem("raymem.token");
  const response = await fetch(path, { method, headers: { Authorization: `Bearer ${token}` } });
  return [response.status, (await response.json()).error.code];
}"""


def client(server: str, key: str = ALICE) -> httpx.Client:
    return httpx.Client(
        base_url=server, headers={"Authorization": f"Bearer {key}"}, timeout=TIMEOUT_S
    )


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json() if response.content else None


@pytest.fixture(scope="module")
def http(keyed_app) -> Iterator[httpx.Client]:
    """Alice's client: seeds the pages, then checks what the clicks did."""
    with client(keyed_app) as http:
        yield http


def ready_dream(http: httpx.Client, profile: str) -> str:
    """Start a dream and wait until it is ready for review; its id."""
    dream = ok(http.post(f"/v1/profiles/{profile}/dreams", json={}), 202)["id"]

    def state() -> str:
        return str(ok(http.get(f"/v1/profiles/{profile}/dreams/{dream}"))["state"])

    wait_until(lambda: state() != "running", timeout=TIMEOUT_S)
    assert state() == "ready"
    return str(dream)


@pytest.fixture(scope="module")
def dreaming(http, tmp_path_factory) -> str:
    """A profile with duplicates, a contradiction and a stale memory, and a dream of it ready."""
    profile = "browser-dreams"
    # In a thread of its own: Playwright's sync API keeps an event loop running in this one.
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        seed_dir = tmp_path_factory.mktemp("dream-seed")
        archive = pool.submit(asyncio.run, seeded_archive(seed_dir)).result()
    imported = http.post(
        f"/v1/profiles/{profile}/import",
        content=archive,
        headers={"Content-Type": "application/x-ndjson"},
    )
    ok(imported)
    ready_dream(http, profile)
    return profile


@pytest.fixture(scope="module")
def reviewed(http) -> str:
    """A profile with a core-block entry, a learnt pattern, a skill, a memory to forget, and
    two moves waiting in the review queue."""
    profile = "browser-review"
    base = f"/v1/profiles/{profile}"
    ok(http.post(f"{base}/blocks/user/entries", json={"content": USER_NOTE}), 201)
    learn_the_precondition(http, profile)
    ok(http.post(f"{base}/skills", json=SKILL), 201)
    ok(http.post(f"{base}/memories", json={"content": FORGETTABLE}), 201)

    def said(session: str, content: str) -> None:
        body = {"session_id": session, "messages": [{"role": "user", "content": content}]}
        ok(http.post(f"{base}/ingest", json=body))

    said("s-home-1", "I live in Budapest.")
    ok(http.put(f"{base}/review", json={"mode": "review", "below": 0.95}))
    said("s-home-2", "I moved to Vienna.")
    said("s-home-3", "I moved to Graz.")
    pending = ok(http.get(f"{base}/proposals", params={"state": "pending"}))["proposals"]
    assert len(pending) == 2
    return profile


def open_tab(tab: Tab, profile: str, name: str) -> None:
    tab.page.locator("#profile-list a", has_text=profile).click()
    tab.page.locator(f".tabs a[data-tab={name}]").click()


def memory_id(http: httpx.Client, profile: str, content: str) -> str:
    page = ok(http.get(f"/v1/profiles/{profile}/memories", params={"limit": 100}))
    (found,) = [memory["id"] for memory in page["memories"] if memory["content"] == content]
    return str(found)


def test_a_read_only_key_sees_every_page_and_no_write_control(
    tab, keyed_app, http, dreaming, reviewed
):
    dreams = ok(http.get(f"/v1/profiles/{dreaming}/dreams"))["dreams"]
    assert [dream["state"] for dream in dreams] == ["ready"]  # what a writer could adopt
    page = tab.page
    sign_in(tab, keyed_app, ALICE_READ_ONLY)
    assert "Read-only key" in page.locator("#mode").inner_text()

    open_tab(tab, dreaming, "dreams")
    page.locator("#dream-rows tr.ready").click()
    page.locator("#dream-changes li").first.wait_for()
    assert page.locator("#dream-changes li").count() >= 3
    assert page.locator("#dream-title").inner_text().endswith(": ready")
    assert page.locator("button.write:visible").count() == 0
    tab.screenshot("ui-dream-read-only")

    open_tab(tab, reviewed, "review")
    page.locator("#proposal-rows tr.pending").nth(1).wait_for()
    assert page.locator("button.write:visible").count() == 0
    tab.screenshot("ui-review-read-only")
    page.locator(".tabs a[data-tab=memories]").click()
    page.locator("#memory-rows tr", has_text=FORGETTABLE).click()
    page.locator("#history li").first.wait_for()
    assert page.locator("#forget-memory").is_hidden()
    assert page.locator("button.write:visible").count() == 0
    assert tab.errors == []

    # Forced from the page all the same, the API refuses and nothing changes.
    dream = dreams[0]["id"]
    forgettable = memory_id(http, reviewed, FORGETTABLE)
    for path, method in [
        (f"v1/profiles/{dreaming}/dreams/{dream}/adopt", "POST"),
        (f"v1/profiles/{reviewed}/memories/{forgettable}", "DELETE"),
    ]:
        assert page.evaluate(FORCE, [path, method]) == [403, "forbidden"]
    assert ok(http.get(f"/v1/profiles/{dreaming}/dreams/{dream}"))["state"] == "ready"
    assert ok(http.get(f"/v1/profiles/{reviewed}/memories/{forgettable}"))["forgotten_at"] is None
    assert all("403" in error for error in tab.errors)  # the browser logs each refusal
    assert tab.escaped == []


def test_core_blocks_patterns_and_skills(tab, keyed_app, reviewed):
    page = tab.page
    sign_in(tab, keyed_app, ALICE)
    open_tab(tab, reviewed, "core")
    user = page.locator(".block[data-name=user]")
    user.locator("li.entry").first.wait_for()
    assert user.locator("li.entry").all_inner_texts() == [USER_NOTE]
    assert f"{len(USER_NOTE)} / " in user.locator(".size").inner_text()
    assert page.locator(".block[data-name=project]").count() == 1
    tab.screenshot("ui-core-blocks")

    page.locator(".tabs a[data-tab=procedures]").click()
    pattern = page.locator("#pattern-rows tr.pattern")
    pattern.first.wait_for()
    assert pattern.count() == 1
    assert "update_node on node (NodeNotFoundError)" in pattern.locator(".type").inner_text()
    assert "run create_node first." in pattern.locator(".content").inner_text()
    assert pattern.locator(".confidence").inner_text() == "1.00"
    skill = page.locator("#skill-rows tr.skill", has_text=SKILL["name"])
    assert skill.locator("li.step").all_inner_texts() == SKILL["steps"]
    tab.screenshot("ui-patterns-skills")
    assert tab.errors == []
    assert tab.escaped == []


def test_a_writer_decides_proposals_and_forgets_a_memory(tab, keyed_app, http, reviewed):
    page = tab.page
    base = f"/v1/profiles/{reviewed}"
    sign_in(tab, keyed_app, ALICE)
    assert "may write" in page.locator("#mode").inner_text()
    open_tab(tab, reviewed, "review")
    pending = page.locator("#proposal-rows tr.pending")
    pending.nth(1).wait_for()
    assert "under confidence 0.95" in page.locator("#review-mode").inner_text()
    first, second = (ok(http.get(f"{base}/proposals"))["proposals"][i] for i in (0, 1))
    row = page.locator(f"#proposal-rows tr[data-id='{first['id']}']")
    assert "Budapest" in row.locator(".target").inner_text()
    tab.screenshot("ui-review-queue")

    row.get_by_role("button", name="Approve").click()
    page.locator("#notice", has_text="Proposal approved.").wait_for()
    assert page.locator(f"#proposal-rows tr.approved[data-id='{first['id']}']").count() == 1
    page.locator(f"#proposal-rows tr[data-id='{second['id']}']").get_by_role(
        "button", name="Reject"
    ).click()
    page.locator("#notice", has_text="Proposal rejected.").wait_for()
    assert page.locator(f"#proposal-rows tr.rejected[data-id='{second['id']}']").count() == 1
    assert page.locator("#proposal-rows button.write").count() == 0
    decided = {p["id"]: p["state"] for p in ok(http.get(f"{base}/proposals"))["proposals"]}
    assert decided == {first["id"]: "approved", second["id"]: "rejected"}
    replaced = ok(http.get(f"{base}/memories/{first['target_id']}"))
    assert replaced["superseded_by"] == first["memory_id"]

    # Forget asks first: dismissed, nothing changes; accepted, the memory is forgotten.
    page.locator(".tabs a[data-tab=memories]").click()
    page.locator("#memory-rows tr", has_text=FORGETTABLE).click()
    page.locator("#forget-memory").wait_for()
    forgettable = memory_id(http, reviewed, FORGETTABLE)
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.locator("#forget-memory").click()
    assert ok(http.get(f"{base}/memories/{forgettable}"))["forgotten_at"] is None
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("#forget-memory").click()
    page.locator("#notice", has_text="Forgotten").wait_for()
    assert page.locator("#memory-rows tr.forgotten", has_text=FORGETTABLE).count() == 1
    assert "forgotten" in page.locator("#history li.selected").inner_text()
    assert page.locator("#forget-memory").is_hidden()
    assert ok(http.get(f"{base}/memories/{forgettable}"))["forgotten_at"]
    tab.screenshot("ui-memory-forgotten")
    assert tab.errors == []
    assert tab.escaped == []


def test_a_writer_reviews_dreams_then_discards_one_and_adopts_another(
    tab, keyed_app, http, dreaming
):
    page = tab.page
    base = f"/v1/profiles/{dreaming}"
    (first,) = ok(http.get(f"{base}/dreams"))["dreams"]
    diff = ok(http.get(f"{base}/dreams/{first['id']}/diff"))["changes"]
    sign_in(tab, keyed_app, ALICE)
    open_tab(tab, dreaming, "dreams")
    page.locator(f"#dream-rows tr.ready[data-id='{first['id']}']").click()
    changes = page.locator("#dream-changes li.change")
    changes.first.wait_for()
    assert changes.count() == len(diff)
    for shown, change in zip(changes.all(), diff, strict=True):
        assert shown.locator(".action").inner_text() == change["action"]
        assert shown.locator(".content").inner_text() == change["content"]
        assert shown.locator(".reason").inner_text() == f"Why: {change['reason']}"
    tab.screenshot("ui-dream-diff")

    page.locator("#dream-actions").get_by_role("button", name="Discard").click()
    page.locator("#notice", has_text="Discarded").wait_for()  # set once the page is redrawn
    assert page.locator(f"#dream-rows tr.discarded[data-id='{first['id']}']").count() == 1
    assert page.locator("#dream-title").inner_text().endswith(": discarded")
    assert page.locator("#dream-actions button").count() == 0
    assert ok(http.get(f"{base}/dreams/{first['id']}"))["state"] == "discarded"
    assert STALE in {m["content"] for m in ok(http.get(f"{base}/memories"))["memories"]}

    second = ready_dream(http, dreaming)
    page.reload()
    page.locator(f"#dream-rows tr.ready[data-id='{second}']").click()
    page.locator("#dream-changes li.change").first.wait_for()
    page.locator("#dream-actions").get_by_role("button", name="Adopt").click()
    page.locator("#notice", has_text="Adopted: ").wait_for()
    assert page.locator(f"#dream-rows tr.adopted[data-id='{second}']").count() == 1
    assert page.locator("#dream-actions button").count() == 0
    applied = ok(http.get(f"{base}/dreams/{second}/diff"))["changes"]
    assert page.locator("#dream-changes li.change").count() == len(applied)
    assert ok(http.get(f"{base}/dreams/{second}"))["state"] == "adopted"
    assert STALE not in {m["content"] for m in ok(http.get(f"{base}/memories"))["memories"]}
    tab.screenshot("ui-dream-adopted")
    assert tab.errors == []
    assert tab.escaped == []


def test_the_page_learns_whether_its_key_may_write(keyed_app, serve_app):
    def key(server: str, token: str | None) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.get(f"{server}/ui/key", headers=headers, timeout=TIMEOUT_S)

    assert key(keyed_app, ALICE).json() == {"read_only": False}
    assert key(keyed_app, ALICE_READ_ONLY).json() == {"read_only": True}
    assert key(keyed_app, None).status_code == 401
    assert key(keyed_app, "not-a-key").json()["error"]["code"] == "unauthorized"
    assert key(serve_app, None).json() == {"read_only": False}  # no keys: loopback only
