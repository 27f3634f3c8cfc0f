// One session's conversation as DOM: the prompt, the streamed answer (markdown), thoughts,
// tool calls with their status, output and diffs, plans, and how each turn ended. Fed the
// session events of Raven RPC (live) or of `session.get` (the session so far), the same way.

import { icon } from "./icons.js";
import { renderMarkdown } from "./markdown.js";
import { displayPath } from "./paths.js";

const STATUS_TEXT = { in_progress: "running", completed: "done", failed: "failed" };
// What a tool call does, in words; "other" says nothing a person could use.
const KIND_TEXT = {
  read: "read",
  edit: "edit",
  delete: "delete",
  move: "move",
  search: "search",
  execute: "command",
  think: "thinking",
  fetch: "web",
  other: "",
};
// How a turn ended, in words (the engine's stop reason stays in data-stop-reason).
const STOP_TEXT = {
  end_turn: "Done",
  cancelled: "Stopped",
  max_tokens: "Stopped: the answer reached the model's length limit",
  max_turn_requests: "Stopped: the turn took the most steps allowed",
  refusal: "The model declined",
};
const MAX_DIFF_CELLS = 400000;

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

export class Transcript {
  constructor(container) {
    this.container = container;
    this.clear();
  }

  clear() {
    this.container.replaceChildren();
    this.turn = null;
    this.notice = null;
    this.answer = null;
    this.thought = null;
    this.calls = new Map();
    this.usage = null;
    this.plan = null;
  }

  show(event) {
    const handler = this[`on${event.type}`];
    if (handler) handler.call(this, event);
    this.scroll();
  }

  scroll() {
    const c = this.container;
    if (c.scrollHeight - c.scrollTop - c.clientHeight < 200) c.scrollTop = c.scrollHeight;
  }

  currentTurn() {
    if (!this.turn) this.startTurn();
    return this.turn;
  }

  startTurn() {
    this.turn = el("article", "turn");
    this.container.append(this.turn);
    this.answer = null;
    this.thought = null;
    this.plan = null;
    this.usage = null;
  }

  onTurnStarted(event) {
    this.startTurn();
    const text = (event.parts || [])
      .map((p) => (p.type === "text" ? p.text : `[${p.type}]`))
      .join("\n");
    const prompt = el("div", "prompt");
    prompt.append(el("span", "who", "You"), el("div", "prompt-text", text));
    this.turn.append(prompt);
  }

  onAgentText(event) {
    if (!this.answer) {
      this.answer = { node: el("div", "answer markdown"), text: "", settled: 0, live: [] };
      this.answer.node.setAttribute("aria-live", "polite");
      this.currentTurn().append(this.answer.node);
      this.thought = null;
    }
    const answer = this.answer;
    answer.text += event.text;
    if (!answer.queued) {
      answer.queued = true;
      requestAnimationFrame(() => {
        answer.queued = false;
        drawAnswer(answer);
        this.scroll();
      });
    }
  }

  onAgentThought(event) {
    if (!this.thought) {
      const details = el("details", "thought");
      details.append(el("summary", null, "Thinking"), el("div", "thought-text"));
      this.currentTurn().append(details);
      this.thought = details.lastChild;
      this.answer = null;
    }
    this.thought.textContent += event.text;
  }

  onToolCallStarted(event) {
    this.answer = null;
    this.thought = null;
    const card = el("div", "tool");
    card.dataset.callId = event.callId;
    card.dataset.status = "in_progress";
    const head = el("div", "tool-head");
    const glyph = el("span", "tool-icon");
    glyph.append(icon(event.kind));
    const status = el("span", "tool-status", STATUS_TEXT.in_progress);
    const kind = el("span", "tool-kind", KIND_TEXT[event.kind] ?? "");
    head.append(glyph, el("span", "tool-title", event.title), kind, status);
    const body = el("div", "tool-body");
    card.append(head, body);
    card.setAttribute("aria-label", `${event.title}: ${STATUS_TEXT.in_progress}`);
    this.currentTurn().append(card);
    this.calls.set(event.callId, { card, status, body, title: event.title });
  }

  onToolCallUpdated(event) {
    const call = this.calls.get(event.callId);
    if (!call) return;
    call.card.dataset.status = event.status;
    call.status.textContent = STATUS_TEXT[event.status] || event.status;
    call.card.setAttribute("aria-label", `${call.title}: ${call.status.textContent}`);
    if (event.status === "in_progress") {
      if (event.detail?.agent) {
        showChild(call, event.detail);
      } else if (event.content) {
        let line = call.body.querySelector(".tool-progress");
        if (!line) call.body.append((line = el("div", "tool-progress")));
        line.textContent = event.content;
      }
      return;
    }
    call.body.querySelector(".tool-progress")?.remove();
    if (event.diff) call.body.append(renderDiff(event.diff));
    if (event.content) {
      const output = el("details", "tool-output");
      output.append(el("summary", null, "Output"), el("pre", null, event.content));
      if (event.status === "failed") output.open = true;
      call.body.append(output);
    }
  }

  onPlanUpdated(event) {
    if (!this.plan) {
      this.plan = el("ul", "plan");
      this.plan.setAttribute("aria-label", "Plan");
      this.currentTurn().append(this.plan);
    }
    this.plan.replaceChildren(
      ...event.steps.map((step) => {
        const li = el("li", `plan-${step.status}`);
        const box = el("input");
        box.type = "checkbox";
        box.disabled = true;
        box.checked = step.status === "completed";
        box.setAttribute("aria-label", step.status.replace("_", " "));
        li.append(box, " ", el("span", null, step.content));
        return li;
      }),
    );
    this.answer = null;
  }

  onUsageUpdated(event) {
    this.usage = event;
  }

  onCompactionUpdated(event) {
    // A marker where the conversation was compacted: the model sees the summary from here.
    if (event.status === "in_progress") return;
    const marker = el("details", "compaction");
    marker.dataset.status = event.status;
    const said =
      event.status === "completed"
        ? "Compacted: the model sees a summary of the conversation before this point"
        : `Compaction ${event.status}${event.error ? `: ${event.error}` : ""}`;
    marker.append(el("summary", null, said));
    if (event.summary) marker.append(el("div", "compaction-summary", event.summary));
    this.currentTurn().append(marker);
    this.answer = null;
  }

  onNotice(event) {
    this.notice = el("div", "notice", event.text);
    this.currentTurn().append(this.notice);
    this.answer = null;
  }

  onTurnEnded(event) {
    const footer = el("div", "turn-end");
    footer.dataset.stopReason = event.stopReason;
    // A failed turn keeps ACP's stop reasons (end_turn, its last word); it is no "Done".
    const parts = [event.error ? "Failed" : STOP_TEXT[event.stopReason] || "Stopped"];
    if (this.usage) {
      const used = this.usage.usedTokens.toLocaleString();
      const window = this.usage.contextWindow ? ` of ${this.usage.contextWindow.toLocaleString()}` : "";
      parts.push(`${this.usage.estimated ? "~" : ""}${used}${window} tokens`);
    }
    footer.textContent = parts.join(" · ");
    this.currentTurn().append(footer);
    // The error once: the notice that told it already, marked as the turn's failure.
    if (event.error && this.notice?.textContent === event.error) {
      this.notice.classList.add("error");
    } else if (event.error) {
      this.turn.append(el("div", "notice error", event.error));
    }
    this.turn = null;
    this.notice = null;
    this.answer = null;
    this.thought = null;
  }
}

// A sub-agent's work under the delegate call that runs it: each of its tool calls with its
// state, its plan, and what it says, as they happen; kept when the call ends.
const CHILD_MARK = { completed: "✓", failed: "✗" };

function showChild(call, detail) {
  let child = call.body.querySelector(".child");
  if (!child) {
    child = el("div", "child");
    child.setAttribute("aria-label", `What ${detail.agent} does`);
    child.append(el("ul", "child-calls"), el("div", "child-text"));
    call.body.append(child);
  }
  if (detail.toolCallId) {
    const calls = child.querySelector(".child-calls");
    let row = [...calls.children].find((li) => li.dataset.callId === detail.toolCallId);
    if (!row) {
      row = el("li");
      row.dataset.callId = detail.toolCallId;
      calls.append(row);
    }
    row.dataset.status = detail.status || "in_progress";
    row.textContent = `${CHILD_MARK[detail.status] || "→"} ${detail.title}`;
  } else if (detail.plan) {
    let plan = child.querySelector(".child-plan");
    if (!plan) child.insertBefore((plan = el("ul", "child-plan")), child.lastChild);
    plan.replaceChildren(...detail.plan.map((step) => el("li", `plan-${step.status}`, step.content)));
  } else if (typeof detail.text === "string") {
    child.querySelector(".child-text").textContent = detail.text;
  }
}

// A streamed answer is drawn in time linear in its length: what ends at its last blank
// line outside a code fence is rendered once and kept, and only what follows is drawn
// again at each frame (a 2 MB answer drawn whole at every frame took a minute of the page's
// main thread).
export function drawAnswer(answer) {
  for (const node of answer.live) node.remove();
  const cut = settledEnd(answer.text, answer.settled);
  if (cut > answer.settled) {
    answer.node.append(renderMarkdown(answer.text.slice(answer.settled, cut)));
    answer.settled = cut;
  }
  const live = renderMarkdown(answer.text.slice(answer.settled));
  answer.live = [...live.childNodes];
  answer.node.append(live);
}

// Where the part of `text` that no later text can change ends: after its last blank line,
// when no code fence is open there; `from` (what is settled already) when there is none.
function settledEnd(text, from) {
  const blank = text.lastIndexOf("\n\n");
  if (blank < from) return from;
  const fences = (text.slice(from, blank).match(/^\s*(`{3,}|~{3,})/gm) || []).length;
  return fences % 2 === 0 ? blank + 2 : from;
}

export function renderDiff(diff) {
  const figure = el("figure", "diff");
  figure.append(el("figcaption", null, displayPath(diff.path)));
  const pre = el("pre");
  if (diff.oldText === diff.newText) pre.append(el("span", "diff-none", "no change"));
  for (const [sign, line] of diffLines(diff.oldText ?? "", diff.newText)) {
    const kind = sign === "+" ? "add" : sign === "-" ? "del" : "ctx";
    pre.append(el("span", `diff-${kind}`, `${sign} ${line}\n`));
  }
  figure.append(pre);
  return figure;
}

export function diffLines(oldText, newText, context = 3) {
  const a = lines(oldText);
  const b = lines(newText);
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const out = a.slice(Math.max(0, start - context), start).map((l) => [" ", l]);
  const midA = a.slice(start, endA);
  const midB = b.slice(start, endB);
  if (midA.length * midB.length > MAX_DIFF_CELLS) {
    out.push(...midA.map((l) => ["-", l]), ...midB.map((l) => ["+", l]));
  } else {
    out.push(...lcsDiff(midA, midB));
  }
  out.push(...a.slice(endA, endA + context).map((l) => [" ", l]));
  return out;
}

function lines(text) {
  if (!text) return [];
  const all = text.split("\n");
  if (all[all.length - 1] === "") all.pop();
  return all;
}

function lcsDiff(a, b) {
  const rows = a.length + 1;
  const cols = b.length + 1;
  const table = new Uint32Array(rows * cols);
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      table[i * cols + j] =
        a[i] === b[j]
          ? table[(i + 1) * cols + j + 1] + 1
          : Math.max(table[(i + 1) * cols + j], table[i * cols + j + 1]);
    }
  }
  const out = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    if (a[i] === b[j]) {
      out.push([" ", a[i]]);
      i++;
      j++;
    } else if (table[(i + 1) * cols + j] >= table[i * cols + j + 1]) out.push(["-", a[i++]]);
    else out.push(["+", b[j++]]);
  }
  while (i < a.length) out.push(["-", a[i++]]);
  while (j < b.length) out.push(["+", b[j++]]);
  return out;
}
