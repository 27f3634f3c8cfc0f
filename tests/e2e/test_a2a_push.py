"""Push notifications from `raven a2a serve` to real webhook receivers on loopback."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import grpc.aio
import httpx
import pytest
from a2a.types import (
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    TaskPushNotificationConfig,
    a2a_pb2_grpc,
)

from tests.e2e.a2a_server import A2AServer, message, start
from tests.e2e.test_a2a import asks
from tests.e2e.webhooks import Receiver, pushed_states

LOOPBACK = {"allowPrivate": ["127.0.0.1"]}
QUICK = {"retryBaseS": 0.05, "retryMaxS": 0.2}


def with_push(text: str, config: dict[str, Any], **ids: str) -> dict[str, Any]:
    return message(text, **ids) | {"configuration": {"taskPushNotificationConfig": config}}


def push_state(server: A2AServer, task_id: str, config_id: str) -> dict[str, Any]:
    task = server.call("GetTask", {"id": task_id})["result"]
    return dict(task.get("metadata", {}).get("raven", {}).get("push", {}).get(config_id, {}))


async def until_push_state(
    server: A2AServer, task_id: str, config_id: str, done: Any
) -> dict[str, Any]:
    async with asyncio.timeout(15):
        while not done(state := push_state(server, task_id, config_id)):
            await asyncio.sleep(0.05)
    return state


async def test_every_update_reaches_the_webhook_signed_and_with_its_authorization(
    serve: Any, receiver: Receiver
) -> None:
    server = serve([{"text": "All done."}], push=LOOPBACK)
    config = {
        "id": "hook",
        "url": receiver.url("/ok"),
        "token": "receiver-secret",
        "authentication": {"scheme": "Bearer", "credentials": "hook-credential"},
    }
    sent = server.call("SendMessage", with_push("do it", config))["result"]["task"]
    assert sent["status"]["state"] == "TASK_STATE_COMPLETED"
    hits = await receiver.until("/ok", lambda hits: "COMPLETED" in pushed_states(hits))
    told = pushed_states(hits)
    assert told[0] == "SUBMITTED" and told[-1] == "COMPLETED" and "WORKING" in told
    assert any("artifactUpdate" in hit.json for hit in hits)
    for hit in hits:
        assert hit.headers["Authorization"] == "Bearer hook-credential"
        assert hit.headers["X-A2A-Notification-Token"] == "receiver-secret"
        assert hit.signed_with("receiver-secret")
        assert not hit.signed_with("another-secret")
    assert len({hit.headers["webhook-id"] for hit in hits}) == len(hits)
    state = await until_push_state(
        server, sent["id"], "hook", lambda s: s.get("delivered") == len(hits)
    )
    assert state["lastSuccess"] and "lastError" not in state and not state["disabled"]


async def test_configs_on_every_binding_create_get_list_and_delete(
    serve: Any, receiver: Receiver
) -> None:
    server = serve([asks("Which one?")], push=LOOPBACK, grpc_port=0)
    task = server.call("SendMessage", message("start"))["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    tid = task["id"]
    created = server.call(
        "CreateTaskPushNotificationConfig",
        {"taskId": tid, "id": "rpc", "url": receiver.url("/ok")},
    )["result"]
    assert created["id"] == "rpc" and created["taskId"] == tid
    assert len(created["token"]) >= 32  # minted: the key of the signature
    got = server.call("GetTaskPushNotificationConfig", {"taskId": tid, "id": "rpc"})
    assert got["result"] == created

    headers = {"Authorization": f"Bearer {server.token}", "A2A-Version": "1.0"}
    base = server.rpc.rstrip("/")
    async with httpx.AsyncClient(headers=headers, timeout=15) as http:
        made = await http.post(
            f"{base}/tasks/{tid}/pushNotificationConfigs",
            json={"id": "rest", "url": receiver.url("/ok"), "token": "rest-token"},
        )
        assert made.status_code == 200 and made.json()["token"] == "rest-token"
        listed = await http.get(f"{base}/tasks/{tid}/pushNotificationConfigs")
        assert sorted(c["id"] for c in listed.json()["configs"]) == ["rest", "rpc"]
        for _ in range(2):  # idempotent
            gone = await http.delete(f"{base}/tasks/{tid}/pushNotificationConfigs/rest")
            assert gone.status_code == 200 and gone.json() == {}
        missing = await http.get(f"{base}/tasks/{tid}/pushNotificationConfigs/rest")
        assert missing.status_code == 404

    card = httpx.get(server.base + "/.well-known/agent-card.json").json()
    assert card["capabilities"]["pushNotifications"] is True
    grpc_url = next(i["url"] for i in card["supportedInterfaces"] if i["protocolBinding"] == "GRPC")
    metadata = (("authorization", f"Bearer {server.token}"), ("a2a-version", "1.0"))
    async with grpc.aio.insecure_channel(grpc_url) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        config = TaskPushNotificationConfig(task_id=tid, id="grpc", url=receiver.url("/ok"))
        made_grpc = await stub.CreateTaskPushNotificationConfig(config, metadata=metadata)
        assert made_grpc.id == "grpc" and made_grpc.token
        page = await stub.ListTaskPushNotificationConfigs(
            ListTaskPushNotificationConfigsRequest(task_id=tid), metadata=metadata
        )
        assert sorted(c.id for c in page.configs) == ["grpc", "rpc"]
        await stub.DeleteTaskPushNotificationConfig(
            DeleteTaskPushNotificationConfigRequest(task_id=tid, id="grpc"), metadata=metadata
        )
        with pytest.raises(grpc.aio.AioRpcError) as missing_grpc:
            await stub.GetTaskPushNotificationConfig(
                GetTaskPushNotificationConfigRequest(task_id=tid, id="grpc"), metadata=metadata
            )
        assert missing_grpc.value.code() == grpc.StatusCode.NOT_FOUND

    # The config left (`rpc`) hears the answer's updates, to the end.
    answered = server.call("SendMessage", message("this one", taskId=tid))["result"]["task"]
    assert answered["status"]["state"] == "TASK_STATE_COMPLETED"
    hits = await receiver.until("/ok", lambda hits: "COMPLETED" in pushed_states(hits))
    assert all(hit.signed_with(created["token"]) for hit in hits)
    unknown = server.call("ListTaskPushNotificationConfigs", {"taskId": "no-such-task"})
    assert unknown["error"]["code"] == -32001


async def test_a_failing_receiver_gets_retries_until_it_takes_the_update(
    serve: Any, receiver: Receiver, home: Path, env: dict[str, str]
) -> None:
    """On the sqlite store: the config and its delivery state outlive a restart."""
    server = serve([asks("Which one?")], push=LOOPBACK | QUICK, task_store="sqlite")
    config = {"id": "flaky", "url": receiver.url("/flaky"), "token": "t"}
    task = server.call("SendMessage", with_push("start", config))["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    await receiver.until("/flaky", lambda hits: "INPUT_REQUIRED" in pushed_states(hits[3:]))
    first = receiver.at("/flaky")
    assert first[0].headers["webhook-id"] == first[3].headers["webhook-id"]  # one, tried again
    state = await until_push_state(server, task["id"], "flaky", lambda s: s.get("delivered"))
    assert state["failedAttempts"] == 3 and state["lastError"] == "HTTP 503"
    assert state["failedInARow"] == 0 and not state["disabled"]

    assert server.stop() == 0
    (home / "script.json").write_text(json.dumps([{"text": "Done."}]))
    again = start(env)
    try:
        listed = again.call("ListTaskPushNotificationConfigs", {"taskId": task["id"]})
        assert [c["id"] for c in listed["result"]["configs"]] == ["flaky"]
        answered = again.call("SendMessage", message("this one", taskId=task["id"]))
        assert answered["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        await receiver.until("/flaky", lambda hits: "COMPLETED" in pushed_states(hits))
        after = await until_push_state(
            again, task["id"], "flaky", lambda s: s.get("delivered", 0) > state["delivered"]
        )
        assert after["failedAttempts"] == 3  # the count went on from before the restart
    finally:
        assert again.stop() == 0


async def test_a_receiver_that_never_answers_is_disabled_and_never_holds_the_task(
    serve: Any, receiver: Receiver
) -> None:
    slow = {"timeoutS": 0.3, "attempts": 2, "disableAfter": 2}
    server = serve([{"text": "Quick."}], push=LOOPBACK | QUICK | slow)
    config = {"id": "silent", "url": receiver.url("/silent")}
    task = server.call("SendMessage", with_push("go", config))["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"  # not held by the receiver
    state = await until_push_state(server, task["id"], "silent", lambda s: s.get("disabled"))
    assert state["lastError"] == "no answer within 0.3 s"
    assert state["failedInARow"] == 2 and state["failedAttempts"] == 4
    assert "delivered" not in state or state["delivered"] == 0
    # Two notifications, two attempts each, then none, as the server counted them above;
    # the receiver sees the attempts that reached it before their 0.3 s ran out (on a
    # loaded machine one may not, which is no failure of Raven's), never more.
    assert 1 <= len(receiver.at("/silent")) <= 4


async def test_redirects_are_not_followed(serve: Any, receiver: Receiver) -> None:
    server = serve([{"text": "Done."}], push=LOOPBACK | QUICK)
    config = {"id": "moved", "url": receiver.url("/redirect"), "token": "t"}
    task = server.call("SendMessage", with_push("go", config))["result"]["task"]
    state = await until_push_state(
        server, task["id"], "moved", lambda s: s.get("failedInARow", 0) >= 1
    )
    assert "redirect" in state["lastError"] and "307" in state["lastError"]
    assert receiver.at("/elsewhere") == []
    assert len(receiver.at("/redirect")) >= 1


async def test_private_addresses_are_refused_unless_allow_listed(
    serve: Any, receiver: Receiver
) -> None:
    server = serve([{"text": "Done."}, {"text": "Done."}])
    for url in (
        receiver.url("/ok"),
        f"http://localhost:{receiver.port}/ok",
        "http://169.254.169.254/latest/meta-data",
        "http://[::ffff:10.0.0.1]/hook",
        "http://10.1.2.3/hook",
        "file:///etc/passwd",
    ):
        refused = server.call("SendMessage", with_push("go", {"url": url}))
        assert refused["error"]["code"] == -32602, url
        assert "refused" in refused["error"]["message"] or "http" in refused["error"]["message"]
    assert server.call("ListTasks", {})["result"]["tasks"] == []  # nothing started
    task = server.call("SendMessage", message("go"))["result"]["task"]
    later = server.call(
        "CreateTaskPushNotificationConfig", {"taskId": task["id"], "url": receiver.url("/ok")}
    )
    assert later["error"]["code"] == -32602 and "allowPrivate" in later["error"]["message"]
    public = server.call(
        "CreateTaskPushNotificationConfig",
        {"taskId": task["id"], "url": "https://hooks.example.com/a2a"},
    )
    assert public["result"]["url"] == "https://hooks.example.com/a2a"
    assert receiver.hits == []
    # A task takes ten configs at most; re-creating one by its id replaces it.
    for n in range(2, 11):
        made = server.call(
            "CreateTaskPushNotificationConfig",
            {"taskId": task["id"], "id": f"c{n}", "url": f"https://hooks.example.com/{n}"},
        )
        assert made["result"]["id"] == f"c{n}", made
    over = server.call(
        "CreateTaskPushNotificationConfig",
        {"taskId": task["id"], "id": "c11", "url": "https://hooks.example.com/11"},
    )
    assert over["error"]["code"] == -32602 and "at most 10" in over["error"]["message"]
    again = server.call(
        "CreateTaskPushNotificationConfig",
        {"taskId": task["id"], "id": "c5", "url": "https://hooks.example.com/five"},
    )
    assert again["result"]["url"] == "https://hooks.example.com/five"
    listed = server.call("ListTaskPushNotificationConfigs", {"taskId": task["id"]})["result"]
    assert len(listed["configs"]) == 10
