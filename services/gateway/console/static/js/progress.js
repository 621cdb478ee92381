// A progress bar with its words beside it, for what the console follows as it goes: an image
// pull on the session page and on Operate › Cluster's node cards, a registry rescan on Operate ›
// Images.

import { bytes, h } from "./dom.js";

/** share: 0..1 (clamped); text: what it says beside the bar. */
export function progressBar(share, text, attributes = {}) {
  const part = Math.max(0, Math.min(1, Number.isFinite(share) ? share : 0));
  const fill = h("span", { class: "progress-fill" });
  fill.style.width = `${Math.round(part * 100)}%`; // CSSOM, not a style attribute: no inline style
  return h("div", { class: "progress", ...attributes },
    h("span", { class: "progress-bar", role: "progressbar", "aria-valuemin": 0, "aria-valuemax": 100, "aria-valuenow": Math.round(part * 100) }, fill),
    h("span", { class: "progress-text" }, text));
}

/** "12 MiB of 48 MiB (25%)"; "12 MiB" while the total is not known yet. */
export function bytesOf(done, total) {
  if (!(total > 0)) return bytes(done);
  return `${bytes(done)} of ${bytes(total)} (${Math.floor((100 * done) / total)}%)`;
}
