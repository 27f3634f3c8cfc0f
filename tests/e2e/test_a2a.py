"""`raven a2a serve` driven with the a2a-sdk's own client and with raw HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import stat
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers import get_message_text
from a2a.types import (
    CancelTaskRequest,
    GetExtendedAgentCardRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
    a2a_pb2_grpc,
)
from google.protobuf.struct_pb2 import Value

from raven.sessions import SqliteStore
from tests.conftest import raven, write_config
from tests.e2e.a2a_server import TOKEN, A2AServer, configure, message, start
from tests.e2e.webhooks import Receiver, pushed_states
from tests.ports import free_port
from tests.processes import ended, pid_from

BINDINGS = ("JSONRPC", "HTTP+JSON")


class _Bearer:
    """The token in a gRPC call's metadata, as a peer sends it."""

    def __init__(self, token: str) -> None:
        self._metadata = (("authorization", f"Bearer {token}"),)

    def _with(self, details: Any) -> Any:
        return details._replace(metadata=(*(details.metadata or ()), *self._metadata))


class BearerUnary(_Bearer, grpc.aio.UnaryUnaryClientInterceptor):
    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(self._with(details), request)


class BearerStream(_Bearer, grpc.aio.UnaryStreamClientInterceptor):
    """(grpc.aio files each interceptor under one kind of call only.)"""

    async def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(self._with(details), request)


async def sdk_client(server: A2AServer, streaming: bool = False, binding: str = "JSONRPC") -> Any:
    """The SDK's client for `server`, on `binding` alone."""
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {server.token}"}, timeout=30)
    card = await A2ACardResolver(http, server.base).get_agent_card()
    config = ClientConfig(
        streaming=streaming,
        httpx_client=http,
        supported_protocol_bindings=[binding],
        grpc_channel_factory=lambda target: grpc.aio.insecure_channel(
            target, interceptors=[BearerUnary(server.token), BearerStream(server.token)]
        ),
    )
    return ClientFactory(config).create(card), http


def user(text: str, **ids: str) -> Message:
    return Message(
        message_id=os.urandom(8).hex(), role=Role.ROLE_USER, parts=[Part(text=text)], **ids
    )


def asks(question: str) -> dict[str, Any]:
    """A scripted model step that asks the user `question` (the task waits for input)."""
    return {"toolCalls": [{"name": "ask_user", "arguments": {"question": question}}]}


async def reaches(server: A2AServer, task_id: str, state: str) -> dict[str, Any]:
    """The task once it is in `state`, asking GetTask until then (15 s at most)."""
    async with asyncio.timeout(15):
        while True:
            task: dict[str, Any] = server.call("GetTask", {"id": task_id})["result"]
            if task["status"]["state"] == state:
                return task
            await asyncio.sleep(0.05)


async def last(stream: Any) -> Any:
    items = [item async for item in stream]
    return items


def test_card_is_public_and_describes_the_endpoint(idle_server: A2AServer) -> None:
    server = idle_server
    card = httpx.get(server.base + "/.well-known/agent-card.json").json()
    assert card["supportedInterfaces"] == [
        {"url": server.rpc, "protocolBinding": binding, "protocolVersion": "1.0"}
        for binding in BINDINGS  # the REST paths live under the RPC URL
    ]
    advertised = server.rpc.replace("127.0.0.1", "localhost")  # for a Host not this listener
    assert card["capabilities"]["streaming"] is True
    assert card["capabilities"].get("extendedAgentCard", False) is False
    assert card["securitySchemes"] == {"bearer": {"httpAuthSecurityScheme": {"scheme": "bearer"}}}
    assert card["securityRequirements"] == [{"schemes": {"bearer": {}}}]
    assert card["defaultInputModes"] == ["text/plain", "application/json", "*/*"]
    assert card["defaultOutputModes"] == ["text/plain", "*/*"]  # attach_file returns any type
    assert card["skills"][0]["id"] == "general"
    forwarded = httpx.get(
        server.base + "/.well-known/agent-card.json",
        headers={"X-Forwarded-Proto": "https", "Host": "evil.example:1"},
    ).json()
    assert forwarded["supportedInterfaces"][0]["url"] == advertised


@pytest.mark.parametrize("authorization", [None, "Bearer wrong-token", f"Basic {TOKEN}", "Bearer"])
def test_requests_without_the_right_bearer_token_get_401(
    idle_server: A2AServer, authorization: Any
) -> None:
    server = idle_server
    headers = {"A2A-Version": "1.0"}
    if authorization:
        headers["Authorization"] = authorization
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
    response = httpx.post(server.rpc, json=body, headers=headers)
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert response.json()["error"]["code"] == -32000


def test_empty_token_refuses_to_serve_before_loading_the_sdk(
    env: dict[str, str], home: Path
) -> None:
    configure(home, token="")
    result = raven("a2a", "serve", "--port", "0", env={**env, "PYTHONPROFILEIMPORTTIME": "1"})
    assert result.returncode == 2 and "token is empty" in result.stderr
    imported = [line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines()]
    assert "raven.cli.a2a_cmd" in imported
    assert not [m for m in imported if m.split(".")[0] in ("a2a", "aiohttp")]


def test_no_model_refuses_to_serve_saying_how_to_configure_one(
    env: dict[str, str], home: Path
) -> None:
    write_config(home, {"a2a": {"server": {"token": TOKEN}}})
    result = raven("a2a", "serve", "--port", "0", env=env)
    assert result.returncode == 2 and "no model is configured" in result.stderr
    assert str(home / "config.json") in result.stderr and "OPENAI_API_KEY" in result.stderr


def test_subagents_refuse_to_serve(env: dict[str, str], home: Path) -> None:
    configure(home)
    result = raven("a2a", "serve", "--port", "0", env={**env, "RAVEN_SUBAGENT": "1"})
    assert result.returncode == 1 and "sub-agent" in result.stderr


def test_non_loopback_needs_allow_remote(env: dict[str, str], home: Path) -> None:
    configure(home)
    result = raven("a2a", "serve", "--host", "0.0.0.0", "--port", "0", env=env)
    assert result.returncode == 2 and "--allow-remote" in result.stderr


@pytest.mark.parametrize(
    "version, ok", [(None, False), ("0.3", False), ("2.0", False), ("1.0", True), ("1", True)]
)
def test_a2a_version_header_is_checked(idle_server: A2AServer, version: Any, ok: bool) -> None:
    server = idle_server
    response = server.post(
        {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}, version=version
    )
    body = response.json()
    if ok:
        assert "result" in body
    else:
        assert body["error"]["code"] == -32009


def test_bad_requests_get_the_sdk_errors(idle_server: A2AServer) -> None:
    server = idle_server
    assert server.post(None, raw=b"{nope").json()["error"]["code"] == -32700
    batch = server.post([{"jsonrpc": "2.0", "id": 1, "method": "ListTasks"}]).json()
    assert batch["error"]["code"] == -32600 and "Batch" in batch["error"]["message"]
    unknown = server.call("message/send", {})
    assert unknown["error"]["code"] == -32601
    invalid = server.call("GetTask", {"id": 5, "historyLength": "many"})
    assert invalid["error"]["code"] == -32602
    missing = server.call("SendMessage", {"message": {"messageId": "m", "parts": []}})
    assert missing["error"]["code"] == -32602
    bad_state = server.call("ListTasks", {"status": "TASK_STATE_NOPE"})
    assert bad_state["error"]["code"] == -32602
    not_found = server.call("GetTask", {"id": "no-such-task"})
    assert not_found["error"]["code"] == -32001
    big = server.post(
        message("x" * (1024 * 1024 + 10)) | {"jsonrpc": "2.0", "id": 1, "method": "SendMessage"}
    )
    assert big.status_code == 413 and big.json()["error"]["code"] == -32600
    assert "too large" in big.json()["error"]["message"]
    push = server.call("CreateTaskPushNotificationConfig", {"taskId": "t", "url": "http://x"})
    assert push["error"]["code"] == -32001  # no such task
    extended = server.call("GetExtendedAgentCard", {})
    assert extended["error"]["code"] == -32004  # UnsupportedOperationError, as the spec says
    deep = server.post(None, raw=b"[" * 100_000 + b"]" * 100_000)
    assert deep.status_code == 200 and deep.json()["error"]["code"] == -32700
    nested = b'{"a":' * 3000 + b"1" + b"}" * 3000
    deep_params = server.post(
        None, raw=b'{"jsonrpc":"2.0","id":3,"method":"GetTask","params":' + nested + b"}"
    )
    assert deep_params.json()["error"]["code"] == -32700
    for invalid in ({"jsonrpc": "aaa", "method": "GetTask"}, {"jsonrpc": "2.0", "params": {}}):
        answer = server.post(invalid)
        assert answer.status_code == 200, invalid
        assert answer.json()["error"]["code"] == -32600 and answer.json()["id"] is None
    assert server.call("ListTasks", {})["result"]["tasks"] == []


def test_answers_and_questions_leave_with_credentials_masked(serve: Any) -> None:
    key = "sk-live-" + "W9x" * 8
    server = serve(
        [
            asks(f"Should I use {key}?"),
            {"text": f"Used {key}; Authorization: Bearer {key[3:]} done", "wordDelayMs": 1},
        ]
    )
    parked = server.call("SendMessage", message("go"))["result"]["task"]
    assert parked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    follow_up = message("yes", taskId=parked["id"], contextId=parked["contextId"])
    done = server.call("SendMessage", follow_up)["result"]["task"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    fetched = server.call("GetTask", {"id": done["id"], "historyLength": 10})["result"]
    for seen in (json.dumps(parked), json.dumps(done), json.dumps(fetched)):
        assert key not in seen and key[3:] not in seen
    assert "Used [REDACTED]; Authorization: Bearer [REDACTED] done" in json.dumps(done)


async def test_send_get_list_with_the_sdk_client(serve: Any) -> None:
    server = serve([{"text": "Hello, peer."}])
    client, http = await sdk_client(server)
    try:
        (event,) = await last(client.send_message(SendMessageRequest(message=user("hi"))))
        task = event.task
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert get_message_text(task.status.message) == "Hello, peer."
        assert task.artifacts[0].parts[0].text == "Hello, peer."
        fetched = await client.get_task(GetTaskRequest(id=task.id, history_length=1))
        assert fetched.id == task.id and len(fetched.history) == 1
        listed = await client.list_tasks(ListTasksRequest(context_id=task.context_id))
        assert [t.id for t in listed.tasks] == [task.id]
        assert not listed.tasks[0].artifacts
    finally:
        await client.close()
        await http.aclose()


def shape(task: Any) -> dict[str, Any]:
    """What a binding must agree on of a task: its state, answer, artifacts and history."""
    return {
        "state": TaskState.Name(task.status.state),
        "answer": get_message_text(task.status.message) if task.status.HasField("message") else "",
        "artifacts": [[p.text for p in a.parts] for a in task.artifacts],
        "history": [(Role.Name(m.role), get_message_text(m)) for m in task.history],
    }


async def scenario(server: A2AServer, binding: str) -> dict[str, Any]:
    """Send, get, list, stream, subscribe, input-required and cancel, on one binding."""
    client, http = await sdk_client(server, streaming=False, binding=binding)
    streamer, http2 = await sdk_client(server, streaming=True, binding=binding)
    return await sdk_scenario(client, http, streamer, http2)


async def sdk_scenario(client: Any, http: Any, streamer: Any, http2: Any) -> dict[str, Any]:
    """The scenario, by the SDK's clients (one streaming), each closed with its HTTP client
    after; what each step saw. `SCENARIO_SCRIPT` plays the agent."""
    seen: dict[str, Any] = {}
    try:
        (sent,) = await last(client.send_message(SendMessageRequest(message=user("one"))))
        task = sent.task
        seen["send"] = shape(task)
        fetched = await client.get_task(GetTaskRequest(id=task.id, history_length=1))
        seen["get"] = shape(fetched)
        listed = await client.list_tasks(ListTasksRequest(context_id=task.context_id))
        seen["list"] = [t.id == task.id for t in listed.tasks]
        events = await last(streamer.send_message(SendMessageRequest(message=user("two"))))
        seen["stream"] = [e.WhichOneof("payload") for e in events][:2]
        final = [e for e in events if e.HasField("status_update")][-1].status_update
        seen["streamed"] = get_message_text(final.status.message)
        (parked,) = await last(client.send_message(SendMessageRequest(message=user("three"))))
        seen["asked"] = shape(parked.task)
        stream = streamer.subscribe(SubscribeToTaskRequest(id=parked.task.id))
        first = await anext(stream)
        answer = user("dev", task_id=parked.task.id, context_id=parked.task.context_id)
        (done,) = await last(client.send_message(SendMessageRequest(message=answer)))
        rest = [u async for u in stream]
        states = [u.status_update.status.state for u in rest if u.HasField("status_update")]
        seen["subscribed"] = [TaskState.Name(s) for s in (first.task.status.state, states[-1])]
        seen["answered"] = shape(done.task)
        slow = SendMessageRequest(message=user("four"))
        slow.configuration.return_immediately = True
        (started,) = await last(client.send_message(slow))
        cancelled = await client.cancel_task(CancelTaskRequest(id=started.task.id))
        seen["cancel"] = TaskState.Name(cancelled.status.state)
        with pytest.raises(Exception, match=r"not found|NOT_FOUND|-32001") as missing:
            await client.get_task(GetTaskRequest(id="no-such-task"))
        seen["missing"] = type(missing.value).__name__
    finally:
        for each in (client, streamer):
            await each.close()
        await http.aclose()
        await http2.aclose()
    return seen


SCENARIO_SCRIPT = [
    {"text": "Hello, peer."},
    {"text": "Streamed."},
    asks("Which branch?"),
    {"text": "Deployed on dev."},
    {"text": "never", "delayMs": 30_000},
]
"""The agent's side of `sdk_scenario`, once."""


async def test_every_binding_runs_the_same_scenario_to_the_same_tasks(serve: Any) -> None:
    # One server, the script once a binding.
    server = serve(SCENARIO_SCRIPT * 3, grpc_port=free_port())
    results = {}
    for binding in (*BINDINGS, "GRPC"):
        results[binding] = await scenario(server, binding)
    rpc, rest, over_grpc = results["JSONRPC"], results["HTTP+JSON"], results["GRPC"]
    assert rpc == rest == over_grpc
    check_scenario(rpc)


def check_scenario(rpc: dict[str, Any]) -> None:
    """What every binding's run of `sdk_scenario` saw."""
    assert (
        rpc["send"]["state"] == "TASK_STATE_COMPLETED" and rpc["send"]["answer"] == "Hello, peer."
    )
    assert rpc["get"]["history"] == [("ROLE_USER", "one")]  # historyLength 1
    assert rpc["list"] == [True] and rpc["streamed"] == "Streamed."
    assert rpc["stream"][0] == "task"
    assert rpc["asked"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert rpc["subscribed"] == ["TASK_STATE_INPUT_REQUIRED", "TASK_STATE_COMPLETED"]
    assert rpc["answered"]["answer"] == "Deployed on dev."
    assert rpc["cancel"] == "TASK_STATE_CANCELED"


async def test_the_grpc_binding_wants_the_token_and_is_on_the_card(serve: Any) -> None:
    port = free_port()
    server = serve([{"text": "ok"}], grpc_port=port)
    card = httpx.get(server.base + "/.well-known/agent-card.json").json()
    assert card["supportedInterfaces"][-1] == {
        "url": f"127.0.0.1:{port}",
        "protocolBinding": "GRPC",
        "protocolVersion": "1.0",
    }
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        for metadata in ((), (("authorization", "Bearer wrong"),)):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.GetTask(GetTaskRequest(id="x"), metadata=metadata)
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        good = (("authorization", f"Bearer {server.token}"), ("a2a-version", "1.0"))
        with pytest.raises(grpc.aio.AioRpcError) as missing:
            await stub.GetTask(GetTaskRequest(id="no-such-task"), metadata=good)
        assert missing.value.code() == grpc.StatusCode.NOT_FOUND
        old = (("authorization", f"Bearer {server.token}"), ("a2a-version", "0.2"))
        with pytest.raises(grpc.aio.AioRpcError) as refused_version:
            await stub.ListTasks(ListTasksRequest(), metadata=old)
        assert refused_version.value.code() == grpc.StatusCode.UNIMPLEMENTED  # A2A 1.0 table
        with pytest.raises(grpc.aio.AioRpcError) as no_card:
            await stub.GetExtendedAgentCard(GetExtendedAgentCardRequest(), metadata=good)
        assert no_card.value.code() == grpc.StatusCode.UNIMPLEMENTED  # none configured
        # Bytes that are no message of the method's type: the peer is told so, and nothing
        # of Raven's (a Python class name) reaches it; the server goes on serving.
        sent = SendMessageRequest(message=Message(message_id="m", role=Role.ROLE_USER))
        sent.message.parts.add().text = "hi"
        whole = sent.SerializeToString()
        nested = Value()
        inner = nested
        for _ in range(150):
            inner = inner.list_value.values.add()
        deep = SendMessageRequest()
        deep.CopyFrom(sent)
        deep.message.parts.add().data.CopyFrom(nested)
        for raw in (b"\xff\xff\xff garbage", whole[: len(whole) // 2], b"\x0a\x03\x08\x01"):
            call = channel.unary_unary("/lf.a2a.v1.A2AService/SendMessage")
            with pytest.raises(grpc.aio.AioRpcError) as bad:
                await call(raw, metadata=good)
            assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT, bad.value
            assert "class" not in (bad.value.details() or "") and "Error" not in (
                bad.value.details() or ""
            )
        with pytest.raises(grpc.aio.AioRpcError) as too_deep:
            await stub.SendMessage(deep, metadata=good)
        assert too_deep.value.code() == grpc.StatusCode.INVALID_ARGUMENT, too_deep.value
        answered = await stub.SendMessage(sent, metadata=good)
        assert answered.task.status.state == TaskState.TASK_STATE_COMPLETED


def test_the_rest_binding_answers_errors_as_it_specifies(serve: Any) -> None:
    server = serve([{"text": "ok"}])
    rest = server.rpc.rstrip("/")
    good = {"Authorization": f"Bearer {server.token}", "A2A-Version": "1.0"}
    unauthorized = httpx.get(f"{rest}/tasks/x", headers={"A2A-Version": "1.0"})
    assert unauthorized.status_code == 401 and unauthorized.headers["WWW-Authenticate"]
    assert unauthorized.json()["error"]["status"] == "UNAUTHENTICATED"
    missing = httpx.get(f"{rest}/tasks/no-such-task", headers=good)
    assert missing.status_code == 404, missing.text
    assert missing.headers["content-type"].startswith("application/json")
    error = missing.json()["error"]
    assert error["status"] == "NOT_FOUND" and error["details"][0]["reason"] == "TASK_NOT_FOUND"
    garbled = httpx.post(f"{rest}/message:send", content=b"{not json", headers=good)
    assert garbled.status_code == 400 and garbled.json()["error"]["status"] == "INVALID_ARGUMENT"
    empty = {"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}}
    refused = httpx.post(f"{rest}/message:send", json=empty, headers=good)
    assert refused.status_code == 400, refused.text
    old = httpx.get(f"{rest}/tasks", headers={**good, "A2A-Version": "0.2"})
    assert old.json()["error"]["details"][0]["reason"] == "VERSION_NOT_SUPPORTED"
    push = httpx.get(f"{rest}/tasks/t1/pushNotificationConfigs", headers=good)
    assert (
        push.status_code == 404 and push.json()["error"]["details"][0]["reason"] == "TASK_NOT_FOUND"
    )
    sent = httpx.post(f"{rest}/message:send", json=message("hi"), headers=good)
    assert (
        sent.status_code == 200 and sent.json()["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    )
    listed = httpx.get(f"{rest}/tasks", params={"pageSize": "5"}, headers=good).json()
    assert listed["pageSize"] == 1 and listed["tasks"][0]["id"] == sent.json()["task"]["id"]
    # Where the spec's table and the SDK's mapping differ, the spec's status.
    done = sent.json()["task"]["id"]
    cancel = httpx.post(f"{rest}/tasks/{done}:cancel", headers=good)
    assert cancel.status_code == 409, cancel.text
    assert cancel.json()["error"]["details"][0]["reason"] == "TASK_NOT_CANCELABLE"
    assert cancel.json()["error"]["code"] == 409
    as_text = {**good, "Content-Type": "text/plain"}
    text = httpx.post(f"{rest}/message:send", content=json.dumps(message("hi")), headers=as_text)
    assert text.status_code == 415, text.text
    assert text.json()["error"]["details"][0]["reason"] == "CONTENT_TYPE_NOT_SUPPORTED"
    bogus = httpx.get(f"{rest}/tasks", params={"status": "TASK_STATE_BOGUS"}, headers=good)
    assert bogus.status_code == 400 and bogus.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert "TASK_STATE_BOGUS" in bogus.json()["error"]["message"]
    card = httpx.get(f"{rest}/extendedAgentCard", headers=good)
    assert card.status_code == 400  # none configured: an unsupported operation, as the spec says
    assert card.json()["error"]["details"][0]["reason"] == "UNSUPPORTED_OPERATION"


async def test_streaming_frames_follow_the_task_lifecycle(serve: Any) -> None:
    server = serve([{"text": "streamed answer"}])
    body = {
        "jsonrpc": "2.0",
        "id": "s1",
        "method": "SendStreamingMessage",
        "params": message("stream please"),
    }
    headers = {"Authorization": f"Bearer {server.token}", "A2A-Version": "1.0"}
    events = []
    async with (
        httpx.AsyncClient(timeout=30) as http,
        http.stream("POST", server.rpc, json=body, headers=headers) as response,
    ):
        assert response.headers["content-type"].startswith("text/event-stream")
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                envelope = json.loads(line[6:])
                assert envelope["jsonrpc"] == "2.0" and envelope["id"] == "s1"
                events.append(envelope["result"])
    kinds = [next(iter(e)) for e in events]
    assert kinds[0] == "task" and events[0]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
    states = [e["statusUpdate"]["status"]["state"] for e in events if "statusUpdate" in e]
    assert states[0] == "TASK_STATE_WORKING" and states[-1] == "TASK_STATE_COMPLETED"
    artifacts = [e["artifactUpdate"]["artifact"] for e in events if "artifactUpdate" in e]
    assert artifacts[0]["parts"][0]["text"] == "streamed answer"


async def test_subscribe_follows_a_running_task_with_the_sdk_client(serve: Any) -> None:
    server = serve([asks("Go?"), {"text": "done"}])
    task = await held(server, "go")  # running until answered, however slow the machine
    client, http = await sdk_client(server, streaming=True)
    try:
        updates = []
        async for update in client.subscribe(SubscribeToTaskRequest(id=task["id"])):
            updates.append(update)
            if len(updates) == 1:  # subscribed: now the task may go on to its end
                await asyncio.to_thread(release, server, task)
        assert updates[0].HasField("task")
        final = [u for u in updates if u.HasField("status_update")][-1]
        assert final.status_update.status.state == TaskState.TASK_STATE_COMPLETED
    finally:
        await client.close()
        await http.aclose()


async def test_subscribe_to_a_task_waiting_for_input_stays_open_until_it_ends(
    serve: Any,
) -> None:
    server = serve([asks("Which branch?"), {"text": "Deployed on dev."}])
    parked = server.call("SendMessage", message("deploy"))["result"]["task"]
    assert parked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    client, http = await sdk_client(server, streaming=True)
    try:
        stream = client.subscribe(SubscribeToTaskRequest(id=parked["id"]))
        first = await anext(stream)  # the task as it is: waiting for input
        assert first.task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        answer = message("dev", taskId=parked["id"]) | {
            "configuration": {"returnImmediately": True}
        }
        answered = asyncio.create_task(asyncio.to_thread(server.call, "SendMessage", answer))
        rest = [update async for update in stream]  # the follow-up's events, on this stream
        await answered
    finally:
        await client.close()
        await http.aclose()
    states = [u.status_update.status.state for u in rest if u.HasField("status_update")]
    assert states[0] == TaskState.TASK_STATE_WORKING
    assert states[-1] == TaskState.TASK_STATE_COMPLETED
    final = [u for u in rest if u.HasField("status_update")][-1]
    assert get_message_text(final.status_update.status.message) == "Deployed on dev."


async def test_streaming_with_the_sdk_client(serve: Any) -> None:
    server = serve([{"text": "streamed by sdk"}])
    client, http = await sdk_client(server, streaming=True)
    try:
        events = await last(client.send_message(SendMessageRequest(message=user("go"))))
        assert events[0].HasField("task")
        final = [e for e in events if e.HasField("status_update")][-1]
        assert final.status_update.status.state == TaskState.TASK_STATE_COMPLETED
        assert get_message_text(final.status_update.status.message) == "streamed by sdk"
    finally:
        await client.close()
        await http.aclose()


async def test_a_slow_answer_streams_as_artifact_chunks(serve: Any) -> None:
    words = " ".join(f"word{i}" for i in range(12))
    server = serve([{"text": words, "wordDelayMs": 100}])
    client, http = await sdk_client(server, streaming=True)
    try:
        events = await last(client.send_message(SendMessageRequest(message=user("go"))))
        chunks = [e.artifact_update for e in events if e.HasField("artifact_update")]
        final = [e for e in events if e.HasField("status_update")][-1]
        task = await client.get_task(GetTaskRequest(id=final.status_update.task_id))
    finally:
        await client.close()
        await http.aclose()
    assert 3 <= len(chunks) <= 8, len(chunks)
    assert len({c.artifact.artifact_id for c in chunks}) == 1
    assert [c.append for c in chunks] == [False] + [True] * (len(chunks) - 1)
    assert chunks[-1].last_chunk and not any(c.last_chunk for c in chunks[:-1])
    assert "".join(p.text for c in chunks for p in c.artifact.parts) == words
    assert get_message_text(final.status_update.status.message) == words
    (artifact,) = task.artifacts
    assert "".join(p.text for p in artifact.parts) == words


async def test_input_required_round_trip_by_task_id(serve: Any) -> None:
    server = serve(
        [
            {
                "toolCalls": [
                    {
                        "name": "ask_user",
                        "arguments": {"question": "Which file?", "choices": ["a", "b"]},
                    }
                ]
            },
            {"text": "Thanks, done."},
        ]
    )
    client, http = await sdk_client(server)
    try:
        (event,) = await last(client.send_message(SendMessageRequest(message=user("edit"))))
        task = event.task
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert "Which file?" in get_message_text(task.status.message)
        assert "a; b" in get_message_text(task.status.message)
        (answer,) = await last(
            client.send_message(SendMessageRequest(message=user("b", task_id=task.id)))
        )
        assert answer.task.status.state == TaskState.TASK_STATE_COMPLETED
        assert get_message_text(answer.task.status.message) == "Thanks, done."
        done = server.call("SendMessage", message("again", taskId=task.id))
        assert done["error"]["code"] == -32004
    finally:
        await client.close()
        await http.aclose()


async def test_approvals_ask_through_input_required(serve: Any, home: Path) -> None:
    target = home / "data" / "a2a-work" / "approved.txt"
    server = serve(
        [
            {
                "toolCalls": [
                    {"name": "write_file", "arguments": {"path": "approved.txt", "content": "ok"}}
                ]
            },
            {"text": "written"},
        ],
        approvals="ask",
    )
    first = server.call("SendMessage", message("write"))["result"]["task"]
    assert first["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    asked = first["status"]["message"]["parts"][0]["text"]
    assert "Allow Write approved.txt?" in asked and "+ok" in asked  # and what it will write
    second = server.call("SendMessage", message("yes", taskId=first["id"]))["result"]["task"]
    assert second["status"]["state"] == "TASK_STATE_COMPLETED"
    assert target.read_text() == "ok"


async def test_cancel_task_kills_a_running_command(serve: Any, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    server = serve(
        [
            {
                "toolCalls": [
                    {
                        "name": "run_command",
                        "arguments": {"command": f"sleep 60 & echo $! > {pidfile}; wait"},
                    }
                ]
            }
        ],
        approvals="auto",
    )
    params = message("sleep") | {"configuration": {"returnImmediately": True}}
    task = server.call("SendMessage", params)["result"]["task"]
    pid = await pid_from(pidfile)
    cancelled = server.call("CancelTask", {"id": task["id"]})["result"]
    assert cancelled["status"]["state"] == "TASK_STATE_CANCELED"
    assert await ended([pid], 5)  # killed with its group: gone a moment after
    again = server.call("CancelTask", {"id": task["id"]})
    assert again["error"]["code"] == -32002


async def test_context_id_continues_one_session(serve: Any, home: Path) -> None:
    server = serve()
    first = server.call("SendMessage", message("first words"))["result"]["task"]
    second = server.call("SendMessage", message("second words", contextId=first["contextId"]))[
        "result"
    ]["task"]
    assert second["contextId"] == first["contextId"] and second["id"] != first["id"]
    other = server.call("SendMessage", message("elsewhere"))["result"]["task"]
    store = SqliteStore(home / "data" / "raven.db")
    sessions = store.page().sessions
    texts = {s.id: [getattr(m, "text", "") for m in store.messages(s.id)] for s in sessions}
    store.close()
    assert len(sessions) == 2
    assert ["first words", "first words", "second words", "second words"] in texts.values()
    assert other["contextId"] != first["contextId"]


async def test_extended_card_carries_the_roster_as_reference(serve: Any) -> None:
    server = serve(
        agents=[{"name": "codex", "description": "Codex via ACP", "command": "codex-acp"}]
    )
    card = httpx.get(server.base + "/.well-known/agent-card.json").json()
    assert card["capabilities"]["extendedAgentCard"] is True
    assert "codex" not in json.dumps(card)
    client, http = await sdk_client(server)
    try:
        extended = await client.get_extended_agent_card(GetExtendedAgentCardRequest())
        by_uri = {e.uri: e for e in extended.capabilities.extensions}
        extension = by_uri["urn:raven:a2a:subagents:v1"]
        assert extension.params["agents"][0]["name"] == "codex"
        assert extension.params["callable"] is False
        # Both cards say what Raven's commands run in.
        sandbox = by_uri["urn:raven:a2a:sandbox:v1"].params
        assert (sandbox["level"], sandbox["enforced"]) == ("off", True)
        (public,) = card["capabilities"]["extensions"]
        assert public["uri"] == "urn:raven:a2a:sandbox:v1"
    finally:
        await client.close()
        await http.aclose()


async def test_twenty_concurrent_tasks(serve: Any) -> None:
    server = serve(max_concurrent_tasks=4)
    async with httpx.AsyncClient(timeout=60) as http:
        headers = {"Authorization": f"Bearer {server.token}", "A2A-Version": "1.0"}

        async def one(i: int) -> dict[str, Any]:
            body = {
                "jsonrpc": "2.0",
                "id": i,
                "method": "SendMessage",
                "params": message(f"task number {i}"),
            }
            return (await http.post(server.rpc, json=body, headers=headers)).json()

        results = await asyncio.gather(*(one(i) for i in range(20)))
    for i, result in enumerate(results):
        task = result["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert task["status"]["message"]["parts"][0]["text"] == f"task number {i}"


async def test_sqlite_store_survives_a_restart_with_a_parked_task(
    env: dict[str, str], home: Path
) -> None:
    configure(
        home,
        [
            asks("Colour?"),
        ],
        task_store="sqlite",
    )
    server = start(env)
    try:
        task = server.call("SendMessage", message("paint"))["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    finally:
        assert server.stop() == 0
    (home / "script.json").write_text(json.dumps([{"text": "Blue it is."}]))
    server = start(env)
    try:
        fetched = server.call("GetTask", {"id": task["id"]})["result"]
        assert fetched["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        answered = server.call("SendMessage", message("blue", taskId=task["id"]))["result"]
        assert answered["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        assert answered["task"]["status"]["message"]["parts"][0]["text"] == "Blue it is."
        assert answered["task"]["contextId"] == task["contextId"]
    finally:
        assert server.stop() == 0


OLD_TASK_FILE = """
CREATE TABLE tasks (id VARCHAR(36) NOT NULL, context_id VARCHAR(36) NOT NULL,
    kind VARCHAR(16) NOT NULL, owner VARCHAR(255), last_updated DATETIME,
    status JSON NOT NULL, artifacts JSON, history JSON, protocol_version VARCHAR(16),
    metadata JSON, PRIMARY KEY (id));
CREATE TABLE task_versions (task_id VARCHAR(36) NOT NULL, owner VARCHAR(255),
    version BIGINT NOT NULL, PRIMARY KEY (task_id));
CREATE TABLE push_notification_configs (task_id VARCHAR(36) NOT NULL,
    config_id VARCHAR(255) NOT NULL, config_data BLOB NOT NULL, owner VARCHAR(255),
    protocol_version VARCHAR(16), PRIMARY KEY (task_id, config_id));
INSERT INTO tasks VALUES ('t1', 'c1', 'task', 'operator', '2026-01-01 00:00:00.000000',
    '{"state": "TASK_STATE_INPUT_REQUIRED", "message": {"messageId": "m2", "role":
    "ROLE_AGENT", "parts": [{"text": "Colour?"}]}, "timestamp": "2026-01-01T00:00:00Z"}',
    '[{"artifactId": "a", "name": "response", "parts": [{"text": "partial"}]}]',
    '[{"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "paint"}]}]',
    '1.0', 'null');
INSERT INTO task_versions VALUES ('t1', 'operator', 3);
INSERT INTO push_notification_configs VALUES ('t1', 'hook',
    CAST('{"id": "hook", "taskId": "t1", "url": "https://example.com/hook", "token": "tok"}'
    AS BLOB), 'operator', '1.0');
"""
"""The SDK's tables as `taskStore: "sqlite"` left them in `a2a-tasks.db` (a2a-sdk 1.3)."""


async def test_tasks_an_earlier_raven_kept_in_their_own_file_move_beside_the_sessions(
    env: dict[str, str], home: Path
) -> None:
    configure(home, [{"text": "Blue it is."}], task_store="sqlite")
    old = home / "data" / "a2a-tasks.db"
    old.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(old) as db:
        db.executescript(OLD_TASK_FILE)
    server = start(env)
    try:
        task = server.call("GetTask", {"id": "t1", "historyLength": 10})["result"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert task["status"]["message"]["parts"][0]["text"] == "Colour?"
        assert task["history"][0]["parts"][0]["text"] == "paint"
        assert task["artifacts"][0]["parts"][0]["text"] == "partial"
        hooks = server.call("ListTaskPushNotificationConfigs", {"taskId": "t1"})["result"]
        assert [c["url"] for c in hooks["configs"]] == ["https://example.com/hook"]
        answered = server.call("SendMessage", message("blue", taskId="t1"))["result"]["task"]
        assert answered["status"]["state"] == "TASK_STATE_COMPLETED"
        assert answered["status"]["message"]["parts"][0]["text"] == "Blue it is."
    finally:
        assert server.stop() == 0
    assert not old.exists() and old.with_name("a2a-tasks.db.moved").exists()
    server = start(env)  # nothing to move the second time; the task is where it went
    try:
        kept = server.call("GetTask", {"id": "t1"})["result"]
        assert kept["status"]["state"] == "TASK_STATE_COMPLETED"
    finally:
        assert server.stop() == 0


async def test_a_task_left_working_by_a_killed_server_ends_failed_on_restart(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    pidfile = tmp_path / "command.pid"
    command = {"name": "run_command", "arguments": {"command": f"echo $$ > {pidfile}; sleep 300"}}
    configure(home, [{"toolCalls": [command]}], task_store="sqlite", approvals="auto")
    server = start(env)
    try:
        body = message("work") | {"configuration": {"returnImmediately": True}}
        task = server.call("SendMessage", body)["result"]["task"]
        await pid_from(pidfile)
        working = await reaches(server, task["id"], "TASK_STATE_WORKING")
        assert "metadata" not in working  # peers learn nothing of who runs it
        database = home / "data" / "raven.db"  # tasks live beside the sessions
        assert stat.S_IMODE(database.stat().st_mode) == 0o600
        with sqlite3.connect(database) as db:
            ((holder,),) = db.execute(
                "SELECT holder FROM tasks WHERE id = ?", (task["id"],)
            ).fetchall()
        assert holder == server.proc.pid  # the process running its turn holds it
        assert not (home / "data" / "a2a-tasks.db").exists()
    finally:
        server.proc.kill()
        server.stop()
    server = start(env)
    try:
        fetched = server.call("GetTask", {"id": task["id"]})["result"]
        assert fetched["status"]["state"] == "TASK_STATE_FAILED"
        text = fetched["status"]["message"]["parts"][0]["text"]
        assert text == "Raven stopped before this task finished; send it again."
        async with asyncio.timeout(15):  # a subscriber is told at once, not left waiting
            subscribed = await asyncio.to_thread(server.call, "SubscribeToTask", {"id": task["id"]})
        assert "error" in subscribed or "TASK_STATE_FAILED" in json.dumps(subscribed)
    finally:
        assert server.stop() == 0


def test_the_token_never_reaches_a_log(serve: Any, home: Path) -> None:
    server = serve()
    server.call("SendMessage", message("hello"))
    server.post(
        {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}},
        token="wrong-" + TOKEN,
    )
    server.stop()
    logs = "".join(p.read_text() for p in (home / "logs").glob("*.log*"))
    assert logs and TOKEN not in logs


def test_a2a_commands_manage_the_config(env: dict[str, str], home: Path) -> None:
    enabled = raven("a2a", "enable", env=env)
    assert enabled.returncode == 0 and "No gateway is running" in enabled.stdout
    token = json.loads((home / "config.json").read_text())["a2a"]["server"]["token"]
    assert len(token) >= 43 and token in enabled.stdout
    again = raven("a2a", "enable", env=env)
    assert token not in again.stdout
    status = raven("a2a", "status", env=env).stdout
    assert "enabled:    yes" in status and token not in status and "token:      set" in status
    assert token in raven("a2a", "status", "--show-token", env=env).stdout
    raven("a2a", "disable", env=env)
    config = json.loads((home / "config.json").read_text())["a2a"]["server"]
    assert config["token"] == token and config.get("enabled", False) is False
    card = json.loads(raven("a2a", "card", env=env).stdout)
    assert card["name"] == "Raven"


async def test_an_unanswered_question_times_out_and_the_turn_goes_on(serve: Any) -> None:
    server = serve(
        [
            asks("Anyone there?"),
            {"text": "Carrying on without an answer."},
        ],
        input_timeout_s=0.5,
    )
    task = server.call("SendMessage", message("ask"))["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    fetched = await reaches(server, task["id"], "TASK_STATE_COMPLETED")
    assert fetched["status"]["message"]["parts"][0]["text"] == "Carrying on without an answer."
    assert any("no answer" in p.get("text", "") for m in fetched["history"] for p in m["parts"])


async def test_a_full_queue_rejects_new_tasks_clearly(serve: Any) -> None:
    server = serve(
        [{"text": "busy", "delayMs": 60_000}], max_concurrent_tasks=1, max_queued_tasks=0
    )
    params = message("first") | {"configuration": {"returnImmediately": True}}
    first = server.call("SendMessage", params)["result"]["task"]
    await reaches(server, first["id"], "TASK_STATE_WORKING")  # and stays so: a minute
    second = server.call("SendMessage", message("second"))["result"]["task"]
    assert second["status"]["state"] == "TASK_STATE_REJECTED"
    assert "busy" in second["status"]["message"]["parts"][0]["text"]
    canceled = server.call("CancelTask", {"id": first["id"]})["result"]
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"


async def test_replicas_started_together_on_an_empty_database_all_serve(
    env: dict[str, str], tmp_path: Path, postgres_server_url: str
) -> None:
    """An orchestrator starts every replica at once: each creates what it needs of the
    schema, under one lock, and serves (before, one could crash on a CREATE TABLE race)."""
    from tests.postgres import fresh_database

    homes = [tmp_path / f"replica-{n}" for n in range(3)]
    for home in homes:
        home.mkdir()
        configure(home, [{"text": "hello"}], task_store="sessions")
    for _ in range(2):
        with fresh_database(postgres_server_url) as url:
            for home in homes:
                config = json.loads((home / "config.json").read_text())
                write_config(home, {**config, "sessions": {"url": url}})
            envs = [{**env, "RAVEN_HOME": str(home)} for home in homes]
            started = await asyncio.gather(
                *(asyncio.to_thread(start, e) for e in envs), return_exceptions=True
            )
            replicas = [r for r in started if isinstance(r, A2AServer)]
            try:
                assert len(replicas) == 3, started
                tasks = [r.call("SendMessage", message("hi"))["result"]["task"] for r in replicas]
                assert [t["status"]["state"] for t in tasks] == ["TASK_STATE_COMPLETED"] * 3
                listed = replicas[0].call("ListTasks", {})["result"]
                assert {t["id"] for t in listed["tasks"]} == {t["id"] for t in tasks}
                assert listed["totalSize"] == 3
            finally:
                for replica in replicas:
                    assert replica.stop() == 0


async def test_replicas_on_postgresql_reach_the_running_turn_and_never_change_an_end(
    env: dict[str, str], tmp_path: Path, receiver: Receiver, pg_url: str
) -> None:
    homes = [tmp_path / "replica-a", tmp_path / "replica-b"]
    pidfile, tidy_gate = tmp_path / "command.pid", tmp_path / "tidy-gate"
    sleeper = {"name": "run_command", "arguments": {"command": f"echo $$ > {pidfile}; sleep 300"}}
    scripts = [
        [
            asks("Which branch?"),
            {"text": "Deployed main."},
            {"text": "never told", "delayMs": 5000},
            {"text": "after the cancelled one"},
            # B relays the follow-up through the store, which tells A (NOTIFY); the step
            # waits until A has taken it.
            {"toolCalls": [{"name": "list_dir", "arguments": {}}], "waitFor": str(tidy_gate)},
            {"text": "tidied, the tests too"},
            {"toolCalls": [sleeper]},
        ],
        [{"text": "replica b never runs these turns"}],
    ]
    for home, steps in zip(homes, scripts, strict=True):
        home.mkdir()
        configure(
            home,
            steps,
            task_store="sessions",
            approvals="auto",
            push={"allowPrivate": ["127.0.0.1"]},
        )
        config = json.loads((home / "config.json").read_text())
        write_config(home, {**config, "sessions": {"url": pg_url, "leaseS": 2}})
    replicas = [start({**env, "RAVEN_HOME": str(home)}) for home in homes]
    a, b = replicas
    try:
        # A question parked on A and answered through B reaches A's turn, which answers.
        task = a.call("SendMessage", message("deploy"))["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        seen = b.call("GetTask", {"id": task["id"]})["result"]
        assert seen["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert [t["id"] for t in b.call("ListTasks", {})["result"]["tasks"]] == [task["id"]]
        hook = {"taskId": task["id"], "id": "hook", "url": receiver.url("/ok"), "token": "t"}
        assert b.call("CreateTaskPushNotificationConfig", hook)["result"]["id"] == "hook"
        client, http = await sdk_client(b, streaming=True)
        try:
            watched = client.subscribe(SubscribeToTaskRequest(id=task["id"]))
            first = await anext(watched)  # B follows a task A runs, from the snapshot on
            assert first.task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            reply = b.call("SendMessage", message("main", taskId=task["id"]))["result"]
            assert reply["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
            assert "answered by a person" not in json.dumps(reply)  # the peer did
            assert reply["task"]["status"]["message"]["parts"][0]["text"] == "Deployed main."
            states = [u.status_update.status.state async for u in watched if u.status_update]
            assert states[-1] == TaskState.TASK_STATE_COMPLETED
            assert TaskState.TASK_STATE_WORKING in states
        finally:
            await http.aclose()
        final = a.call("GetTask", {"id": task["id"]})["result"]
        assert final["status"]["message"]["parts"][0]["text"] == "Deployed main."
        # A's turn pushed its updates to the config made through B.
        told = await receiver.until("/ok", lambda hits: "COMPLETED" in pushed_states(hits))
        assert pushed_states(told)[0] == "WORKING" and all(h.signed_with("t") for h in told)

        # Cancelled through B while it runs on A: A's turn stops and never overwrites it.
        slow = a.call("SendMessage", message("slow") | IMMEDIATELY)["result"]["task"]
        await reaches(a, slow["id"], "TASK_STATE_WORKING")
        cancelled = b.call("CancelTask", {"id": slow["id"]})["result"]
        assert cancelled["status"]["state"] == "TASK_STATE_CANCELED"
        after = message("next", contextId=slow["contextId"])  # runs once that turn is over
        nxt = a.call("SendMessage", after)["result"]["task"]
        assert nxt["status"]["message"]["parts"][0]["text"] == "after the cancelled one"
        for replica in replicas:
            kept = replica.call("GetTask", {"id": slow["id"]})["result"]
            assert kept["status"]["state"] == "TASK_STATE_CANCELED"
            assert "never told" not in json.dumps(kept)

        # A follow-up through B to the task working on A steers A's turn.
        tidy = a.call("SendMessage", message("tidy up") | IMMEDIATELY)["result"]["task"]
        await reaches(a, tidy["id"], "TASK_STATE_WORKING")
        steer = message("check the tests too", taskId=tidy["id"])
        steered = b.call("SendMessage", steer | IMMEDIATELY)
        assert steered["result"]["task"]["status"]["state"] == "TASK_STATE_WORKING", steered
        await inbox_taken(pg_url)  # A's turn holds the steer for its next model call
        tidy_gate.touch()
        tidied = await reaches(b, tidy["id"], "TASK_STATE_COMPLETED")
        assert tidied["status"]["message"]["parts"][0]["text"] == "tidied, the tests too"
        said = await user_messages(pg_url)
        assert "check the tests too" in said  # the model saw it, in the conversation

        # A killed mid-turn: B ends the task failed (A, of this machine, is gone).
        left = a.call("SendMessage", message("work") | IMMEDIATELY)["result"]["task"]
        await pid_from(pidfile)
        watch = {"taskId": left["id"], "id": "watch", "url": receiver.url("/left")}
        assert "result" in b.call("CreateTaskPushNotificationConfig", watch)
        a.proc.kill()
        failed = await reaches(b, left["id"], "TASK_STATE_FAILED")
        text = failed["status"]["message"]["parts"][0]["text"]
        assert text == "Raven stopped before this task finished; send it again."
        # B, which ended it, told the webhook.
        await receiver.until("/left", lambda hits: pushed_states(hits) == ["FAILED"])
    finally:
        if pidfile.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pidfile.read_text()), 9)
        a.stop()
        assert b.stop() == 0


IMMEDIATELY = {"configuration": {"returnImmediately": True}}


async def inbox_taken(url: str) -> None:
    """Once every session's inbox in the PostgreSQL store is empty: the replicas running
    the turns took what was sent to them."""
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        async with asyncio.timeout(30):
            while await conn.fetchval("SELECT count(*) FROM raven_session_inbox"):
                await asyncio.sleep(0.05)
    finally:
        await conn.close()


async def user_messages(url: str) -> list[str]:
    """The text of every person's message kept in the PostgreSQL session store."""
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch("SELECT body FROM raven_messages")
    finally:
        await conn.close()
    messages = [json.loads(r["body"]) for r in rows]
    return [p["text"] for m in messages if m["role"] == "user" for p in m["parts"] if "text" in p]


def transcript(home: Path) -> list[tuple[str, str]]:
    """(role, text) of the one A2A session's messages, in order."""
    store = SqliteStore(home / "data" / "raven.db")
    try:
        (record,) = [r for r in store.page().sessions if r.face == "a2a"]
        messages = store.messages(record.id)
    finally:
        store.close()
    return [(m.role, getattr(m, "text", "")) for m in messages if m.role != "tool"]


async def held(server: A2AServer, text: str) -> dict[str, Any]:
    """A task that holds its conversation until `release` (its model asks a question the
    test answers): what queues behind it stays queued however slow the machine is, where a
    model that merely took its time could end first."""
    first = server.call("SendMessage", message(text) | IMMEDIATELY)["result"]["task"]
    return await reaches(server, first["id"], "TASK_STATE_INPUT_REQUIRED")


def release(server: A2AServer, task: dict[str, Any]) -> None:
    answer = message("go on", taskId=task["id"], contextId=task["contextId"])
    assert "result" in server.call("SendMessage", answer | IMMEDIATELY)


async def test_tasks_of_a_busy_conversation_queue_and_run_in_arrival_order(
    serve: Any, home: Path
) -> None:
    server = serve([asks("Ready?"), *({"text": f"r{i}"} for i in range(5))])
    first = await held(server, "t0")
    context = {"contextId": first["contextId"]}
    queued = [
        server.call("SendMessage", message(f"t{i}", **context) | IMMEDIATELY)["result"]["task"]
        for i in range(1, 5)
    ]
    assert {t["status"]["state"] for t in queued} == {"TASK_STATE_SUBMITTED"}
    release(server, first)
    done = [await reaches(server, t["id"], "TASK_STATE_COMPLETED") for t in [first, *queued]]
    assert [t["status"]["message"]["parts"][0]["text"] for t in done] == [f"r{i}" for i in range(5)]
    said = [(role, text) for role, text in transcript(home) if text and text != "go on"]
    expected = [turn for i in range(5) for turn in (("user", f"t{i}"), ("assistant", f"r{i}"))]
    assert said == expected


async def test_a_full_conversation_queue_rejects_with_the_reason(serve: Any) -> None:
    server = serve([asks("Ready?"), {"text": "done"}], max_queued_per_context=1)
    first = await held(server, "one")
    context = {"contextId": first["contextId"]}
    second = server.call("SendMessage", message("two", **context) | IMMEDIATELY)["result"]
    assert second["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
    third = server.call("SendMessage", message("three", **context))["result"]["task"]
    assert third["status"]["state"] == "TASK_STATE_REJECTED"
    assert "1 tasks waiting" in third["status"]["message"]["parts"][0]["text"]
    # Answered at once as well: REJECTED, never SUBMITTED first and REJECTED a moment later.
    fourth = server.call("SendMessage", message("four", **context) | IMMEDIATELY)["result"]
    assert fourth["task"]["status"]["state"] == "TASK_STATE_REJECTED"
    got = server.call("GetTask", {"id": fourth["task"]["id"]})["result"]
    assert got["status"]["state"] == "TASK_STATE_REJECTED"
    release(server, first)
    await reaches(server, second["task"]["id"], "TASK_STATE_COMPLETED")


async def test_a_queued_task_can_be_cancelled_before_it_runs(serve: Any, home: Path) -> None:
    server = serve([asks("Ready?"), {"text": "first done"}])
    first = await held(server, "one")
    context = {"contextId": first["contextId"]}
    queued = server.call("SendMessage", message("two", **context) | IMMEDIATELY)["result"]["task"]
    cancelled = server.call("CancelTask", {"id": queued["id"]})["result"]
    assert cancelled["status"]["state"] == "TASK_STATE_CANCELED"
    release(server, first)
    await reaches(server, first["id"], "TASK_STATE_COMPLETED")
    after = server.call("GetTask", {"id": queued["id"]})["result"]
    assert after["status"]["state"] == "TASK_STATE_CANCELED"
    assert [text for role, text in transcript(home) if role == "user"] == ["one"]


async def test_a_follow_up_to_a_working_task_steers_it(serve: Any, home: Path) -> None:
    server = serve(
        [
            {"toolCalls": [{"name": "list_dir", "arguments": {}}], "waitFor": "gate"},
            {"text": "done, tests checked too"},
        ]
    )
    task = server.call("SendMessage", message("tidy up") | IMMEDIATELY)["result"]["task"]
    await reaches(server, task["id"], "TASK_STATE_WORKING")
    follow = message("check the tests too", taskId=task["id"], contextId=task["contextId"])
    answered = server.call("SendMessage", follow | IMMEDIATELY)["result"]["task"]
    assert answered["status"]["state"] == "TASK_STATE_WORKING"
    (home / "gate").touch()  # the model answers its first call only now
    final = await reaches(server, task["id"], "TASK_STATE_COMPLETED")
    assert final["status"]["message"]["parts"][0]["text"] == "done, tests checked too"
    users = [text for role, text in transcript(home) if role == "user"]
    assert users == ["tidy up", "check the tests too"]
    texts = [p.get("text", "") for m in final["history"] for p in m["parts"]]
    assert "tidy up" in texts and "check the tests too" in texts


async def test_peers_see_tool_progress_while_a_task_works(serve: Any, tmp_path: Path) -> None:
    plan = [{"content": "look around", "status": "in_progress", "priority": "high"}]
    server = serve(
        [
            {"toolCalls": [{"name": "update_plan", "arguments": {"entries": plan}}]},
            {"toolCalls": [{"name": "list_dir", "arguments": {"path": "."}}]},
            {"text": "Looked."},
        ]
    )
    client, http = await sdk_client(server, streaming=True)
    try:
        events = await last(client.send_message(SendMessageRequest(message=user("look"))))
        task_id = events[0].task.id
        plain = await client.get_task(GetTaskRequest(id=task_id))
        full = await client.get_task(GetTaskRequest(id=task_id, history_length=50))
    finally:
        await client.close()
        await http.aclose()
    working = [
        get_message_text(e.status_update.status.message)
        for e in events
        if e.HasField("status_update")
        and e.status_update.status.state == TaskState.TASK_STATE_WORKING
        and e.status_update.status.HasField("message")
    ]
    assert "Plan:\n[~] look around" in working
    assert "→ List ." in working and "✓ List ." in working
    assert not any("path" in line for line in working)  # titles only, never arguments
    final = [e for e in events if e.HasField("status_update")][-1].status_update.status
    assert get_message_text(final.message) == "Looked."
    assert not any("→" in get_message_text(m) for m in plain.history)
    assert any("→ List ." == get_message_text(m) for m in full.history)


def test_list_tasks_pages_as_conformance_kits_read_them(serve: Any) -> None:
    server = serve()
    empty = server.call("ListTasks", {})["result"]
    assert empty["pageSize"] == 0 and empty["totalSize"] == 0 and empty["nextPageToken"] == ""
    ids = [server.call("SendMessage", message(f"t{i}"))["result"]["task"]["id"] for i in range(3)]
    fewer = server.call("ListTasks", {"pageSize": 5})["result"]
    assert fewer["pageSize"] == 3 and fewer["totalSize"] == 3 and fewer["nextPageToken"] == ""
    assert [t["id"] for t in fewer["tasks"]] == ids[::-1]  # newest first
    first = server.call("ListTasks", {"pageSize": 2})["result"]
    assert first["pageSize"] == 2 and first["totalSize"] == 3 and first["nextPageToken"]
    rest = server.call("ListTasks", {"pageSize": 2, "pageToken": first["nextPageToken"]})
    assert rest["result"]["pageSize"] == 1 and rest["result"]["nextPageToken"] == ""
    assert server.call("ListTasks", {"status": "working"})["error"]["code"] == -32602


# A blocking SendMessage that starts a task is served by Raven's own path (raven.a2a.direct),
# not the SDK's handler: the task must stay as reachable as one the SDK runs.


async def test_a_blocking_task_can_be_watched_and_cancelled_while_it_runs(
    serve: Any, tmp_path: Path
) -> None:
    pidfile = tmp_path / "pid"
    command = f"sleep 60 & echo $! > {pidfile}; wait"
    server = serve(
        [{"toolCalls": [{"name": "run_command", "arguments": {"command": command}}]}],
        approvals="auto",
    )
    blocking = asyncio.create_task(asyncio.to_thread(server.call, "SendMessage", message("go")))
    pid = await pid_from(pidfile)
    (listed,) = server.call("ListTasks", {})["result"]["tasks"]
    assert server.call("GetTask", {"id": listed["id"]})["result"]["status"]["state"] == (
        "TASK_STATE_WORKING"
    )
    client, http = await sdk_client(server, streaming=True)
    try:
        stream = client.subscribe(SubscribeToTaskRequest(id=listed["id"]))
        first = await anext(stream)
        assert first.task.status.state == TaskState.TASK_STATE_WORKING
        cancelled = server.call("CancelTask", {"id": listed["id"]})["result"]
        assert cancelled["status"]["state"] == "TASK_STATE_CANCELED"
        rest = [update async for update in stream]
    finally:
        await client.close()
        await http.aclose()
    assert rest[-1].status_update.status.state == TaskState.TASK_STATE_CANCELED
    assert await ended([pid], 5)
    answered = (await blocking)["result"]["task"]
    assert answered["id"] == listed["id"]
    assert answered["status"]["state"] == "TASK_STATE_CANCELED"
    assert server.call("CancelTask", {"id": listed["id"]})["error"]["code"] == -32002
    again = server.call("SendMessage", message("more", taskId=listed["id"]))
    assert again["error"]["code"] == -32004


async def test_a_blocking_task_waiting_for_input_takes_a_streamed_answer(serve: Any) -> None:
    server = serve(
        [
            asks("Which one?"),
            {"text": "Took the second.", "delayMs": 200},
        ]
    )
    task = server.call("SendMessage", message("pick"))["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    client, http = await sdk_client(server, streaming=True)
    try:
        answer = user("the second", task_id=task["id"], context_id=task["contextId"])
        events = await last(client.send_message(SendMessageRequest(message=answer)))
    finally:
        await client.close()
        await http.aclose()
    assert events[0].task.id == task["id"]
    states = [e.status_update.status.state for e in events if e.HasField("status_update")]
    assert states[0] == TaskState.TASK_STATE_WORKING
    assert states[-1] == TaskState.TASK_STATE_COMPLETED
    final = server.call("GetTask", {"id": task["id"]})["result"]
    assert final["status"]["message"]["parts"][0]["text"] == "Took the second."
    texts = [p.get("text", "") for m in final["history"] for p in m["parts"]]
    assert texts.count("the second") == 1 and "Which one?" in texts


async def test_stopping_the_server_mid_blocking_task_is_clean(serve: Any, home: Path) -> None:
    server = serve([{"text": "never sent", "delayMs": 60_000}])
    blocking = asyncio.create_task(asyncio.to_thread(server.post, message_body("go")))
    async with asyncio.timeout(15):
        while not server.call("ListTasks", {})["result"]["tasks"]:
            await asyncio.sleep(0.02)
    assert server.stop() == 0  # within the fixture's 15 s, not after the model's minute
    answer = (await blocking).json()["result"]["task"]
    assert answer["status"]["state"] == "TASK_STATE_FAILED"  # not left working for ever
    assert "stopped before this task finished" in answer["status"]["message"]["parts"][0]["text"]
    log = (home / "logs" / "a2a.log").read_text()
    assert "Traceback" not in log and "was destroyed" not in log


def message_body(text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": message(text)}


async def test_the_memory_store_forgets_the_oldest_finished_tasks(serve: Any) -> None:
    server = serve(keep_finished_tasks=2)
    ids = [server.call("SendMessage", message(f"t{n}"))["result"]["task"]["id"] for n in range(3)]
    assert server.call("GetTask", {"id": ids[0]})["error"]["code"] == -32001
    listed = {t["id"] for t in server.call("ListTasks", {})["result"]["tasks"]}
    assert listed == set(ids[1:])


async def test_an_answer_sent_with_return_immediately_resumes_the_task(
    serve: Any, home: Path
) -> None:
    server = serve(
        [
            asks("Go on?"),
            {"text": "Went on.", "waitFor": "gate"},
        ]
    )
    task = server.call("SendMessage", message("start"))["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    answer = message("yes", taskId=task["id"]) | IMMEDIATELY
    answered = server.call("SendMessage", answer)["result"]["task"]
    assert answered["status"]["state"] == "TASK_STATE_WORKING"
    (home / "gate").touch()
    final = await reaches(server, task["id"], "TASK_STATE_COMPLETED")
    assert final["status"]["message"]["parts"][0]["text"] == "Went on."
    assert server.call("CancelTask", {"id": task["id"]})["error"]["code"] == -32002


def test_a2a_status_shows_what_is_running(env: dict[str, str], home: Path) -> None:
    configure(home)
    idle = raven("a2a", "status", env=env).stdout
    assert "running:    no (`raven a2a serve` would listen on 127.0.0.1:8710)" in idle
    server = start(env)
    try:
        status = raven("a2a", "status", env=env).stdout
        assert f"running:    {server.rpc} (raven a2a serve, pid {server.proc.pid})" in status
    finally:
        assert server.stop() == 0
    assert "running:    no" in raven("a2a", "status", env=env).stdout
    assert not (home / "data" / "a2a-serve.json").exists()


async def test_a_postgresql_restart_fails_no_request_and_is_logged_once(
    env: dict[str, str], home: Path, pg_url: str
) -> None:
    from tests.postgres import restart_server

    configure(home, [{"text": "before"}, {"text": "after"}], task_store="sessions")
    config = json.loads((home / "config.json").read_text())
    write_config(home, {**config, "sessions": {"url": pg_url}})
    server = start(env)
    try:
        first = server.call("SendMessage", message("one"))["result"]["task"]
        restart_server(pg_url)  # every connection of the replica's pools is cut
        got = server.call("GetTask", {"id": first["id"]})  # the first request after it
        assert got.get("result", {}).get("id") == first["id"], got
        again = server.call("SendMessage", message("two"))
        assert "result" in again, again  # the dropped connection is retried, not answered
        assert again["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    finally:
        assert server.stop() == 0
    lines = "\n".join(p.read_text() for p in (home / "logs").glob("*.log")).splitlines()
    pool = [n for n, line in enumerate(lines) if "asyncpg.pool" in line]
    assert len(pool) <= 1, lines  # a few a second, each with a traceback, before
    assert sum("connection was lost" in line for line in lines) <= 1
    assert not any("Traceback" in line for line in lines), lines  # the A2A watcher's too
