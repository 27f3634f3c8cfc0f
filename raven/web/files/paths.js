// Paths as a person reads them: the gateway user's home shown as ~, and ~ typed by a person
// made absolute again before it reaches the gateway. Knows nothing of the page.

let home = null;

export function setHome(path) {
  home = path && path !== "/" ? path.replace(/\/+$/, "") : null;
}

export function displayPath(path) {
  if (!home || !path) return path;
  if (path === home) return "~";
  return path.startsWith(`${home}/`) ? `~${path.slice(home.length)}` : path;
}

export function absolutePath(typed) {
  if (!home) return typed;
  if (typed === "~") return home;
  return typed.startsWith("~/") ? home + typed.slice(1) : typed;
}
