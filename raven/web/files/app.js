// The page: session list, one open session, the composer, and the dialogs for approvals and
// questions. Speaks only Raven RPC (see /rpc-schema/openrpc.json in the repository).

import { CODES, DECISIONS } from "./contract.js";
import { drawIcons } from "./icons.js";
import { absolutePath, displayPath, setHome } from "./paths.js";
import { Rpc } from "./rpc.js";
import { renderDiff, Transcript } from "./transcript.js";

const $ = (id) => document.getElementById(id);
const PAGE_SIZE = 30;
const LIST_REFRESH_MS = 15000;

const state = {
  rpc: null,
  models: [],
  modes: [],
  defaults: { model: null, mode: null },
  sessions: new Map(),
  cursor: null,
  listed: 0, // the latest session.list request
  current: null, // { info, busy }
  pending: new Map(), // requestId → announcement (with method)
  asking: null, // requestId shown in the dialog
  gatewayCwd: null, // where `raven web` was started
  opening: null, // a session being created or opened: what is sent meanwhile goes to it
  opens: 0, // counts session opens, so that only the latest takes the page
};
const transcript = new Transcript($("transcript"));

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

// -- connection ------------------------------------------------------------------------------

function connect() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const rpc = new Rpc(`${scheme}://${location.host}/rpc`);
  state.rpc = rpc;
  rpc.addEventListener("open", () => online().catch(report));
  rpc.addEventListener("close", (event) => offline(event.detail.opened));
  rpc.addEventListener("note", (event) => onNote(event.detail));
  rpc.start();
}

async function online() {
  setStatus("online", "Online");
  const hello = await call("system.hello");
  setHome(hello.home);
  state.gatewayCwd = hello.cwd;
  if (!$("new-cwd").value) $("new-cwd").value = displayPath(hello.cwd);
  const [models, modes] = await Promise.all([call("models.list"), call("modes.list")]);
  state.models = models.models;
  state.modes = modes.modes;
  state.defaults = { model: models.default, mode: modes.default };
  state.offline = models.offline;
  $("no-model").hidden = Boolean(models.default);
  await Promise.all([refreshList(), showRoster()]);
  if (state.current?.cursor) {
    // A message sent meanwhile waits until the session is followed again (see `send`).
    await opening(resumeSession());
    return;
  }
  const wanted = state.current?.info.sessionId || decodeURIComponent(location.hash.slice(1));
  if (wanted) await opening(openSession(wanted));
  if (!state.current) showDraft();
}

// Back online with a session shown: its events from where this page left off (the
// transcript on screen stays as it is), and the requests still waiting. A cursor the
// gateway no longer continues (it restarted, or the log moved on) reads the session again.
async function resumeSession() {
  const { sessionId } = state.current.info;
  try {
    await call("session.subscribe", { sessionId, after: state.current.cursor });
  } catch (error) {
    const reread = [CODES.CURSOR_EXPIRED, CODES.SESSION_NOT_FOUND, CODES.INVALID_REQUEST];
    if (!reread.includes(error.code)) throw error;
    await openSession(sessionId);
    return;
  }
  const detail = await call("session.get", { sessionId, historyLimit: 0 });
  for (const note of detail.pending) state.pending.set(note.requestId, note);
  askNext();
}

async function offline(opened) {
  state.pending.clear();
  closeDialogFor(state.asking);
  if (!opened) {
    try {
      const health = await fetch("/health", { cache: "no-store" });
      if (health.ok) {
        setStatus("refused", "Not signed in: open the login link `raven web` prints");
        return;
      }
    } catch {
      // the gateway is down: offline below
    }
  }
  setStatus("offline", "Offline: reconnecting…");
}

function setStatus(kind, text) {
  const status = $("status");
  status.dataset.state = kind;
  status.textContent = text;
  document.body.dataset.connection = kind;
}

async function call(method, params) {
  return state.rpc.call(method, params);
}

function report(error) {
  const banner = $("notice");
  banner.textContent = error.message || String(error);
  banner.hidden = false;
}

function clearReport() {
  $("notice").hidden = true;
}

// -- notifications ---------------------------------------------------------------------------

// Cursors are `epoch.number`: within one epoch an event at or before the page's cursor
// was drawn already (a subscription that overlaps another repeats it); another epoch is
// a new log, whose events are all new.
function isNewer(cursor, seen) {
  if (!seen || !cursor) return true;
  const [epoch, number] = cursor.split(".");
  const [seenEpoch, seenNumber] = seen.split(".");
  return epoch !== seenEpoch || Number(number) > Number(seenNumber);
}

function onNote({ method, params }) {
  const current = state.current?.info.sessionId;
  if (method === "session.event") {
    if (params.sessionId === current) {
      if (!isNewer(params.cursor, state.current.cursor)) return; // drawn already
      state.current.cursor = params.cursor;
    }
    onSessionEvent(params.sessionId, params.event, params.sessionId === current);
  } else if (method === "permission.requested" || method === "question.asked") {
    state.pending.set(params.requestId, { method, ...params });
    bumpWaiting(params.sessionId, 1);
    if (params.sessionId === current) askNext();
  } else if (method === "request.settled") {
    const known = state.pending.get(params.requestId);
    state.pending.delete(params.requestId);
    if (known) bumpWaiting(known.sessionId, -1);
    closeDialogFor(params.requestId);
  }
}

function onSessionEvent(sessionId, event, isCurrent) {
  const info = state.sessions.get(sessionId);
  if (event.type === "TurnStarted" || event.type === "TurnEnded") {
    if (info) info.busy = event.type === "TurnStarted";
    if (info) info.updatedAt = new Date().toISOString();
    if (info && event.type === "TurnEnded") info.failure = event.error || null;
  }
  if (event.type === "TitleChanged" && info) info.title = event.title;
  if (info) renderItem(info);
  if (!isCurrent) return;
  transcript.show(event);
  if (event.type === "TurnStarted") {
    setBusy(true);
  } else if (event.type === "TurnEnded") {
    setBusy(false);
    refreshUsage(sessionId);
  } else if (event.type === "TitleChanged") {
    setTitle(event.title);
  } else if (event.type === "ModeChanged") {
    state.current.info.mode = event.modeId;
    $("mode").value = event.modeId;
  } else if (event.type === "ModelChanged") {
    state.current.info.model = event.modelId;
    $("model").value = event.modelId;
  } else if (event.type === "SessionEnded") {
    state.current.info.closed = true;
    showSessionState();
  }
}

function bumpWaiting(sessionId, delta) {
  const info = state.sessions.get(sessionId);
  if (!info) return;
  info.waiting = Math.max(0, (info.waiting || 0) + delta);
  renderItem(info);
}

// -- session list ----------------------------------------------------------------------------

async function refreshList(more = false) {
  // A refresh of the list on show keeps as many as are shown (a periodic refresh, or one
  // after creating a session, must not undo "Load more"); another filter starts afresh.
  const query = $("filter").value.trim() || null;
  const list = $("sessions");
  const again = (query || "") === list.dataset.query;
  const shown = Math.min(200, Math.max(PAGE_SIZE, state.sessions.size));
  const asked = ++state.listed;
  const page = await call("session.list", {
    limit: again && !more ? shown : PAGE_SIZE,
    query,
    cursor: more ? state.cursor : null,
  });
  if (asked !== state.listed) return; // a newer request (another filter) supersedes this one
  list.dataset.query = query || "";
  if (!more) {
    // Update in place, so a refresh never makes the list flicker under the pointer.
    const keepIds = new Set(page.sessions.map((info) => info.sessionId));
    for (const li of [...list.children]) {
      if (!keepIds.has(li.dataset.sessionId) && !li.matches(".group-head")) li.remove();
    }
    state.sessions.clear();
  }
  for (const info of page.sessions) {
    state.sessions.set(info.sessionId, info);
    list.append(renderItem(info));
  }
  sortList();
  state.cursor = page.nextCursor;
  $("more").hidden = !page.nextCursor;
  if (!state.sessions.size) {
    const none = el("li", "muted", query ? "No session matches." : "No sessions yet.");
    none.dataset.placeholder = "1";
    $("sessions").append(none);
  }
}

// The list is grouped by state, each group under its heading: sessions that need you
// first, then running ones, failed ones, the rest, and closed ones last; newest first
// within each.
const GROUPS = {
  waiting: "Needs you",
  running: "Running",
  failed: "Failed",
  idle: "Idle",
  closed: "Closed",
};
const STATE_RANK = Object.fromEntries(Object.keys(GROUPS).map((state, rank) => [state, rank]));

function itemState(info) {
  if (info.waiting > 0) return "waiting";
  if (info.busy) return "running";
  if (info.closed) return "closed";
  return info.failure ? "failed" : "idle";
}

function sortList() {
  const list = $("sessions");
  const items = [...list.querySelectorAll(":scope > li[data-session-id]")];
  const rank = (li) => STATE_RANK[li.dataset.state] ?? Object.keys(STATE_RANK).length;
  const sorted = [...items].sort((a, b) => rank(a) - rank(b)); // stable: recency kept
  const wanted = [];
  for (const [i, li] of sorted.entries()) {
    if (li.dataset.state !== sorted[i - 1]?.dataset.state) wanted.push(groupHeading(li.dataset.state));
    wanted.push(li);
  }
  wanted.push(...list.querySelectorAll(":scope > [data-placeholder]"));
  const shown = [...list.children];
  if (wanted.length !== shown.length || wanted.some((node, i) => node !== shown[i])) {
    list.replaceChildren(...wanted);
  }
}

function groupHeading(group) {
  const shown = $("sessions").querySelector(`:scope > li.group-head[data-group="${group}"]`);
  if (shown) return shown;
  const heading = el("li", "group-head", GROUPS[group] || group);
  heading.dataset.group = group;
  heading.setAttribute("role", "heading");
  heading.setAttribute("aria-level", "3");
  return heading;
}

function renderItem(info) {
  const list = $("sessions");
  list.querySelector("[data-placeholder]")?.remove();
  let li = list.querySelector(`li[data-session-id="${CSS.escape(info.sessionId)}"]`);
  if (!li) {
    li = el("li");
    li.dataset.sessionId = info.sessionId;
    list.append(li);
  }
  const button = el("button", "session-item");
  button.type = "button";
  if (state.current?.info.sessionId === info.sessionId) button.setAttribute("aria-current", "true");
  const title = el("span", "item-title", info.title || "Untitled");
  const meta = el("span", "item-meta", `${shortPath(info.cwd)} · ${ago(info.updatedAt)}`);
  button.append(title, meta);
  const badges = el("span", "badges");
  if (info.waiting > 0) badges.append(el("span", "badge waiting", "needs you"));
  if (info.busy) badges.append(el("span", "badge busy", "running"));
  if (info.closed) badges.append(el("span", "badge closed", "closed"));
  if (itemState(info) === "failed") {
    const failed = el("span", "badge failed", "failed");
    failed.title = info.failure;
    badges.append(failed);
  }
  button.append(badges);
  button.addEventListener("click", () => opening(openSession(info.sessionId)).catch(report));
  li.replaceChildren(button);
  const moved = li.dataset.state !== itemState(info);
  li.dataset.state = itemState(info);
  if (moved && li.isConnected) sortList();
  return li;
}

function shortPath(path) {
  const shown = displayPath(path);
  const parts = shown.split("/").filter(Boolean);
  return parts.length > 2 ? `…/${parts.slice(-2).join("/")}` : shown;
}

function ago(iso) {
  const seconds = (Date.now() - new Date(iso).getTime()) / 1000;
  if (!Number.isFinite(seconds) || seconds < 60) return "just now";
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)} h ago`;
  return new Date(iso).toLocaleDateString();
}

async function showRoster() {
  const [agents, a2a] = await Promise.all([call("agents.list"), call("a2a.status")]);
  $("agents").replaceChildren(
    ...agents.agents.map((a) => {
      const li = el("li", null, `${a.name} (${a.protocol}, ${a.permissions})`);
      li.title = a.description;
      return li;
    }),
  );
  $("a2a").textContent = !a2a.enabled
    ? ""
    : a2a.mounted
      ? `A2A: serving peers at ${a2a.path}`
      : "A2A: enabled; restart the gateway to serve it";
  $("roster").hidden = !agents.agents.length && !a2a.enabled;
}

// -- one session -----------------------------------------------------------------------------

// Opened through `opening`, so that a message sent meanwhile goes to this session; of two
// opens in flight, the later click wins.
async function openSession(sessionId) {
  const ticket = ++state.opens;
  const previous = state.current?.info.sessionId;
  if (previous && previous !== sessionId) {
    call("session.unsubscribe", { sessionId: previous }).catch(() => {});
  }
  let detail;
  try {
    detail = await call("session.get", { sessionId });
    if (ticket !== state.opens) return;
  } catch (error) {
    if (ticket !== state.opens) return;
    if (error.code === CODES.SESSION_NOT_FOUND) {
      showDraft();
      return;
    }
    throw error;
  }
  state.current = { info: detail.session, busy: detail.session.busy, cursor: null };
  history.replaceState(null, "", `#${encodeURIComponent(sessionId)}`);
  delete $("session").dataset.draft;
  $("empty").hidden = true;
  $("session").hidden = false;
  setTitle(detail.session.title);
  showUsage(detail.usage);
  $("session-cwd").textContent = displayPath(detail.session.cwd);
  const read = detail.projectInstructions;
  $("session-instructions").textContent = read.length ? `follows ${read.join(", ")}` : "";
  showSandbox(detail);
  fillPicker($("model"), state.models, detail.session.model || state.defaults.model);
  fillPicker($("mode"), state.modes, detail.session.mode || state.defaults.mode);
  $("mode").parentElement.hidden = !state.modes.length;
  transcript.clear();
  for (const event of detail.history) transcript.show(event);
  for (const note of detail.pending) state.pending.set(note.requestId, note);
  setBusy(detail.session.busy);
  showSessionState();
  for (const info of state.sessions.values()) renderItem(info);
  if (!detail.session.closed) {
    await call("session.subscribe", { sessionId, after: detail.cursor });
    state.current.cursor = state.current.cursor || detail.cursor;
  }
  if (narrow()) toggleSidebar(false);
  askNext();
  $("prompt").focus();
}

// No session open: a ready composer whose first message starts one in the directory its
// field names (where `raven web` was started, or the last session's, unless changed there).
function showDraft() {
  state.current = null;
  history.replaceState(null, "", location.pathname);
  $("empty").hidden = true;
  $("session").hidden = false;
  $("session").dataset.draft = "true";
  showUsage(null);
  transcript.clear();
  $("title").textContent = "New session";
  $("session-cwd").textContent = $("new-cwd").value;
  $("session-instructions").textContent = "";
  $("session-sandbox").textContent = "";
  $("session-state").textContent = "";
  $("send").textContent = "Send";
  $("cancel").hidden = true;
  // The first message's model and mode can be picked now; they go with session.create.
  fillPicker($("model"), state.models, state.defaults.model);
  fillPicker($("mode"), state.modes, state.defaults.mode);
  $("mode").parentElement.hidden = !state.modes.length;
  // Ready to type, unless the person already is somewhere else (the page loads async).
  if (document.activeElement === document.body) $("prompt").focus();
}

function fillPicker(select, items, chosen) {
  select.replaceChildren(
    ...items.map((item) => {
      const option = el("option", null, item.name || item.id);
      option.value = item.id;
      return option;
    }),
  );
  select.value = chosen || "";
}

function setTitle(title) {
  $("title").textContent = title || "Untitled";
  if (state.current) state.current.info.title = title;
  document.title = `${title || "Untitled"} · Raven`;
}

function setBusy(busy) {
  if (!state.current) return;
  state.current.busy = busy;
  $("send").textContent = busy ? "Steer" : "Send";
  $("cancel").hidden = !busy;
  $("session").dataset.busy = busy ? "true" : "false";
  showSessionState();
}

// What the session used, its sub-agents' tasks included: "1,204 in · 87 out · helper 310 · $0.0123".
function showUsage(usage) {
  const line = $("session-usage");
  line.textContent = "";
  if (!usage) return;
  const count = (n) => n.toLocaleString();
  let input = 0;
  let output = 0;
  let estimated = 0;
  for (const spent of Object.values(usage.models)) {
    input += spent.inputTokens;
    output += spent.outputTokens;
    estimated += spent.estimatedCalls;
  }
  const parts = [`${estimated ? "~" : ""}${count(input)} in · ${count(output)} out`];
  for (const [agent, spent] of Object.entries(usage.agents)) {
    parts.push(`${agent} ${count(spent.inputTokens + spent.outputTokens)}`);
  }
  if (typeof usage.costUsd === "number") parts.push(`$${usage.costUsd.toFixed(4)}`);
  line.textContent = parts.join(" · ");
}

async function refreshUsage(sessionId) {
  try {
    const detail = await call("session.get", { sessionId, historyLimit: 0 });
    if (state.current?.info.sessionId === sessionId) showUsage(detail.usage);
  } catch {
    // The next turn's end tries again.
  }
}

function showSessionState() {
  const { info, busy } = state.current;
  $("session-state").textContent = info.closed ? "closed" : busy ? "working…" : "";
  $("close").disabled = info.closed;
}

async function send(event) {
  event.preventDefault();
  const box = $("prompt");
  const text = box.value.trim();
  if (!text) return;
  // A session still being created or opened takes this message (a second one must not
  // start from the draft meanwhile, nor the one shown before get it).
  while (state.opening) await state.opening.catch(() => {});
  if (!state.current && $("session").dataset.draft) await opening(startFromDraft());
  if (!state.current) return;
  const sessionId = state.current.info.sessionId;
  clearReport();
  if (state.current.busy) {
    const { steered } = await call("turn.steer", { sessionId, text });
    if (!steered) await call("turn.send", { sessionId, text });
  } else {
    await call("turn.send", { sessionId, text });
    setBusy(true);
  }
  box.value = "";
}

// Runs `work` (creating or opening a session) as the one `state.opening`.
async function opening(work) {
  state.opening = work;
  try {
    return await work;
  } finally {
    if (state.opening === work) state.opening = null;
  }
}

async function startFromDraft() {
  const cwd = absolutePath($("new-cwd").value.trim());
  const chosen = { model: $("model").value || state.defaults.model, mode: $("mode").value || null };
  const info = await call("session.create", { cwd, ...chosen });
  await refreshList();
  await openSession(info.sessionId);
}

async function cancelTurn() {
  if (!state.current?.busy) return;
  await call("turn.cancel", { sessionId: state.current.info.sessionId });
}

// "New session": a ready composer in the directory of the session open (or where the
// gateway started); from a ready composer, the session itself, in the directory given.
async function newSession() {
  if ($("session").dataset.draft) {
    $("new-session").requestSubmit();
    return;
  }
  const leaving = state.current?.info;
  if (leaving) {
    call("session.unsubscribe", { sessionId: leaving.sessionId }).catch(() => {});
    $("new-cwd").value = displayPath(leaving.cwd);
  }
  state.opens += 1; // an open still in flight does not take the page back
  showDraft();
  for (const info of state.sessions.values()) renderItem(info);
  if (narrow()) toggleSidebar(false);
  $("prompt").focus();
}

async function createSession(event) {
  event.preventDefault();
  const field = $("new-cwd");
  const error = $("new-error");
  const cwd = absolutePath(field.value.trim());
  const problem = !cwd
    ? "Give the directory the session works in."
    : !cwd.startsWith("/")
      ? "Give an absolute path, starting with / (or ~/)."
      : null;
  if (problem) {
    showFieldError(field, error, problem);
    return;
  }
  try {
    await opening(
      (async () => {
        const info = await call("session.create", { cwd, model: state.defaults.model });
        field.removeAttribute("aria-invalid");
        error.hidden = true;
        await refreshList();
        await openSession(info.sessionId);
      })(),
    );
  } catch (failure) {
    showFieldError(field, error, failure.code === CODES.INVALID_PARAMS ? failure.message : `Could not create: ${failure.message}`);
  }
}

function showFieldError(field, error, text) {
  field.setAttribute("aria-invalid", "true");
  error.textContent = text;
  error.hidden = false;
  field.focus();
}

async function renameSession() {
  const info = state.current.info;
  const title = await openDialog({
    title: "Rename session",
    input: { label: "Title", value: info.title },
    actions: [
      { label: "Rename", value: "submit", primary: true },
      { label: "Cancel", value: null },
    ],
  });
  if (!title) return;
  const updated = await call("session.rename", { sessionId: info.sessionId, title });
  setTitle(updated.title);
  state.sessions.set(updated.sessionId, updated);
  renderItem(updated);
}

async function closeSession() {
  const sessionId = state.current.info.sessionId;
  await call("session.close", { sessionId });
  state.current.info.closed = true;
  setBusy(false);
  await refreshList();
}

async function deleteSession() {
  const info = state.current.info;
  const sure = await openDialog({
    title: "Delete this session?",
    text: `“${info.title || "Untitled"}” and its whole transcript will be deleted. This cannot be undone.`,
    actions: [
      { label: "Cancel", value: null },
      { label: "Delete", value: "delete", danger: true },
    ],
  });
  if (sure !== "delete") return;
  await call("session.delete", { sessionId: info.sessionId });
  showDraft();
  await refreshList();
}

/** The sandbox the session's commands run in, as a session's detail says (none when off). */
function showSandbox(detail) {
  $("session-sandbox").textContent = detail.sandbox ? `sandbox ${detail.sandbox}` : "";
}

async function pick(select, method, key) {
  if (!state.current) return; // a draft's choice, sent when its first message creates it
  const info = state.current.info;
  try {
    const updated = await call(method, { sessionId: info.sessionId, [key]: select.value });
    state.current.info = { ...updated };
    if (key === "mode") {
      showSandbox(await call("session.get", { sessionId: info.sessionId, historyLimit: 0 }));
    }
  } catch (error) {
    select.value = info[key] || state.defaults[key];
    report(error);
  }
}

// -- choosing a directory --------------------------------------------------------------------

async function chooseDirectory() {
  const field = $("new-cwd");
  const typed = absolutePath(field.value.trim());
  let listing = await call("directory.list", { path: typed || state.gatewayCwd }).catch(() =>
    call("directory.list", { path: state.gatewayCwd }),
  );
  const body = el("div", "dir-picker");
  // The directory last clicked, even while its listing loads: what "Use" takes.
  let wanted = listing.path;
  const go = (path) => {
    wanted = path;
    return call("directory.list", { path })
      .then(show)
      .catch((failure) => {
        wanted = listing.path;
        body.append(el("p", "error", failure.message));
      });
  };
  const entry = (label, path) => {
    const button = el("button", "dir-entry", label);
    button.type = "button";
    button.addEventListener("click", () => go(path));
    const li = el("li");
    li.append(button);
    return li;
  };
  function show(found) {
    listing = found;
    const where = el("p", "dir-path", displayPath(found.path));
    where.title = found.path;
    const list = el("ul", "dir-list");
    list.setAttribute("aria-label", "Subdirectories");
    if (found.parent) list.append(entry(".. (up one level)", found.parent));
    for (const name of found.directories) {
      list.append(entry(name, found.path === "/" ? `/${name}` : `${found.path}/${name}`));
    }
    if (!found.directories.length) list.append(el("li", "muted", "No subdirectories."));
    if (found.truncated) {
      list.append(el("li", "muted", `Only the first ${found.directories.length} are shown.`));
    }
    const hadFocus = body.contains(document.activeElement);
    body.replaceChildren(where, list);
    if (hadFocus) list.querySelector("button")?.focus(); // keyboard users stay in the list
  }
  show(listing);
  const chosen = await openDialog({
    title: "Choose a directory",
    body,
    actions: [
      { label: "Use this directory", value: "use", primary: true },
      { label: "Cancel", value: null },
    ],
  });
  if (chosen !== "use") return;
  field.value = displayPath(wanted);
  field.dispatchEvent(new Event("input"));
  field.focus();
}

// -- approvals and questions -----------------------------------------------------------------

let dialogDone = null;

function openDialog({ title, text, body, input, actions, escape = null }) {
  const dialog = $("dialog");
  $("dialog-title").textContent = title;
  const holder = $("dialog-body");
  holder.replaceChildren();
  if (text) holder.append(el("p", null, text));
  if (body) holder.append(body);
  let field = null;
  if (input) {
    const label = el("label", "field", input.label);
    field = el(input.multiline ? "textarea" : "input");
    field.value = input.value || "";
    field.id = "dialog-input";
    label.htmlFor = field.id;
    holder.append(label, field);
  }
  const row = $("dialog-actions");
  row.replaceChildren();
  return new Promise((resolve) => {
    const finish = (value) => {
      dialogDone = null;
      if (dialog.open) dialog.close();
      resolve(value);
    };
    dialogDone = finish;
    for (const action of actions) {
      const button = el("button", action.danger ? "danger" : action.primary ? "primary" : null, action.label);
      button.type = "button";
      if (action.value !== undefined) button.dataset.value = action.value ?? "";
      button.addEventListener("click", () =>
        finish(action.value === "submit" ? field.value.trim() || null : action.value),
      );
      row.append(button);
    }
    if (field) {
      field.addEventListener("keydown", (event) => {
        if (event.key === "Enter" && !event.shiftKey) {
          event.preventDefault();
          finish(field.value.trim() || null);
        }
      });
    }
    dialog.oncancel = (event) => {
      event.preventDefault();
      finish(escape);
    };
    dialog.showModal();
    (field || row.querySelector(".primary") || row.firstChild)?.focus();
  });
}

function closeDialogFor(requestId) {
  if (requestId && state.asking === requestId && dialogDone) dialogDone(undefined);
}

async function askNext() {
  if (state.asking || dialogDone || !state.current) return;
  const note = [...state.pending.values()].find((n) => n.sessionId === state.current.info.sessionId);
  if (!note) return;
  state.asking = note.requestId;
  try {
    if (note.method === "permission.requested") await approve(note);
    else await answer(note);
  } catch (error) {
    if (error.code !== CODES.REQUEST_NOT_FOUND) report(error);
  } finally {
    state.asking = null;
  }
  askNext();
}

async function approve(note) {
  const body = el("div", "approval");
  body.append(el("p", "approval-title", note.title));
  if (note.previewDiff) {
    body.append(renderDiff(note.previewDiff)); // the change, as the transcript shows one
  } else if (note.previewText) {
    body.append(el("pre", "approval-input", note.previewText));
  } else {
    const args = JSON.stringify(note.rawInput, null, 2);
    body.append(el("pre", "approval-input", args.length > 4000 ? `${args.slice(0, 4000)}…` : args));
  }
  const offered = note.offered.filter((d) => d in DECISIONS);
  const decision = await openDialog({
    title: "Allow this tool call?",
    body,
    actions: offered.map((d) => ({
      label: DECISIONS[d],
      value: d,
      primary: d === "allow_once",
      danger: d.startsWith("reject"),
    })),
    escape: offered.includes("reject_once") ? "reject_once" : undefined,
  });
  if (decision === undefined) return;
  await call("permission.respond", { requestId: note.requestId, decision });
}

async function answer(note) {
  const choices = note.choices || [];
  const reply = await openDialog({
    title: "Raven asks",
    text: note.text,
    input: choices.length ? null : { label: "Your answer", value: "" },
    actions: [
      ...choices.map((c, i) => ({ label: c, value: c, primary: i === 0 })),
      ...(choices.length ? [] : [{ label: "Answer", value: "submit", primary: true }]),
      { label: "Skip", value: null },
    ],
    escape: null,
  });
  if (reply === undefined) return;
  await call("question.respond", { requestId: note.requestId, answer: reply });
}

// -- layout ----------------------------------------------------------------------------------

// The session's actions (rename, close, delete) in a menu under its ⋯ button.
function showActions(open) {
  $("actions-menu").hidden = !open;
  $("actions").setAttribute("aria-expanded", String(open));
  if (open) $("actions-menu").querySelector("button:not(:disabled)")?.focus();
}

function toggleSidebar(show) {
  const sidebar = $("sidebar");
  const visible = show ?? sidebar.classList.contains("collapsed");
  sidebar.classList.toggle("collapsed", !visible);
  $("toggle-sessions").setAttribute("aria-expanded", String(visible));
  $("backdrop").hidden = !visible || !narrow(); // a drawer over the page only when narrow
}

function narrow() {
  return window.matchMedia("(max-width: 700px)").matches;
}

function debounce(fn, ms) {
  let timer = null;
  return () => {
    clearTimeout(timer);
    timer = setTimeout(fn, ms);
  };
}

function wire() {
  $("new-session").addEventListener("submit", (e) => createSession(e).catch(report));
  $("new").addEventListener("click", () => newSession().catch(report));
  $("browse").addEventListener("click", () => chooseDirectory().catch(report));
  $("composer").addEventListener("submit", (e) => send(e).catch(report));
  $("prompt").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("composer").requestSubmit();
    }
  });
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !$("dialog").open && state.current?.busy) {
      event.preventDefault();
      cancelTurn().catch(report);
    }
  });
  $("cancel").addEventListener("click", () => cancelTurn().catch(report));
  $("actions").addEventListener("click", () => showActions($("actions-menu").hidden));
  for (const [id, act] of [["rename", renameSession], ["close", closeSession], ["delete", deleteSession]]) {
    $(id).addEventListener("click", () => {
      showActions(false);
      act().catch(report);
    });
  }
  document.addEventListener("click", (event) => {
    if (!event.target.closest(".menu-wrap")) showActions(false);
  });
  $("actions-menu").addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      event.stopPropagation();
      showActions(false);
      $("actions").focus();
    }
  });
  $("model").addEventListener("change", () => pick($("model"), "session.setModel", "model"));
  $("mode").addEventListener("change", () => pick($("mode"), "session.setMode", "mode"));
  $("filter").addEventListener("input", debounce(() => refreshList().catch(report), 200));
  $("more").addEventListener("click", () => refreshList(true).catch(report));
  $("toggle-sessions").addEventListener("click", () => toggleSidebar());
  $("use-offline").addEventListener("click", () => {
    state.defaults.model = state.offline; // new sessions use it; it answers with what it got
    if (!state.current) $("model").value = state.offline;
    $("no-model").hidden = true;
    $("prompt").focus();
  });
  $("toggle-controls").addEventListener("click", () => {
    const open = $("session").querySelector(".session-head").classList.toggle("open");
    $("toggle-controls").setAttribute("aria-expanded", String(open));
  });
  $("new-cwd").addEventListener("input", () => {
    $("new-cwd").removeAttribute("aria-invalid");
    $("new-error").hidden = true;
    if ($("session").dataset.draft) $("session-cwd").textContent = $("new-cwd").value;
  });
  setInterval(() => {
    if (state.rpc?.online && !document.hidden) refreshList().catch(() => {});
  }, LIST_REFRESH_MS);
  $("backdrop").addEventListener("click", () => toggleSidebar(false));
  // A narrow window opens on the conversation and its composer; the sessions are a tap away.
  toggleSidebar(!narrow());
}

drawIcons();
wire();
connect();
