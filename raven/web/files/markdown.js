// Markdown to DOM nodes, small and safe: every piece of text becomes a text node, never HTML,
// and only http(s) and mailto links become links. Covers what models write: paragraphs,
// headings, lists, quotes, rules, pipe tables, fenced code (highlighted, with a copy button),
// inline code, emphasis and links. Unfinished input (a stream) renders as far as it goes.

const SAFE_URL = /^(https?:\/\/|mailto:)/i;

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

// Quotes nest this deep at most; deeper `>` lines show as the text they hold (6,000 levels
// overflowed the stack, and each level re-read every line below it).
const MAX_QUOTE_DEPTH = 16;

export function renderMarkdown(source, depth = 0) {
  const root = document.createDocumentFragment();
  const lines = source.replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    const fence = line.match(/^\s*(`{3,}|~{3,})\s*([\w+#.-]*)/);
    if (fence) {
      const body = [];
      i += 1;
      while (i < lines.length && !lines[i].trim().startsWith(fence[1])) body.push(lines[i++]);
      i += 1;
      root.append(codeBlock(body.join("\n"), fence[2]));
      continue;
    }
    if (!line.trim()) {
      i += 1;
      continue;
    }
    const heading = line.match(/^(#{1,6})\s+(.*)$/);
    if (heading) {
      const level = Math.min(heading[1].length + 2, 6);
      const h = el(`h${level}`);
      h.append(inline(heading[2]));
      root.append(h);
      i += 1;
      continue;
    }
    if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) {
      root.append(el("hr"));
      i += 1;
      continue;
    }
    if (/^\s*>/.test(line)) {
      const quoted = [];
      while (i < lines.length && /^\s*>/.test(lines[i])) quoted.push(lines[i++].replace(/^\s*> ?/, ""));
      const quote = el("blockquote");
      if (depth < MAX_QUOTE_DEPTH) quote.append(renderMarkdown(quoted.join("\n"), depth + 1));
      else quote.append(el("p", null, quoted.join("\n")));
      root.append(quote);
      continue;
    }
    if (isTableRow(line) && i + 1 < lines.length && TABLE_RULE.test(lines[i + 1])) {
      const rows = [line];
      i += 2;
      while (i < lines.length && isTableRow(lines[i])) rows.push(lines[i++]);
      root.append(table(rows));
      continue;
    }
    const item = /^\s*([-*+]|\d+[.)])\s+/;
    if (item.test(line)) {
      const ordered = /^\s*\d/.test(line);
      const list = el(ordered ? "ol" : "ul");
      if (ordered && parseInt(line, 10) !== 1) list.start = parseInt(line, 10);
      while (i < lines.length && item.test(lines[i])) {
        const li = el("li");
        let text = lines[i++].replace(item, "");
        const box = text.match(/^\[([ xX])\]\s+/);
        if (box) {
          const check = el("input");
          check.type = "checkbox";
          check.disabled = true;
          check.checked = box[1] !== " ";
          check.setAttribute("aria-label", check.checked ? "done" : "not done");
          li.append(check, " ");
          text = text.slice(box[0].length);
        }
        while (i < lines.length && /^\s{2,}\S/.test(lines[i]) && !item.test(lines[i])) {
          text += " " + lines[i++].trim();
        }
        li.append(inline(text));
        list.append(li);
      }
      root.append(list);
      continue;
    }
    const para = [];
    while (
      i < lines.length &&
      lines[i].trim() &&
      !/^\s*(`{3,}|~{3,}|#{1,6}\s|>|[-*+]\s|\d+[.)]\s)/.test(lines[i]) &&
      !(isTableRow(lines[i]) && TABLE_RULE.test(lines[i + 1] ?? ""))
    ) {
      para.push(lines[i++]);
    }
    if (!para.length) para.push(lines[i++]);
    const p = el("p");
    p.append(inline(para.join("\n")));
    root.append(p);
  }
  return root;
}

const TABLE_RULE = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

function isTableRow(line) {
  return /^\s*\|.*\|\s*$/.test(line);
}

function cells(row) {
  return row.trim().replace(/^\|/, "").replace(/\|$/, "").split("|").map((c) => c.trim());
}

function table(rows) {
  const wrap = el("div", "table");
  const t = el("table");
  const head = el("thead");
  const headRow = el("tr");
  for (const text of cells(rows[0])) {
    const th = el("th");
    th.append(inline(text));
    headRow.append(th);
  }
  head.append(headRow);
  const body = el("tbody");
  for (const row of rows.slice(1)) {
    const tr = el("tr");
    for (const text of cells(row)) {
      const td = el("td");
      td.append(inline(text));
      tr.append(td);
    }
    body.append(tr);
  }
  t.append(head, body);
  wrap.append(t);
  return wrap;
}

// Inline spans are found by one left-to-right scan, never by a pattern retried from every
// position: each "where is the next ..." answer is remembered, so the work stays linear in the
// text's length whatever it holds (thousands of unmatched backticks or asterisks included).
const SCHEME = /https?:\/\//y;
const URL_RUN = /[^\s<>()]*/y;
const URL_TRAILING = new Set(".,;:!?'\"");
const WORD = /\w/;
const SPACE = /\s/;

class Finder {
  // The next index of a needle at or after a position. A search that started at `from` and
  // found `at` answers every later question from within [from, at], so while positions grow
  // each needle's text is searched once in all.
  constructor(text) {
    this.text = text;
    this.last = new Map();
  }

  next(needle, from) {
    const known = this.last.get(needle);
    if (known && from >= known.from && (known.at === -1 || from <= known.at)) return known.at;
    const at = this.text.indexOf(needle, from);
    this.last.set(needle, { from, at });
    return at;
  }
}

function codeSpans(text) {
  // Each run of backticks → where the code span it opens closes (the next run of the same
  // length), or -1 when none does and the run is plain text.
  const runs = [];
  for (let i = text.indexOf("`"); i !== -1; i = text.indexOf("`", i)) {
    let j = i;
    while (text[j] === "`") j += 1;
    runs.push([i, j - i]);
    i = j;
  }
  const closes = new Map();
  const nextOfLength = new Map();
  for (let k = runs.length - 1; k >= 0; k -= 1) {
    const [at, length] = runs[k];
    closes.set(at, nextOfLength.get(length) ?? -1);
    nextOfLength.set(length, at);
  }
  return closes;
}

export function inline(text) {
  const out = document.createDocumentFragment();
  const find = new Finder(text);
  const spans = codeSpans(text);
  const linkEnds = new Map();
  let plain = 0;
  let i = 0;
  const emit = (node, end) => {
    if (i > plain) out.append(text.slice(plain, i));
    out.append(node);
    plain = i = end;
  };
  const linkEnd = (close) => {
    // `](url)` after a label ending at `close`: the index after `)`, or -1.
    if (!linkEnds.has(close)) {
      const end = text[close + 1] === "(" ? find.next(")", close + 2) : -1;
      const url = end === -1 ? "" : text.slice(close + 2, end);
      linkEnds.set(close, url && !SPACE.test(url) ? end + 1 : -1);
    }
    return linkEnds.get(close);
  };
  while (i < text.length) {
    const c = text[i];
    if (c === "`") {
      let run = i;
      while (text[run] === "`") run += 1;
      const close = spans.get(i);
      if (close === -1) {
        i = run;
        continue;
      }
      const body = text.slice(run, close).replace(/^ ([\s\S]*) $/, "$1");
      emit(el("code", null, body), close + run - i);
      continue;
    }
    if ((c === "*" || c === "_") && text[i + 1] === c) {
      const close = find.next(c + c, i + 3);
      if (close !== -1) {
        const strong = el("strong");
        strong.append(inline(text.slice(i + 2, close)));
        emit(strong, close + 2);
        continue;
      }
    }
    if (c === "*" || (c === "_" && !WORD.test(text[i - 1] ?? " "))) {
      const first = text[i + 1] ?? c;
      const close = first === c || SPACE.test(first) ? -1 : find.next(c, i + 1);
      if (
        close !== -1 &&
        !SPACE.test(text[close - 1]) &&
        (c === "*" || !WORD.test(text[close + 1] ?? " "))
      ) {
        const em = el("em");
        em.append(inline(text.slice(i + 1, close)));
        emit(em, close + 1);
        continue;
      }
    }
    if (c === "[" && text[i + 1] !== "]") {
      const close = find.next("]", i + 1);
      const newline = find.next("\n", i + 1);
      const end = close === -1 || (newline !== -1 && newline < close) ? -1 : linkEnd(close);
      if (end !== -1) {
        emit(link(text.slice(close + 2, end - 1), text.slice(i + 1, close), text.slice(i, end)), end);
        continue;
      }
    }
    if (c === "h") {
      SCHEME.lastIndex = i;
      if (SCHEME.test(text)) {
        URL_RUN.lastIndex = SCHEME.lastIndex;
        const run = URL_RUN.exec(text)[0];
        let length = run.length;
        while (length && URL_TRAILING.has(run[length - 1])) length -= 1;
        const body = run.slice(0, length);
        if (body.length >= 2) {
          const url = text.slice(i, SCHEME.lastIndex) + body;
          emit(link(url, null, url), i + url.length);
          continue;
        }
      }
    }
    i += 1;
  }
  if (plain < text.length) out.append(text.slice(plain));
  return out;
}

function link(url, label, original) {
  if (!SAFE_URL.test(url)) return document.createTextNode(original);
  const a = el("a");
  a.href = url;
  a.rel = "noopener noreferrer";
  a.target = "_blank";
  if (label === null) a.textContent = url;
  else a.append(inline(label));
  return a;
}

function codeBlock(code, language) {
  const figure = el("figure", "code");
  const head = el("figcaption", null);
  head.append(el("span", "lang", language || "text"));
  const copy = el("button", "copy", "Copy");
  copy.type = "button";
  copy.setAttribute("aria-label", "Copy code");
  copy.addEventListener("click", () => copyText(code, copy));
  head.append(copy);
  const pre = el("pre");
  const codeEl = el("code");
  codeEl.append(highlight(code, language));
  pre.append(codeEl);
  figure.append(head, pre);
  return figure;
}

async function copyText(text, button) {
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    const area = el("textarea");
    area.value = text;
    document.body.append(area);
    area.select();
    document.execCommand("copy");
    area.remove();
  }
  button.textContent = "Copied";
  setTimeout(() => (button.textContent = "Copy"), 1500);
}

const KEYWORDS = new Set(
  (
    "as async await break case catch class const continue def default del do elif else enum " +
    "except export extends false finally fn for from func function go if impl import in " +
    "interface is lambda let match mod mut new nil none null pass private pub public raise " +
    "return self static struct super switch this throw true try type typeof use var void " +
    "while with yield True False None and or not local then end echo fi esac done"
  ).split(" "),
);
// An unclosed comment or string runs to the end (of the code, or of its line): a closing
// delimiter that never comes is looked for once, not again from every opening one.
const TOKENS =
  /(\/\/[^\n]*|#[^\n]*|\/\*[\s\S]*?(?:\*\/|$)|--[^\n]*)|("(?:\\.|[^"\\\n])*"?|'(?:\\.|[^'\\\n])*'?|`(?:\\.|[^`\\])*`?)|(\b\d[\d_]*(?:\.\d+)?(?:e[+-]?\d+)?\b|\b0x[\da-f]+\b)|([A-Za-z_][\w]*)/gi;
const HASH_COMMENTS = /^(py|python|sh|bash|shell|zsh|rb|ruby|toml|yaml|yml|r|perl|make|dockerfile|conf|ini)$/i;
const DASH_COMMENTS = /^(sql|lua|haskell|hs)$/i;

export function highlight(code, language) {
  const out = document.createDocumentFragment();
  let last = 0;
  for (const m of code.matchAll(TOKENS)) {
    let kind = null;
    if (m[1]) {
      const hash = m[1].startsWith("#");
      const dash = m[1].startsWith("--");
      if ((hash && !HASH_COMMENTS.test(language)) || (dash && !DASH_COMMENTS.test(language))) {
        continue;
      }
      kind = "tok-com";
    } else if (m[2]) kind = "tok-str";
    else if (m[3]) kind = "tok-num";
    else if (m[4] && KEYWORDS.has(m[4])) kind = "tok-kw";
    if (!kind) continue;
    if (m.index > last) out.append(code.slice(last, m.index));
    out.append(el("span", kind, m[0]));
    last = m.index + m[0].length;
  }
  if (last < code.length) out.append(code.slice(last));
  return out;
}
