// The GPU map: one tile per device with a bar of who holds it, whole or in shares, each
// session in its own colour; and a node's kernels as a table. Pure drawing: data in, DOM out.

import { bytes, h, resourcesWords, timeEl } from "../dom.js";
import { OTHER_DOMAIN, colourOf, gpuAmount } from "./format.js";

function holder(hold) {
  if (!hold.sessionId) return h("span", { class: "hint" }, OTHER_DOMAIN);
  return [
    h("a", { href: `#/sessions/${hold.sessionId}` }, hold.sessionName || hold.sessionId.slice(0, 8)),
    hold.user && h("span", { class: "sub" }, ` ${hold.user}`),
  ];
}

function swatch(id) {
  const mark = h("i", { class: "op-swatch", "aria-hidden": "true" });
  mark.style.background = id ? colourOf(id) : "var(--line)";
  return mark;
}

export function gpuTile(device) {
  const free = 100 - device.usedHundredths;
  const bar = h("div", { class: "op-gpu-bar", role: "img", "aria-label": `${device.usedHundredths}% held` });
  for (const hold of device.holds) {
    const segment = h("span", { class: "op-gpu-seg", dataset: { session: hold.sessionId ?? "" } });
    segment.style.width = `${hold.whole ? 100 : hold.hundredths}%`;
    segment.style.background = hold.sessionId ? colourOf(hold.sessionId) : "var(--ink-soft)";
    segment.title = `${hold.whole ? "whole" : gpuAmount(hold.hundredths)} · ${hold.sessionName || hold.sessionId || OTHER_DOMAIN}`;
    bar.append(segment);
  }
  const state = device.usedHundredths === 0 ? "free" : free === 0 ? "full" : "shared";
  const details = [device.name, device.memoryBytes !== "0" && bytes(device.memoryBytes),
    device.numaNode !== null && `NUMA ${device.numaNode}`, device.mig && "MIG", device.uuid].filter(Boolean);
  return h("div", {
    class: `op-gpu op-gpu-${state}`,
    dataset: { index: device.index, used: device.usedHundredths },
    title: details.join(" · "),
  },
  h("div", { class: "op-gpu-label" }, h("strong", {}, `GPU ${device.index}`),
    h("span", { class: "sub" }, free === 100 ? "free" : free === 0 ? "full" : `${gpuAmount(free)} free`)),
  bar,
  device.holds.length > 0 && h("ul", { class: "op-gpu-holds" }, device.holds.map((hold) => h("li", {},
    swatch(hold.sessionId), h("span", { class: "op-amount" }, hold.whole ? "whole" : gpuAmount(hold.hundredths)), " ", holder(hold)))));
}

export function gpuMap(node) {
  if (node.devices.length === 0) {
    return h("p", { class: "hint op-no-gpus" }, node.gpuCapacity > 0
      ? `${gpuAmount(node.gpuCapacity)} GPU, but its agent has not reported the devices.`
      : "No GPUs.");
  }
  return h("div", { class: "op-gpus" }, node.devices.map(gpuTile));
}

export function kernelTable(node) {
  if (node.kernels.length === 0) return h("p", { class: "hint" }, "No sessions on it.");
  return h("table", { class: "table compact op-kernels" },
    h("thead", {}, h("tr", {}, ["Session", "Owner", "Holds", "Since"].map((t) => h("th", {}, t)))),
    h("tbody", {}, node.kernels.map((k) => h("tr", { dataset: { session: k.sessionId ?? "" } },
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
