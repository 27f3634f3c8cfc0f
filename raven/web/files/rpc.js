// Raven RPC over the gateway's WebSocket: calls with deadlines, notifications as events,
// and reconnection with backoff. Knows nothing of the page.

const CALL_TIMEOUT_MS = 20000;
const BACKOFF_MS = [250, 500, 1000, 2000, 4000, 8000];

export class RpcError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

export class Rpc extends EventTarget {
  constructor(url) {
    super();
    this.url = url;
    this.ws = null;
    this.nextId = 1;
    this.pending = new Map();
    this.attempt = 0;
    this.online = false;
  }

  start() {
    const ws = new WebSocket(this.url);
    this.ws = ws;
    let opened = false;
    ws.onopen = () => {
      opened = true;
      this.attempt = 0;
      this.online = true;
      this.dispatchEvent(new Event("open"));
    };
    ws.onmessage = (message) => this.receive(message.data);
    ws.onclose = () => {
      this.online = false;
      for (const { reject, timer } of this.pending.values()) {
        clearTimeout(timer);
        reject(new RpcError(-1, "the gateway connection was lost"));
      }
      this.pending.clear();
      this.dispatchEvent(new CustomEvent("close", { detail: { opened } }));
      const delay = BACKOFF_MS[Math.min(this.attempt, BACKOFF_MS.length - 1)];
      this.attempt += 1;
      setTimeout(() => this.start(), delay * (0.75 + Math.random() / 2));
    };
  }

  receive(text) {
    let frame;
    try {
      frame = JSON.parse(text);
    } catch {
      return;
    }
    if (frame.method) {
      this.dispatchEvent(new CustomEvent("note", { detail: frame }));
      return;
    }
    const waiting = this.pending.get(frame.id);
    if (!waiting) return;
    this.pending.delete(frame.id);
    clearTimeout(waiting.timer);
    if (frame.error) waiting.reject(new RpcError(frame.error.code, frame.error.message));
    else waiting.resolve(frame.result);
  }

  call(method, params = {}) {
    if (!this.online) return Promise.reject(new RpcError(-1, "offline"));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new RpcError(-2, `${method}: no answer from the gateway`));
      }, CALL_TIMEOUT_MS);
      this.pending.set(id, { resolve, reject, timer });
      this.ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
    });
  }
}
