// Building the page: h() for elements, and the few formats every page shares.

/**
 * h("a", {href: "#/x", class: "button", onclick: fn}, "text", child, [more]) -> element.
 * Attributes named on* become listeners; `text` sets textContent; null/false children vanish.
 */
export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes ?? {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      element.addEventListener(name.slice(2), value);
    } else if (name === "text") {
      element.textContent = value;
    } else if (name === "dataset") {
      Object.assign(element.dataset, value);
    } else if (name === "value" || name === "checked" || name === "selected") {
      element[name] = value;
    } else {
      element.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(element, children);
  return element;
}

export function append(element, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

export function replace(element, ...children) {
  element.replaceChildren();
  return append(element, children);
}

const UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];

/** 1536 -> "1.5 KiB"; accepts numbers and decimal strings. */
export function bytes(value) {
  let amount = Number(value);
  if (!Number.isFinite(amount)) return String(value);
  let unit = 0;
  while (amount >= 1024 && unit < UNITS.length - 1) {
    amount /= 1024;
    unit += 1;
  }
  return `${unit === 0 ? amount : amount.toFixed(amount < 10 ? 1 : 0)} ${UNITS[unit]}`;
}

/** What a kernel asks or holds ({cpu, memoryBytes, gpu}): "2 CPU · 4 GiB · 1 GPU" (no GPU part
 * when it has none). */
export function resourcesWords(r) {
  const parts = [`${r.cpu} CPU`, bytes(r.memoryBytes)];
  if (Number(r.gpu) > 0) parts.push(`${r.gpu} GPU`);
  return parts.join(" · ");
}

/** A policy's limits on resources ({cpu, memoryBytes, gpu}, each null when unlimited). */
export function limitsWords(l) {
  return [l.cpu && `${l.cpu} CPU`, l.memoryBytes && bytes(l.memoryBytes), l.gpu && `${l.gpu} GPU`]
    .filter(Boolean).join(" · ") || "no limit";
}

/** A limit that may be unset: "no limit" then. */
export function limitText(value, unit = "") {
  return value === null || value === undefined ? "no limit" : `${value}${unit}`;
}

export function cores(value) {
  const n = Number(value);
  return `${value} ${n === 1 ? "core" : "cores"}`;
}

export function gpus(value) {
  return Number(value) === 0 ? "no GPU" : `${value} GPU`;
}

const timeFormat = new Intl.DateTimeFormat(undefined, {
  year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit",
});

const clockFormat = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit" });

/** The time of day with seconds (the full date in the title). */
export function clockEl(iso) {
  return h("time", { datetime: iso, title: when(iso) }, clockFormat.format(new Date(iso)));
}

/** Command words as a shell would read them back: quoted where they hold spaces or quotes. */
export function shellWords(words) {
  return words.map((w) => (/^[A-Za-z0-9_./:=@%+,-]+$/.test(w) ? w : `'${w.replaceAll("'", "'\\''")}'`)).join(" ");
}

export function when(iso) {
  if (!iso) return "";
  return timeFormat.format(new Date(iso));
}

/** "3 min ago", or "in 30 days" for a time to come (an expiry); the exact time goes in the
 * element's title. */
export function ago(iso) {
  if (!iso) return "";
  const delta = Math.round((Date.now() - new Date(iso).getTime()) / 1000);
  const seconds = Math.abs(delta);
  const said = (text) => (delta < 0 ? `in ${text}` : `${text} ago`);
  if (seconds < 45) return delta < 0 ? "in a moment" : "just now";
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) return said(`${minutes} min`);
  const hours = Math.round(minutes / 60);
  if (hours < 36) return said(`${hours} h`);
  return said(`${Math.round(hours / 24)} days`);
}

export function timeEl(iso) {
  return h("time", { datetime: iso, title: when(iso) }, ago(iso));
}

export const FINAL = new Set(["TERMINATED", "CANCELLED", "ERROR"]);

export function statusBadge(status) {
  return h("span", { class: `status status-${status.toLowerCase()}`, dataset: { status } }, status);
}

export function shortId(id) {
  return id.length > 12 ? `${id.slice(0, 8)}…` : id;
}
