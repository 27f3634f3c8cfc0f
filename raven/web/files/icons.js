// Line icons drawn as inline SVG, so they show the same with or without an emoji font.
// Each is a set of 24×24 path strings, stroked in the text's colour.

const PATHS = {
  menu: ["M4 6h16", "M4 12h16", "M4 18h16"],
  more: ["M5 12h.01", "M12 12h.01", "M19 12h.01"],
  settings: ["M4 6h9", "M17 6h3", "M15 4v4", "M4 12h3", "M11 12h9", "M9 10v4", "M4 18h11", "M19 18h1", "M17 16v4"],
  folder: ["M3 7a2 2 0 0 1 2-2h4l2 2h8a2 2 0 0 1 2 2v8a2 2 0 0 1-2 2H5a2 2 0 0 1-2-2z"],
  read: ["M14 3H6a2 2 0 0 0-2 2v14a2 2 0 0 0 2 2h12a2 2 0 0 0 2-2V9z", "M14 3v6h6"],
  edit: ["M12 20h9", "M16.5 3.5a2.1 2.1 0 0 1 3 3L7 19l-4 1 1-4z"],
  delete: ["M3 6h18", "M8 6V4h8v2", "M6 6l1 14h10l1-14"],
  move: ["M5 12h14", "M13 6l6 6-6 6"],
  search: ["M11 4a7 7 0 1 0 0 14a7 7 0 1 0 0-14z", "M20 20l-3.5-3.5"],
  execute: ["M4 17l6-5-6-5", "M12 19h8"],
  think: ["M21 12a8 8 0 0 1-11.5 7.2L3 21l1.8-6.5A8 8 0 1 1 21 12z"],
  fetch: ["M12 3a9 9 0 1 0 0 18a9 9 0 1 0 0-18z", "M3 12h18", "M12 3c3 3 3 15 0 18", "M12 3c-3 3-3 15 0 18"],
  other: ["M12 9a3 3 0 1 0 0 6a3 3 0 1 0 0-6z"],
};

const SVG = "http://www.w3.org/2000/svg";

export function icon(name) {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("class", "icon");
  svg.setAttribute("aria-hidden", "true");
  for (const d of PATHS[name] || PATHS.other) {
    const path = document.createElementNS(SVG, "path");
    path.setAttribute("d", d);
    svg.append(path);
  }
  return svg;
}

// Fill every element marked `data-icon="name"` with that icon.
export function drawIcons(root = document) {
  for (const node of root.querySelectorAll("[data-icon]")) {
    node.replaceChildren(icon(node.dataset.icon));
  }
}
