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

export function renderMarkdown(source) {
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
      quote.append(renderMarkdown(quoted.join("\n")));
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

const INLINE =
  /(`+)([\s\S]*?[^`])\1(?!`)|\*\*([\s\S]+?)\*\*|__([\s\S]+?)__|\[([^\]\n]+)\]\(([^)\s]+)\)|\*([^*\s](?:[^*]*[^*\s])?)\*|(?<![\w])_([^_\s](?:[^_]*[^_\s])?)_(?![\w])|(https?:\/\/[^\s<>()]+[^\s<>().,;:!?'"])/;

export function inline(text) {
  const out = document.createDocumentFragment();
  let rest = text;
  while (rest) {
    const m = rest.match(INLINE);
    if (!m) {
      out.append(rest);
      break;
    }
    if (m.index) out.append(rest.slice(0, m.index));
    rest = rest.slice(m.index + m[0].length);
    if (m[1]) {
      out.append(el("code", null, m[2].replace(/^ (.*) $/, "$1")));
    } else if (m[3] !== undefined || m[4] !== undefined) {
      const strong = el("strong");
      strong.append(inline(m[3] ?? m[4]));
      out.append(strong);
    } else if (m[5] !== undefined) {
      out.append(link(m[6], m[5], m[0]));
    } else if (m[7] !== undefined || m[8] !== undefined) {
      const em = el("em");
      em.append(inline(m[7] ?? m[8]));
      out.append(em);
    } else {
      out.append(link(m[9], null, m[9]));
    }
  }
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
const TOKENS =
  /(\/\/[^\n]*|#[^\n]*|\/\*[\s\S]*?\*\/|--[^\n]*)|("(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|`(?:\\.|[^`\\])*`)|(\b\d[\d_]*(?:\.\d+)?(?:e[+-]?\d+)?\b|\b0x[\da-f]+\b)|([A-Za-z_][\w]*)/gi;
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
