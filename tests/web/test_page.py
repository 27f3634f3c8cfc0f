"""The web UI in headless Chromium against `raven web`: log in, sessions, a streamed answer,
an approval, a question, cancel, steer, reload mid-turn, a gateway restart, model content
that tries to inject HTML, and a narrow dark window. Assertions are on the DOM."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.conftest import RAVEN
from tests.ports import free_port
from tests.web.conftest import (
    DEADLINE_S,
    WebGateway,
    call,
    chromium_missing,
    make_home,
    own_gateway,
    work_dir,
)

pytestmark = pytest.mark.browser
if (missing := chromium_missing()) is not None and not os.environ.get("RAVEN_TEST_STRICT"):
    pytest.skip(missing, allow_module_level=True)  # .ci/run requires it and installs it

DOCS_SCREENSHOT = Path(__file__).parents[2] / "docs" / "web.png"
DOCS_NARROW_SCREENSHOT = DOCS_SCREENSHOT.with_name("web-narrow.png")
"""Kept in docs/ (both widths) when RAVEN_DOCS_SCREENSHOT is set."""


def login(page: Page, link: str) -> None:
    page.goto(link)
    expect(page.locator("#status")).to_have_text("Online")
    # The page is ready once it has filled in the gateway's directory (a `fill` racing
    # that would land beside it: Playwright clears the field, then types) and shows a
    # ready composer or the session it opened.
    expect(page.get_by_label("Directory for a new session")).not_to_have_value("")
    expect(page.locator("#session")).to_be_visible()


def new_session(page: Page, cwd: Path, model: str) -> None:
    """A session in `cwd`, started from a ready composer's directory field (New session
    gives one when a session is open)."""
    field = page.get_by_label("Directory for a new session")
    if not field.is_visible():
        button = page.get_by_role("button", name="New session")
        if not button.is_visible():  # a narrow window: in the drawer
            page.get_by_role("button", name="Show or hide sessions").click()
        button.click()
    field.fill(str(cwd))
    field.press("Enter")
    expect(page.locator("#session")).not_to_have_attribute("data-draft", re.compile(".*"))
    expect(page.locator("#session-cwd")).to_have_text(str(cwd))
    settings = page.get_by_role("button", name="Session settings")
    size = page.viewport_size
    narrow = size is not None and size["width"] <= 700  # settings behind this button
    if narrow:
        settings.click()
    page.get_by_label("Model", exact=True).select_option(model)
    expect(page.get_by_label("Model", exact=True)).to_have_value(model)
    if narrow:
        settings.click()


def session_action(page: Page, name: str) -> None:
    """Rename, Close or Delete, from the session's actions menu."""
    page.get_by_role("button", name="Session actions").click()
    page.get_by_role("menu").get_by_role("menuitem", name=name, exact=True).click()


def send(page: Page, text: str) -> None:
    page.get_by_label("Message").fill(text)
    page.get_by_label("Message").press("Enter")


def test_log_in_create_a_session_and_see_the_answer_stream(page: Page, web: WebGateway) -> None:
    page.goto(web.base + "/")
    expect(page.locator("#status")).to_contain_text("Not signed in")
    login(page, web.login_link())
    field = page.get_by_label("Directory for a new session")
    field.fill("relative/dir")
    page.get_by_role("button", name="New session").click()
    expect(page.locator("#new-error")).to_have_text(
        "Give an absolute path, starting with / (or ~/)."
    )
    expect(field).to_have_attribute("aria-invalid", "true")
    field.fill("/no/such/dir")
    page.get_by_role("button", name="New session").click()
    expect(page.locator("#new-error")).to_contain_text("existing absolute directory")

    new_session(page, work_dir(web, "stream"), "stream")
    send(page, "show me the plan")
    answer = page.locator(".answer").last
    expect(answer).to_contain_text("Here is")
    expect(page.locator(".turn-end")).to_have_count(0)  # still streaming
    expect(page.get_by_role("button", name="Cancel", exact=True)).to_be_visible()
    expect(page.locator(".turn-end")).to_contain_text("Done")
    expect(page.locator(".turn-end")).not_to_contain_text("end")  # no engine words on screen
    expect(answer.locator("strong")).to_have_text("the plan")
    expect(answer.locator("figure.code .tok-kw").first).to_have_text("def")
    expect(answer.locator("figure.code .tok-com")).to_have_text("# say hi")
    expect(answer.get_by_role("button", name="Copy code")).to_be_visible()
    expect(answer.locator("li input[type=checkbox]:checked")).to_have_count(1)
    expect(answer.get_by_role("checkbox", name="not done")).to_have_count(1)  # labelled
    expect(answer).to_contain_text("Done now.")
    expect(page.locator(".turn-end")).to_contain_text("tokens")
    expect(page.locator("#session-usage")).to_contain_text(" out")
    expect(page.locator(".prompt-text")).to_have_text("show me the plan")
    item = page.locator("#sessions li").filter(has_text="show me the plan")
    expect(item).to_be_visible()


def test_approve_a_write_and_see_it_done(page: Page, web: WebGateway) -> None:
    login(page, web.login_link())
    cwd = work_dir(web, "write")
    new_session(page, cwd, "write")
    send(page, "write the file")
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("Write web.txt")
    expect(dialog.locator(".diff-add")).to_have_text("+ from the web\n")  # the change, not JSON
    expect(dialog.locator(".approval-input")).to_have_count(0)
    expect(page.locator("#sessions .badge.waiting")).to_have_text("needs you")
    expect(dialog.get_by_role("button", name="Allow once")).to_be_focused()
    page.keyboard.press("Enter")  # keyboard operable: the focused choice is allow once
    expect(dialog).to_be_hidden()
    tool = page.locator(".tool").last
    expect(tool).to_have_attribute("data-status", "completed")
    expect(tool.locator(".tool-kind")).to_have_text("edit")
    # Icons are drawn, not emoji: the same with or without an emoji font.
    expect(tool.locator(".tool-icon svg path").first).to_be_attached()
    emoji = page.evaluate(
        r"() => (document.body.innerText.match(/[\u{1F300}-\u{1FAFF}\u{2600}-\u{27BF}]/gu) || [])"
    )
    assert emoji == [], emoji
    expect(tool.locator(".diff-add")).to_have_text("+ from the web\n")
    expect(page.locator(".answer").last).to_have_text("Written.")
    assert (cwd / "web.txt").read_text() == "from the web\n"
    expect(page.locator("#sessions .badge.waiting")).to_have_count(0)


FORECAST = 'def forecast(city):\n    return fetch(city)["temp"]\n'
README_SCENE = [
    {"thought": "I should look at the code first.", **call("read_file", path="forecast.py")},
    call(
        "edit_file",
        path="forecast.py",
        old_text='    return fetch(city)["temp"]\n',
        new_text='    reading = fetch(city)\n    return reading.get("temp")  # None when offline\n',
    ),
    {
        "text": "`forecast()` no longer fails when the station is offline:\n\n"
        "- it reads the temperature with `.get`, so a missing reading gives **None**;\n"
        "- callers that print it should say *no data* for None.\n\n"
        "Want me to update `show_forecast` too?"
    },
]


def test_paths_under_home_read_as_tilde_and_the_readme_shows_a_real_session(
    page: Page, tmp_path: Path
) -> None:
    home, user = tmp_path / "raven", tmp_path / "ada"
    make_home(home)
    project = user / "projects" / "weather"
    project.mkdir(parents=True)
    (project / "forecast.py").write_text(FORECAST)
    (project / "AGENTS.md").write_text("Run `pytest` after each change.\n")
    (home / "local.json").write_text(json.dumps(README_SCENE))
    config = json.loads((home / "config.json").read_text())
    scene = {"id": "local", "provider": "scripted", "script": str(home / "local.json")}
    config["models"].insert(0, scene)
    config["defaultModel"] = "local"
    (home / "config.json").write_text(json.dumps(config))
    with own_gateway(home, user_home=user) as gateway:
        login(page, gateway.first_link)
        field = page.get_by_label("Directory for a new session")
        field.fill("~/projects/weather")  # typed as a person would
        page.get_by_role("button", name="New session").click()
        expect(page.locator("#session-cwd")).to_have_text("~/projects/weather")
        expect(page.locator("#session-instructions")).to_have_text("follows AGENTS.md")
        send(page, "make forecast() survive an offline station")
        dialog = page.get_by_role("dialog")
        expect(dialog.locator("figcaption")).to_have_text("~/projects/weather/forecast.py")
        dialog.get_by_role("button", name="Allow once").click()
        expect(page.locator(".answer").last).to_contain_text("update show_forecast too?")
        assert "None when offline" in (project / "forecast.py").read_text()
        # One session: the message typed while "New session" was still creating it went
        # to that one, not to a second started from the draft.
        expect(page.locator("#sessions .item-meta")).to_have_count(1)
        expect(page.locator("#sessions .item-meta")).to_contain_text("…/projects/weather")
        shown = page.evaluate("() => document.body.innerText")
        assert str(tmp_path) not in shown  # no machine paths on screen
        if os.environ.get("RAVEN_DOCS_SCREENSHOT"):
            page.screenshot(path=str(DOCS_SCREENSHOT))


def test_a_directory_is_chosen_by_browsing_and_a_session_starts_there(
    page: Page, web: WebGateway
) -> None:
    base = work_dir(web, "browse")
    (base / "apps" / "weather").mkdir(parents=True)
    (base / "apps" / "notes").mkdir()
    (base / "apps" / ".cache").mkdir()
    login(page, web.login_link())
    page.get_by_label("Directory for a new session").fill(str(base))
    page.get_by_role("button", name="Choose a directory").click()
    dialog = page.get_by_role("dialog")
    expect(dialog.locator(".dir-path")).to_have_text(str(base))
    dialog.get_by_role("button", name="apps", exact=True).click()
    expect(dialog.locator(".dir-path")).to_have_text(str(base / "apps"))
    entries = dialog.get_by_role("list", name="Subdirectories").get_by_role("button")
    expect(entries).to_have_text([".. (up one level)", "notes", "weather"])  # no hidden ones
    dialog.get_by_role("button", name="weather", exact=True).click()
    expect(dialog.locator(".dir-path")).to_have_text(str(base / "apps" / "weather"))
    expect(dialog).to_contain_text("No subdirectories.")
    dialog.get_by_role("button", name=".. (up one level)").click()
    dialog.get_by_role("button", name="notes", exact=True).click()
    dialog.get_by_role("button", name="Use this directory").click()
    expect(dialog).to_be_hidden()
    field = page.get_by_label("Directory for a new session")
    expect(field).to_have_value(str(base / "apps" / "notes"))
    page.get_by_role("button", name="New session").click()
    expect(page.locator("#session-cwd")).to_have_text(str(base / "apps" / "notes"))


def test_a_sub_agents_escalated_command_is_decided_in_the_page(page: Page, web: WebGateway) -> None:
    login(page, web.login_link())
    cwd = work_dir(web, "escalate")
    new_session(page, cwd, "escalate")
    send(page, "let the helper do it")
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("Delegate to helper")  # the parent's own call first
    dialog.get_by_role("button", name="Allow once").click()
    expect(dialog).to_contain_text("helper: Run `echo from-kid > kid.txt`")  # the child's
    expect(dialog.locator(".approval-input")).to_have_text("echo from-kid > kid.txt")
    expect(dialog).not_to_contain_text("{")  # what will run, not JSON
    dialog.get_by_role("button", name="Allow once").click()
    expect(page.locator(".answer").last).to_have_text("The helper is done.")
    assert (cwd / "kid.txt").read_text() == "from-kid\n"
    result = page.locator(".tool").first
    child = result.get_by_label("What helper does")  # its work, under the delegate call
    expect(child.locator(".child-calls li")).to_have_text(["✓ Run `echo from-kid > kid.txt`"])
    expect(child.locator(".child-text")).to_have_text("Kid did it.")
    usage = page.locator("#session-usage")  # the session's tokens, the helper's among them
    expect(usage).to_contain_text(" in · ")
    expect(usage).to_contain_text("helper ")
    result.get_by_text("Output", exact=True).click()
    expect(result).to_contain_text("allow once: Run `echo from-kid > kid.txt` (by you)")


def test_a_task_one_sub_agent_gives_another_shows_under_the_delegate_call(
    page: Page, web: WebGateway
) -> None:
    login(page, web.login_link())
    new_session(page, work_dir(web, "broker"), "broker")
    send(page, "let the asker ask")
    page.get_by_role("dialog").get_by_role("button", name="Allow once").click()
    expect(page.locator(".answer").last).to_have_text("The asker is done.")
    child = page.locator(".tool").first.get_by_label("What asker does")
    # The asker's own call, and the task it gave the teller, which the teller completed.
    expect(child.locator(".child-calls li")).to_contain_text(["✓ a2a → teller: What colour?"])


def test_a_sub_agents_escalated_edit_shows_its_change_in_the_page(
    page: Page, web: WebGateway
) -> None:
    login(page, web.login_link())
    cwd = work_dir(web, "escalate-edit")
    new_session(page, cwd, "escalate-edit")
    send(page, "let the writer do it")
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("Delegate to writer")
    dialog.get_by_role("button", name="Allow once").click()
    expect(dialog).to_contain_text("writer: ")  # the child's own request
    expect(dialog.locator(".diff-add")).to_have_text("+ - eggs\n")  # what it would write
    dialog.get_by_role("button", name="Reject", exact=True).click()
    expect(page.locator(".answer").last).to_have_text("The writer is done.")
    assert not (cwd / "eggs.md").exists()


def test_the_mode_picker_applies_to_the_next_turn(page: Page, web: WebGateway) -> None:
    login(page, web.login_link())
    cwd = work_dir(web, "auto")
    new_session(page, cwd, "auto")
    expect(page.get_by_label("Mode", exact=True)).to_have_value("ask")
    page.get_by_label("Mode", exact=True).select_option("auto")
    send(page, "write without asking")
    expect(page.locator(".answer").last).to_have_text("Done.")
    assert (cwd / "auto.txt").read_text() == "no questions\n"
    expect(page.get_by_role("dialog")).to_be_hidden()
    # The second write left the file as it was: its diff says so instead of showing nothing.
    expect(page.locator(".tool").last.locator(".diff-none")).to_have_text("no change")
    expect(page.locator(".tool").first.locator(".diff-add")).to_have_text("+ no questions\n")
    page.reload()
    expect(page.get_by_label("Mode", exact=True)).to_have_value("auto")
    expect(page.get_by_label("Model", exact=True)).to_have_value("auto")
    expect(page.locator("#session-sandbox")).to_have_text("")  # no sandbox: nothing said
    # A mode that requires a sandbox: the page says which, and whether it holds here.
    page.get_by_label("Mode", exact=True).select_option("jailed")
    expect(page.locator("#session-sandbox")).to_contain_text("sandbox workspace: ")
    page.reload()
    expect(page.locator("#session-sandbox")).to_contain_text("sandbox workspace: ")


def test_answer_a_question(page: Page, web: WebGateway) -> None:
    login(page, web.login_link())
    new_session(page, work_dir(web, "ask"), "ask")
    send(page, "ask me something")
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("Which branch?")
    dialog.get_by_role("button", name="dev").click()
    expect(dialog).to_be_hidden()
    expect(page.locator(".tool").last).to_have_attribute("data-status", "completed")
    expect(page.locator(".tool-kind").last).to_be_hidden()  # "other" says nothing: not shown
    expect(page.locator(".tool").last).not_to_contain_text("other")
    page.locator(".tool-output summary").last.click()
    expect(page.locator(".tool-output pre").last).to_contain_text("dev")
    expect(page.locator(".answer").last).to_have_text("Going with it.")


def test_answer_a_question_in_words(page: Page, web: WebGateway) -> None:
    login(page, web.login_link())
    new_session(page, work_dir(web, "tell"), "tell")
    send(page, "ask me anything")
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("What colour?")
    answer = dialog.get_by_label("Your answer")
    expect(answer).to_be_focused()
    answer.fill("cobalt blue")
    answer.press("Enter")
    expect(dialog).to_be_hidden()
    page.locator(".tool-output summary").last.click()
    expect(page.locator(".tool-output pre").last).to_contain_text("cobalt blue")
    expect(page.locator(".answer").last).to_have_text("Noted.")


def test_thoughts_fold_plans_check_and_the_roster_shows(page: Page, web: WebGateway) -> None:
    login(page, web.login_link())
    roster = page.get_by_role("region", name="Sub-agents and A2A")
    expect(roster).to_contain_text("helper (acp, auto)")
    expect(roster).to_contain_text("A2A: serving peers at /a2a")
    new_session(page, work_dir(web, "plan"), "plan")
    send(page, "plan it")
    expect(page.locator(".answer").last).to_have_text("Planned.")
    thought = page.locator("details.thought")
    expect(thought).not_to_have_attribute("open", "")
    expect(thought.locator(".thought-text")).to_be_hidden()
    thought.locator("summary").click()
    expect(thought.locator(".thought-text")).to_have_text("First I weigh the options.")
    plan = page.get_by_role("list", name="Plan")
    expect(plan.locator("li")).to_have_text(["Read the code", "Change it"])
    expect(plan.locator("input:checked")).to_have_count(1)


def test_escape_cancels_a_long_turn(page: Page, web: WebGateway) -> None:
    login(page, web.login_link())
    new_session(page, work_dir(web, "long"), "long")
    send(page, "take your time")
    expect(page.get_by_role("button", name="Cancel", exact=True)).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator(".turn-end")).to_have_attribute("data-stop-reason", "cancelled")
    expect(page.locator(".turn-end")).to_contain_text("Stopped")
    expect(page.get_by_role("button", name="Cancel", exact=True)).to_be_hidden()
    expect(page.get_by_role("button", name="Send", exact=True)).to_be_visible()


def test_steer_a_running_turn(page: Page, web: WebGateway) -> None:
    login(page, web.login_link())
    new_session(page, work_dir(web, "steer"), "steer")
    send(page, "start working")
    expect(page.get_by_role("button", name="Steer", exact=True)).to_be_visible()
    send(page, "also mention lemons")
    expect(page.locator(".turn-end")).to_contain_text("Done")
    # the model's next step saw the steering message (the scripted model echoes it)
    expect(page.locator(".turn").last).to_contain_text("also mention lemons")
    expect(page.locator(".turn").last).to_contain_text("Working on it.")


def test_a_compaction_shows_where_the_conversation_was_summarised(
    page: Page, web: WebGateway
) -> None:
    login(page, web.login_link())
    new_session(page, work_dir(web, "compact"), "compact")
    send(page, "plums " * 6_700)  # about 10,000 of the window's 20,000 tokens
    expect(page.locator(".answer").last).to_have_text("First answer.")
    send(page, "more plums " * 2_800)  # past 16,000 with the first: compacted first
    expect(page.locator(".answer").last).to_have_text("Second answer.")
    marker = page.locator(".compaction")
    expect(marker).to_have_count(1)
    expect(marker.locator("summary")).to_contain_text("Compacted")
    marker.locator("summary").click()
    expect(marker).to_contain_text("The user sent two long notes about plums.")
    page.reload()  # the replay shows it where it happened, too
    expect(page.locator(".compaction")).to_have_count(1)


def test_reload_mid_turn_restores_the_session_and_its_question(page: Page, web: WebGateway) -> None:
    login(page, web.login_link())
    cwd = work_dir(web, "reload")
    new_session(page, cwd, "reload")
    send(page, "write later")
    expect(page.get_by_role("dialog")).to_contain_text("Write late.txt")
    page.reload()
    expect(page.locator("#status")).to_have_text("Online")
    expect(page.locator(".prompt-text")).to_have_text("write later")
    expect(page.locator("#session-state")).to_have_text("working…")
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("Write late.txt")
    dialog.get_by_role("button", name="Allow once").click()
    expect(page.locator(".answer").last).to_have_text("Written after the reload.")
    assert (cwd / "late.txt").read_text() == "late\n"


def test_a_dropped_connection_resumes_where_the_page_left_off(page: Page, web: WebGateway) -> None:
    sockets: list[Any] = []

    def through(ws: Any) -> None:  # the page's socket, passed on to the gateway as it is
        ws.connect_to_server()
        sockets.append(ws)

    page.route_web_socket(re.compile(r"/rpc$"), through)
    login(page, web.login_link())
    new_session(page, work_dir(web, "drop"), "drop")
    send(page, "recite")
    answer = page.locator(".answer").last
    expect(answer).to_contain_text("gamma")
    answer.evaluate("node => { node.dataset.kept = 'yes'; }")  # the node on screen now

    sockets[-1].close()  # the network drops mid-answer; the turn goes on in the gateway
    expect(page.locator("#status")).to_have_text("Offline: reconnecting…")
    expect(page.locator("#status")).to_have_text("Online")
    whole = (
        "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi "
        "omicron pi rho sigma tau upsilon"
    )
    expect(answer).to_have_text(whole)  # every word once: what was missed, then live
    expect(page.locator(".answer[data-kept='yes']")).to_have_count(1)  # not redrawn
    expect(page.locator(".turn-end").last).to_have_attribute("data-stop-reason", "end_turn")
    assert len(sockets) == 2


def test_chat_attach_and_the_web_ui_share_one_session_for_a_long_run(
    page: Page, web: WebGateway
) -> None:
    from tests.e2e.test_chat import Terminal

    login(page, web.login_link())
    cwd = work_dir(web, "shared")
    new_session(page, cwd, "shared")
    send(page, "hello from the web")
    expect(page.locator(".answer").last).to_have_text("First answer.")
    sid = page.evaluate("decodeURIComponent(location.hash.slice(1))")

    chat = [*RAVEN, "chat", "--attach", "auto", "--session", sid]
    term = Terminal(chat, {**web.env, "TERM": "xterm"}, cwd)
    try:
        term.expect("› hello from the web")  # the session so far, replayed in the terminal
        term.expect("First answer.")
        term.expect("› ", after="First answer.")
        term.mark()
        term.type("write the file\n")
        # The chat's turn shows in the page as it runs, and its approval in both UIs.
        expect(page.locator(".prompt-text").last).to_have_text("write the file")
        dialog = page.get_by_role("dialog")
        expect(dialog).to_contain_text("Write shared.txt")
        term.expect("Allow Write shared.txt?")
        dialog.get_by_role("button", name="Allow once").click()
        term.expect("answered in another UI")
        term.expect("Wrote shared.txt.")
        expect(page.locator(".answer").last).to_have_text("Wrote shared.txt.")
        assert (cwd / "shared.txt").read_text() == "from the chat\n"

        term.expect("› ", after="Wrote shared.txt.")
        term.mark()
        send(page, "count slowly")  # the page's turn, followed live in the terminal
        term.expect("› count slowly")
        term.expect("three")
        term.type("/quit\n")  # leaving the chat mid-turn leaves the page's turn alone
        assert term.proc.wait(DEADLINE_S) == 0
    finally:
        term.close()
    expect(page.locator(".answer").last).to_have_text(
        "one two three four five six seven eight nine ten, the end."
    )
    expect(page.locator(".turn-end").last).to_have_attribute("data-stop-reason", "end_turn")

    page.reload()  # the whole run comes back from the session's log
    expect(page.locator("#status")).to_have_text("Online")
    prompts = ["hello from the web", "write the file", "count slowly"]
    expect(page.locator(".prompt-text")).to_have_text(prompts)
    expect(page.locator(".answer").last).to_have_text(
        "one two three four five six seven eight nine ten, the end."
    )


def test_model_content_cannot_inject_html(page: Page, web: WebGateway) -> None:
    login(page, web.login_link())
    new_session(page, work_dir(web, "inject"), "inject")
    send(page, "<img src=z onerror=window.pwned=6> from the user")
    expect(page.locator(".turn-end")).to_be_visible()
    transcript = page.locator("#transcript")
    expect(transcript.locator("img, script")).to_have_count(0)
    expect(transcript.locator('a[href^="javascript"]')).to_have_count(0)
    expect(transcript).to_contain_text('<img src=x onerror="window.pwned=1">')
    expect(transcript).to_contain_text("[click me](javascript:window.pwned=2)")
    expect(page.locator(".prompt-text")).to_contain_text("<img src=z onerror")
    table = transcript.locator("table")
    expect(table.locator("th")).to_have_text(["tool", "note"])
    expect(table.locator("td strong")).to_have_text("grep")
    expect(table.locator("td").last).to_have_text("<img src=t onerror=window.pwned=7>")
    expect(transcript.locator("ol")).to_have_attribute("start", "3")
    for link in transcript.locator("a").all():
        assert re.match(r"^https://example\.com/", link.get_attribute("href") or "")
        assert link.get_attribute("onmouseover") is None
    page.locator("a").first.hover()
    assert page.evaluate("window.pwned") is None


def test_rename_filter_close_and_delete(page: Page, web: WebGateway) -> None:
    login(page, web.login_link())
    new_session(page, work_dir(web, "manage"), "stream")
    # The actions wait in a menu; Escape closes it, and focus goes back to its button.
    expect(page.get_by_role("menuitem", name="Rename")).to_be_hidden()
    page.get_by_role("button", name="Session actions").click()
    expect(page.get_by_role("menuitem", name="Rename")).to_be_focused()
    page.keyboard.press("Escape")
    expect(page.get_by_role("menu")).to_be_hidden()
    expect(page.get_by_role("button", name="Session actions")).to_be_focused()
    session_action(page, "Rename")
    page.get_by_role("dialog").get_by_label("Title").fill("Lemon project")
    page.get_by_role("dialog").get_by_label("Title").press("Enter")
    expect(page.locator("#title")).to_have_text("Lemon project")
    page.get_by_label("Filter sessions").fill("lemon")
    expect(page.locator("#sessions")).to_have_attribute("data-query", "lemon")
    expect(page.locator("#sessions li[data-session-id]")).to_have_count(1)
    expect(page.locator("#sessions li[data-session-id]")).to_contain_text("Lemon project")
    page.get_by_label("Filter sessions").fill("no session is called this")
    expect(page.locator("#sessions")).to_have_attribute("data-query", "no session is called this")
    expect(page.locator("#sessions li")).to_have_text("No session matches.")
    page.get_by_label("Filter sessions").fill("")
    session_action(page, "Close")
    expect(page.locator("#session-state")).to_have_text("closed")
    session_action(page, "Delete")
    page.get_by_role("dialog").get_by_role("button", name="Cancel", exact=True).click()
    expect(page.locator("#title")).to_have_text("Lemon project")
    session_action(page, "Delete")
    page.get_by_role("dialog").get_by_role("button", name="Delete", exact=True).click()
    expect(page.locator("#title")).to_have_text("New session")  # a ready composer again
    expect(page.locator("#sessions li").filter(has_text="Lemon project")).to_have_count(0)


def test_the_session_list_pages(page: Page, web: WebGateway) -> None:
    cwd = work_dir(web, "paging")
    made = [web.rpc("session.create", cwd=str(cwd))["sessionId"] for _ in range(33)]
    login(page, web.login_link())
    page.get_by_label("Filter sessions").fill("paging")
    expect(page.locator("#sessions")).to_have_attribute("data-query", "paging")
    items = page.locator("#sessions li[data-session-id]")
    expect(items).to_have_count(30)
    page.get_by_role("button", name="Load more").click()
    expect(items).to_have_count(33)
    expect(page.get_by_role("button", name="Load more")).to_be_hidden()
    shown = [li.get_attribute("data-session-id") for li in items.all()]
    assert shown == list(reversed(made))  # newest first
    new_session(page, cwd, "stream")  # the list is refreshed: as many shown as before
    expect(page.get_by_role("button", name="Load more")).to_be_visible()
    expect(items).to_have_count(33)
    assert items.first.get_attribute("data-session-id") not in made


def test_a_draft_takes_its_model_and_the_page_reads_in_one_centred_column(
    page: Page, web: WebGateway
) -> None:
    login(page, web.login_link())
    expect(page.locator(".bar .mark")).to_be_visible()  # Raven's mark, the registry's icon
    icon = page.locator("link[rel=icon]").get_attribute("href")
    assert icon == "/app/raven.svg" and httpx.get(web.base + icon).status_code == 200
    page.get_by_label("Directory for a new session").fill(str(work_dir(web, "draft")))
    # Before the first message: the model and mode can be picked, nothing else.
    expect(page.get_by_role("button", name="Session actions")).to_be_hidden()
    page.get_by_label("Model", exact=True).select_option("echo")
    send(page, "picked before the first message")
    expect(page.locator(".answer").last).to_have_text("picked before the first message")
    expect(page.get_by_label("Model", exact=True)).to_have_value("echo")
    expect(page.get_by_role("button", name="Session actions")).to_be_visible()
    turn = page.locator(".turn").first.bounding_box()
    area = page.locator("#transcript").bounding_box()
    assert turn is not None and area is not None
    assert turn["width"] <= 52 * 16 + 1  # 52rem, in a 1280px window
    assert abs(turn["x"] + turn["width"] / 2 - (area["x"] + area["width"] / 2)) < 12
    # New session: a ready composer in this session's directory, asked for no folder.
    page.get_by_role("button", name="New session").click()
    expect(page.locator("#title")).to_have_text("New session")
    expect(page.get_by_label("Directory for a new session")).to_have_value(
        str(work_dir(web, "draft"))
    )
    page.get_by_label("Model", exact=True).select_option("echo")
    send(page, "and another")
    expect(page.locator(".answer").last).to_have_text("and another")
    here = page.locator("#sessions li[data-session-id]").filter(has_text="work/draft")
    expect(here).to_have_count(2)


def test_a_narrow_dark_window_is_usable_and_every_control_is_labelled(
    page: Page, web: WebGateway
) -> None:
    page.emulate_media(color_scheme="dark")
    page.set_viewport_size({"width": 400, "height": 800})
    login(page, web.login_link())
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert sum(int(n) for n in re.findall(r"\d+", background)[:3]) < 150, background
    # It opens on the composer; the sessions are a drawer a tap away, over a backdrop that
    # closes it.
    sessions = page.get_by_role("navigation", name="Sessions")
    expect(sessions).to_be_hidden()
    expect(page.get_by_label("Message")).to_be_visible()
    # The first message's model can be picked here too, behind the settings button.
    page.get_by_role("button", name="Session settings").click()
    expect(page.get_by_label("Model", exact=True)).to_be_visible()
    page.get_by_role("button", name="Session settings").click()
    page.get_by_role("button", name="Show or hide sessions").click()
    expect(sessions).to_be_visible()
    expect(page.locator("#backdrop")).to_be_visible()
    page.locator("#backdrop").click(position={"x": 390, "y": 400})  # beside the drawer
    expect(sessions).to_be_hidden()
    expect(page.locator("#backdrop")).to_be_hidden()
    page.get_by_role("button", name="Show or hide sessions").click()
    new_session(page, work_dir(web, "narrow"), "stream")
    expect(sessions).to_be_hidden()  # out of the way
    expect(page.locator("#backdrop")).to_be_hidden()
    send(page, "a narrow question")
    expect(page.locator(".turn-end")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 400
    # The bar and the session's head take a tenth of the height; settings are a tap away.
    header = page.evaluate(
        """() => ['.bar', '.session-head']
            .map((s) => document.querySelector(s).getBoundingClientRect().height)
            .reduce((a, b) => a + b, 0)"""
    )
    assert header <= 0.1 * 800 + 4, header
    expect(page.get_by_label("Model", exact=True)).to_be_hidden()
    page.get_by_role("button", name="Session settings").click()
    expect(page.get_by_label("Mode", exact=True)).to_be_visible()
    expect(page.get_by_role("button", name="Session actions")).to_be_visible()
    expect(page.locator("#session-cwd")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 400
    state = page.evaluate("getComputedStyle(document.getElementById('session-state')).whiteSpace")
    assert state == "nowrap"  # "working…" stays one word
    clipped = page.evaluate(
        """() => [...document.querySelectorAll('button, select, label, .prompt, .answer')]
            .filter((e) => e.offsetParent !== null && !e.matches('.visually-hidden'))
            .filter((e) => e.scrollWidth > e.clientWidth + 1)
            .map((e) => e.outerHTML.slice(0, 80))"""
    )
    assert clipped == []
    page.get_by_role("button", name="Session settings").click()
    expect(page.get_by_label("Mode", exact=True)).to_be_hidden()
    if os.environ.get("RAVEN_DOCS_SCREENSHOT"):
        page.screenshot(path=str(DOCS_NARROW_SCREENSHOT))
    page.get_by_role("button", name="Show or hide sessions").click()
    expect(page.get_by_role("navigation", name="Sessions")).to_be_visible()
    unlabelled = page.evaluate(
        """() => [...document.querySelectorAll('button, input, select, textarea')]
            .filter((c) => c.offsetParent !== null)
            .filter((c) => !(c.labels?.length || c.getAttribute('aria-label')
                             || c.textContent.trim()))
            .map((c) => c.outerHTML)"""
    )
    assert unlabelled == []


def test_the_page_reconnects_after_the_gateway_restarts(page: Page, tmp_path: Path) -> None:
    home = tmp_path / "home"
    make_home(home)
    gateway = WebGateway(home, free_port())
    gateway.start()
    try:
        login(page, gateway.first_link)
        new_session(page, work_dir(gateway, "restart"), "stream")
        send(page, "before the restart")
        expect(page.locator(".turn-end")).to_be_visible()
        gateway.stop()
        expect(page.locator("#status")).to_have_text("Offline: reconnecting…")
        gateway.start()
        expect(page.locator("#status")).to_have_text("Online")  # the cookie still holds
        expect(page.locator(".prompt-text")).to_have_text("before the restart")
        expect(page.locator(".answer").last).to_contain_text("Here is")
        send(page, "after the restart")
        expect(page.locator(".turn")).to_have_count(2)
        expect(page.locator(".turn").last.locator(".turn-end")).to_contain_text("Done")
    finally:
        gateway.stop()


def test_raven_web_on_a_running_gateway_prints_a_fresh_link(page: Page, web: WebGateway) -> None:
    done = subprocess.run(
        [*RAVEN, "web", "--no-open"],
        env=web.env,
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
    )
    assert done.returncode == 0, done.stderr
    assert f"{web.base} (the running gateway)" in done.stdout
    link = next(w for w in done.stdout.split() if "/login?code=" in w)
    login(page, link)
    page.goto(link)  # spent, but this browser is signed in: the page
    expect(page.get_by_role("button", name="New session")).to_be_visible()
    assert page.url == web.base + "/"
    stranger = page.context.browser.new_context()  # another browser: no cookie
    try:
        other = stranger.new_page()
        other.goto(link)
        expect(other.locator("body")).to_contain_text("not valid, was used already or has expired")
    finally:
        stranger.close()


def test_a_long_streamed_answer_is_drawn_in_linear_time(page: Page, web: WebGateway) -> None:
    """A 2 MB answer arriving in 2,100 frames: each frame draws what changed, not the whole
    answer again (which took a minute of main-thread time), and ends as drawn whole. The
    clock is read against a counterpart in the same page: drawing the whole answer once
    (streaming costs about nine of those; drawing it at every frame cost about a thousand)."""
    login(page, web.login_link())
    result = page.evaluate(
        """async () => {
            const { drawAnswer } = await import("/app/transcript.js");
            const { renderMarkdown } = await import("/app/markdown.js");
            const chunk = ("word ".repeat(60) + "\\n\\n") + "```py\\nx = 1\\n\\ny = 2\\n```\\n\\n";
            const answer = { node: document.createElement("div"), text: "", settled: 0, live: [] };
            const started = performance.now();
            for (let frame = 0; frame < 2100; frame += 1) {
                answer.text += chunk.repeat(3);
                drawAnswer(answer);
            }
            const ms = performance.now() - started;
            const once = performance.now();
            const whole = document.createElement("div");
            whole.append(renderMarkdown(answer.text));
            const wholeMs = performance.now() - once;
            const same = whole.innerHTML === answer.node.innerHTML;
            return { ms, wholeMs, size: answer.text.length, same };
        }"""
    )
    assert result["size"] > 2_000_000 and result["same"], result
    assert result["ms"] < 60 * result["wholeMs"], result


def test_markdown_renders_in_linear_time_whatever_the_answer_holds(
    page: Page, web: WebGateway
) -> None:
    """Each input that once took seconds, at a 32nd of its size and whole: 32 times the text
    takes about 32 times as long (it took about a thousand). The bound sits between, with
    room for what a busy machine adds to the bigger one (the best of five interleaved tries
    of each leaves out most of it)."""
    login(page, web.login_link())
    timings = page.evaluate(
        """async () => {
            const { renderMarkdown } = await import("/app/markdown.js");
            const inputs = {
                backticks: (n) => "x" + "`".repeat(100000 * n),
                spans: (n) => "`a".repeat(20000 * n),
                stars: (n) => "x" + "*".repeat(100000 * n),
                brackets: (n) => "[a](".repeat(30000 * n),
                mixed: (n) => "**a _b `c [d](e ".repeat(8000 * n),
                comment: (n) => "```c\\n" + "/*".repeat(50000 * n) + "\\n```",
                quotes: (n) => ">".repeat(20000 * n) + " deep",
                nested: (n) => "> ".repeat(6000 * n) + "deep\\n".repeat(3),
                ticks: (n) => "a`b".repeat(50000 * n),
            };
            const time = (text) => {
                const started = performance.now();
                document.createElement("div").append(renderMarkdown(text));
                return performance.now() - started;
            };
            const out = {};
            for (const [name, make] of Object.entries(inputs)) {
                const [part, whole] = [make(1 / 32), make(1)];
                const best = [Infinity, Infinity];
                for (let i = 0; i < 5; i += 1) {  // interleaved: a busy moment hits both
                    best[0] = Math.min(best[0], time(part));
                    best[1] = Math.min(best[1], time(whole));
                }
                out[name] = best;
            }
            return out;
        }"""
    )
    # Two milliseconds' floor: below it the clock's grain, not the work, sets the ratio.
    slow = {name: t for name, t in timings.items() if t[1] >= 256 * max(t[0], 2)}
    assert not slow, timings
    # Quotes nested thousands deep render (they threw RangeError: the stack overflowed),
    # as sixteen levels with the rest as the text they hold.
    deep = page.evaluate(
        """async () => {
            const { renderMarkdown } = await import("/app/markdown.js");
            const div = document.createElement("div");
            div.append(renderMarkdown("> ".repeat(20000) + "the answer"));
            return [div.querySelectorAll("blockquote").length, div.textContent.slice(-10)];
        }"""
    )
    assert deep == [17, "the answer"], deep
    rendered = page.evaluate(
        """async () => {
            const { renderMarkdown } = await import("/app/markdown.js");
            const div = document.createElement("div");
            div.append(renderMarkdown(
                "a **b** *c* _d_ __e__ `f` `` g`h `` [i](https://example.com/i) " +
                "https://example.com/j. snake_case 2*3*4 **open"
            ));
            return div.innerHTML;
        }"""
    )
    assert rendered == (
        "<p>a <strong>b</strong> <em>c</em> <em>d</em> <strong>e</strong> <code>f</code> "
        '<code>g`h</code> <a href="https://example.com/i" rel="noopener noreferrer" '
        'target="_blank">i</a> <a href="https://example.com/j" rel="noopener noreferrer" '
        'target="_blank">https://example.com/j</a>. snake_case 2<em>3</em>4 **open</p>'
    )


def test_the_page_opens_on_a_ready_composer_in_the_gateways_directory(
    page: Page, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    make_home(home)
    with own_gateway(home) as gateway:
        login(page, gateway.first_link)
        expect(page.locator("#title")).to_have_text("New session")
        expect(page.locator("#session-cwd")).to_have_text(str(home))  # where it was started
        expect(page.get_by_label("Message")).to_be_focused()  # no path to type first
        send(page, "straight in")
        expect(page.locator(".prompt-text")).to_have_text("straight in")
        expect(page.locator(".turn-end")).to_contain_text("Done")
        expect(page.locator("#session-cwd")).to_have_text(str(home))
        expect(page.locator("#sessions li[data-session-id]")).to_have_count(1)
        expect(page.get_by_label("Model", exact=True)).to_be_visible()  # a session's own


def test_with_no_model_the_page_says_how_to_add_one_and_offers_the_offline_one(
    page: Page, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.json").write_text("{}")
    with own_gateway(home) as gateway:
        login(page, gateway.first_link)
        help_ = page.locator("#no-model")
        expect(help_).to_contain_text("raven setup")
        expect(help_).to_contain_text("raven models add")
        page.get_by_role("button", name="Try Raven with the offline model").click()
        expect(help_).to_be_hidden()
        send(page, "hello offline")
        expect(page.locator(".answer").last).to_have_text("hello offline")  # it echoes
        expect(page.get_by_label("Model", exact=True)).to_have_value("echo")


def test_a_failed_turn_puts_its_session_under_failed_until_a_turn_ends_well(
    page: Page, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    make_home(home)
    with own_gateway(home) as gateway:
        login(page, gateway.first_link)
        new_session(page, work_dir(gateway, "fails"), "down")
        send(page, "are you there")
        expect(page.locator(".notice.error")).to_be_visible()
        expect(page.locator(".turn-end")).to_have_text(re.compile("^Failed"))  # not "Done"
        expect(page.locator(".turn .notice")).to_have_count(1)  # the error once, not twice
        item = page.locator("#sessions li[data-session-id]")
        expect(item).to_have_attribute("data-state", "failed")
        expect(item.locator(".badge.failed")).to_have_text("failed")
        heading = page.locator("#sessions .group-head")
        expect(heading).to_have_text("Failed")
        page.reload()  # the failure is kept with the session, not only in this page
        expect(item).to_have_attribute("data-state", "failed")
        expect(item.locator(".badge.failed")).to_have_attribute("title", re.compile("127.0.0.1"))
        item.click()
        page.get_by_label("Model", exact=True).select_option("echo")
        send(page, "now you are")
        expect(page.locator(".answer").last).to_have_text("now you are")
        expect(item).to_have_attribute("data-state", "idle")
        expect(heading).to_have_text("Idle")
        page.reload()
        expect(item).to_have_attribute("data-state", "idle")


def test_sessions_that_need_you_come_first(page: Page, tmp_path: Path) -> None:
    home = tmp_path / "home"
    make_home(home)
    with own_gateway(home) as gateway:
        login(page, gateway.first_link)
        new_session(page, work_dir(gateway, "asks"), "ask")  # older
        new_session(page, work_dir(gateway, "newer"), "stream")  # newer, idle
        items = page.locator("#sessions li[data-session-id]")
        expect(items).to_have_count(2)
        expect(page.locator("#sessions .group-head")).to_have_text(["Idle"])
        expect(items.first).to_contain_text("work/newer")
        # Clicked and sent in one go, before the clicked session has loaded: the message
        # goes to the session clicked, not to the one shown before.
        page.evaluate(
            """() => {
                [...document.querySelectorAll("#sessions li[data-session-id] button")]
                    .find((b) => b.textContent.includes("work/asks")).click();
                document.getElementById("prompt").value = "ask me something";
                document.getElementById("composer").requestSubmit();
            }"""
        )
        expect(page.get_by_role("dialog")).to_contain_text("Which branch?")
        expect(items.filter(has_text="work/newer")).to_contain_text("Untitled")
        # The older session, waiting for an answer, now heads the list.
        expect(items.first).to_have_attribute("data-state", "waiting")
        expect(items.first).to_contain_text("work/asks")
        expect(items.nth(1)).to_have_attribute("data-state", "idle")
        headings = page.locator("#sessions .group-head")
        expect(headings).to_have_text(["Needs you", "Idle"])  # each group under its heading
        expect(page.locator("#sessions > li").nth(1)).to_contain_text("work/asks")
        page.get_by_role("dialog").get_by_role("button", name="dev").click()
        expect(page.locator(".turn-end")).to_be_visible()
        expect(items.first).to_have_attribute("data-state", "idle")
