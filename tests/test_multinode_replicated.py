"""Several nodes with object storage: a profile whose node is lost re-activates on a
surviving node with every acknowledged write, and a profile that comes back to a node
holding an older copy of it is served from object storage, never from that copy.

The cluster and the deployment are those of ``test_multinode.py``; durability is
``replicated`` (each write uploaded before it is acknowledged).
"""

import time
from collections.abc import Iterator

import httpx
import pytest
from conftest import wait_until
from s3_fixtures import make_bucket
from test_multinode import START_TIMEOUT_S, MultiNode, _contents, _node_args, _remember

# Writes that say different things, so none is reconciled away as a duplicate of another.
FACTS = [
    "the staging database runs on port 6543",
    "Priya reviews every pull request on Tuesdays",
    "the office plants are watered on Fridays",
    "invoices go out on the first working day",
    "the cat is called Miso",
    "the VPN certificate expires in March",
    "lunch is ordered from the Thai place on Mondays",
    "the guitar needs new strings",
    "the marathon training plan starts in June",
    "the garage door code was changed last week",
]


@pytest.fixture(scope="module")
def replicated(tmp_path_factory: pytest.TempPathFactory, s3_endpoint: str) -> Iterator[MultiNode]:
    """Object storage, every write uploaded before it is acknowledged; profiles on the two
    workers only, so a profile that leaves one node can only land on the other."""
    settings = (
        "[object_store]\n"
        f'bucket = "{make_bucket(s3_endpoint)}"\nendpoint_url = "{s3_endpoint}"\n'
        'region = "us-east-1"\naccess_key_id = "testing"\nsecret_access_key = "testing"\n'
        '[durability]\nmode = "replicated"\n'
    )
    nodes = MultiNode(tmp_path_factory.mktemp("replicated"), settings, head_hosts=False)
    try:
        yield nodes
    finally:
        nodes.close()


def test_with_object_storage_a_lost_node_loses_no_acknowledged_write(replicated):
    names = [f"moving-{index}" for index in range(4)]
    for name in names:
        _remember(replicated.http, name, f"{name} write 0")
    on_b = [name for name in names if replicated.disk_of(name) == ["b"]]
    assert on_b and all(replicated.disk_of(name) in (["b"], ["c"]) for name in names)
    acknowledged: dict[str, set[str]] = {name: {f"{name} write 0"} for name in names}
    killed_at = recovered_after = None
    # A client keeps writing while node b is killed under it.
    for index in range(1, 31):
        name = names[index % len(names)]
        if index == 10:
            replicated.cluster.remove_node(replicated.workers["b"], allow_graceful=False)
            killed_at = time.monotonic()
        content = f"{name}: {FACTS[index % len(FACTS)]} (write {index})"
        try:
            response = replicated.http.post(
                f"/v1/profiles/{name}/memories", json={"content": content}
            )
        except httpx.HTTPError:
            continue  # not acknowledged: the client would retry
        if response.status_code == 201:
            acknowledged[name].add(content)
            if killed_at is not None and recovered_after is None and name in on_b:
                recovered_after = time.monotonic() - killed_at
    assert recovered_after is not None, "no profile of the lost node answered again"
    print(f"profiles of the lost node answered again after {recovered_after:.1f} s")
    for name in names:
        assert _contents(replicated.http, name) == acknowledged[name]
        assert "c" in replicated.disk_of(name)  # all of them live on c now

    # Node b comes back with its older copies; node c goes: the profiles move back to b,
    # which must serve what object storage holds, never its stale copy.
    replicated.workers["b"] = replicated.cluster.add_node(**_node_args(replicated.disks["b"]))
    replicated.cluster.wait_for_nodes(timeout=START_TIMEOUT_S)
    replicated.cluster.remove_node(replicated.workers["c"], allow_graceful=False)
    for name in on_b:
        back = wait_until(
            lambda name=name: _answer(replicated.http, name), timeout=180, interval=0.5
        )
        assert back == acknowledged[name]


def _answer(http: httpx.Client, profile: str) -> set[str] | None:
    response = http.get(f"/v1/profiles/{profile}/memories", params={"limit": 100})
    if response.status_code != 200:
        return None
    return {memory["content"] for memory in response.json()["memories"]}
