// The GPU map: one compact tile per device with a bar of who holds it, whole or in shares,
// each session in its own colour and named in the segment's title; a node's kernels as a
// table (drawn when its card is opened). Pure drawing: data in, DOM out.

import { bytes, h, resourcesWords, timeEl } from "../dom.js";
import { OTHER_DOMAIN, colourOf, gpuAmount } from "./format.js";

function swatch(id) {
  const mark = h("i", { class: "op-swatch", "aria-hidden": "true" });
  mark.style.background = id ? colourOf(id) : "var(--line)";
  return mark;
}

/** "0.5 · session half-gpu of alice@example.org", "whole · another domain's session". */
export function holdWords(hold) {
  const amount = hold.whole ? "whole" : gpuAmount(hold.hundredths);
  if (!hold.sessionId) return `${amount} · ${OTHER_DOMAIN}`;
  const name = hold.sessionName || hold.sessionId.slice(0, 8);
  return `${amount} · session ${name}${hold.user ? ` of ${hold.user}` : ""}`;
}

export function gpuTile(device) {
  const free = 100 - device.usedHundredths;
  const bar = h("div", { class: "op-gpu-bar" });
  for (const hold of device.holds) {
    const segment = h("span", { class: "op-gpu-seg", dataset: { session: hold.sessionId ?? "" }, title: holdWords(hold) });
    segment.style.width = `${hold.whole ? 100 : hold.hundredths}%`;
    segment.style.background = hold.sessionId ? colourOf(hold.sessionId) : "var(--ink-soft)";
    bar.append(segment);
  }
  const state = device.usedHundredths === 0 ? "free" : free === 0 ? "full" : "shared";
  const said = free === 100 ? "free" : free === 0 ? "full" : `${gpuAmount(free)} free`;
  const details = [`GPU ${device.index}`, device.name, device.memoryBytes !== "0" && bytes(device.memoryBytes),
    device.numaNode !== null && `NUMA ${device.numaNode}`, device.mig && "MIG", said].filter(Boolean);
  return h("div", {
    class: `op-gpu op-gpu-${state}`,
    dataset: { index: device.index, used: device.usedHundredths },
    title: details.join(" · "),
  }, h("span", { class: "op-gpu-label" }, String(device.index)), bar);
}

export function gpuMap(node) {
  if (node.devices.length === 0) {
    return h("p", { class: "hint op-no-gpus" }, node.gpuCapacity > 0
      ? `${gpuAmount(node.gpuCapacity)} GPU, but its agent has not reported the devices.`
      : "No GPUs.");
  }
  return h("div", { class: "op-gpus", role: "img", "aria-label": gpuWords(node) }, node.devices.map(gpuTile));
}

/** The map in words, for a screen reader: "4 GPUs: 2 free, 1 shared, 1 full". */
function gpuWords(node) {
  const count = (state) => node.devices.filter((d) => (d.usedHundredths === 0 ? "free" : d.usedHundredths >= 100 ? "full" : "shared") === state).length;
  return `${node.devices.length} GPUs: ${count("free")} free, ${count("shared")} shared, ${count("full")} full`;
}

/** What a card shows of a node, as one string: the card is drawn again only when it changes. */
export function signature(node) {
  const gpus = node.devices.map((d) => [d.index, d.name, d.memoryBytes, d.numaNode, d.mig, d.usedHundredths,
    d.holds.map((x) => [x.sessionId, x.sessionName, x.user, x.hundredths, x.whole])]);
  return JSON.stringify([node.hostname, node.resourceGroup, node.state, node.reason, node.allocations,
    node.capacity, node.used, gpus]);
}

export function kernelTable(kernels) {
  if (kernels.length === 0) return h("p", { class: "hint" }, "No sessions on it.");
  return h("table", { class: "table compact op-kernels" },
    h("thead", {}, h("tr", {}, ["Session", "Owner", "Holds", "Since"].map((t) => h("th", {}, t)))),
    h("tbody", {}, kernels.map((k) => h("tr", { dataset: { session: k.sessionId ?? "" } },
      h("td", {}, swatch(k.sessionId), " ", k.sessionId
        ? h("a", { href: `#/sessions/${k.sessionId}` }, k.sessionName || k.sessionId.slice(0, 8))
        : h("span", { class: "hint" }, OTHER_DOMAIN),
      k.started ? null : h("span", { class: "tag" }, "starting")),
      h("td", {}, k.user ?? ""),
      h("td", {}, resourcesWords(k.resources)),
      h("td", {}, timeEl(k.since))))));
}

/** A used-of-capacity meter: "CPU 3 of 16 cores". */
export function meter(label, used, capacity, text) {
  const share = capacity > 0 ? Math.min(1, used / capacity) : 0;
  const fill = h("span", { class: "op-meter-fill" });
  fill.style.width = `${Math.round(share * 100)}%`;
  return h("div", { class: "op-meter" }, h("span", { class: "op-meter-label" }, label),
    h("span", { class: "op-meter-bar" }, fill), h("span", { class: "op-meter-text" }, text));
}
