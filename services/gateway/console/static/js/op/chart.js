// Charts as inline SVG, drawn here (no chart library): horizontal bars for one value per row,
// and stacked columns for values over time. Each returns an element; numbers are worded by
// the caller's `format`.

import { h } from "../dom.js";

const NS = "http://www.w3.org/2000/svg";
export const PALETTE = ["#1f4e79", "#d1793b", "#2f8f5b", "#8a4fb8", "#c23b55", "#2a9aa8", "#8c7a2b", "#5c6bc0"];
export const OTHERS = "#aab3bc";

function svg(tag, attributes = {}, ...children) {
  const element = document.createElementNS(NS, tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value !== null && value !== undefined && value !== false) element.setAttribute(name, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

function clip(text, n) {
  return text.length > n ? `${text.slice(0, n - 1)}…` : text;
}

/** A value axis's top: 1, 2 or 5 times a power of ten, at or above `max`. */
export function niceMax(max) {
  if (!(max > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(max));
  return [1, 2, 5, 10].map((m) => m * power).find((top) => top >= max);
}

/** rows: [{label, value, colour?, title?}], largest first. Draw it `width` wide (its box's). */
export function barChart(rows, { format, title, width = 720 }) {
  const bar = 20;
  const gap = 8;
  const left = Math.min(220, Math.round(width * 0.32));
  const right = 110;
  const height = rows.length * (bar + gap) + gap;
  const max = niceMax(Math.max(0, ...rows.map((r) => r.value)));
  const scale = (width - left - right) / max;
  return svg("svg", { class: "op-chart op-bars", viewBox: `0 0 ${width} ${height}`, width: "100%", role: "img", "aria-label": title },
    svg("title", {}, title),
    rows.map((r, i) => {
      const y = gap + i * (bar + gap);
      const w = Math.max(r.value > 0 ? 1 : 0, r.value * scale);
      return svg("g", { class: "op-bar", "data-label": r.label },
        svg("title", {}, r.title ?? `${r.label}: ${format(r.value)}`),
        svg("text", { x: left - 8, y: y + bar / 2, "text-anchor": "end", "dominant-baseline": "middle", class: "op-chart-label" }, clip(r.label, Math.floor(left / 7.5))),
        svg("rect", { x: left, y, width: w, height: bar, rx: 3, fill: r.colour ?? PALETTE[0] }),
        svg("text", { x: left + w + 6, y: y + bar / 2, "dominant-baseline": "middle", class: "op-chart-value" }, format(r.value)));
    }));
}

/**
 * Stacked columns: buckets [{label, values: Map(seriesKey -> number)}], series [{key, label,
 * colour}] bottom first; `axis` words the value axis' ticks. A legend follows the chart.
 */
export function stackedColumns(buckets, series, { format, axis = format, title, width = 720, height = 260 }) {
  const left = 64;
  const bottom = 34;
  const top = 10;
  const plot = height - top - bottom;
  const totals = buckets.map((b) => series.reduce((sum, s) => sum + (b.values.get(s.key) ?? 0), 0));
  const max = niceMax(Math.max(0, ...totals));
  const step = (width - left - 10) / Math.max(1, buckets.length);
  const column = Math.max(2, step * 0.72);
  const y = (v) => top + plot - (v / max) * plot;
  const labelEvery = Math.ceil(buckets.length / Math.max(1, Math.floor((width - left) / 110)));
  const chart = svg("svg", { class: "op-chart op-columns", viewBox: `0 0 ${width} ${height}`, width: "100%", role: "img", "aria-label": title },
    svg("title", {}, title),
    [0, 0.5, 1].map((f) => svg("g", { class: "op-grid" },
      svg("line", { x1: left, x2: width - 10, y1: y(max * f), y2: y(max * f) }),
      svg("text", { x: left - 6, y: y(max * f), "text-anchor": "end", "dominant-baseline": "middle", class: "op-chart-value" }, axis(max * f)))),
    buckets.map((b, i) => {
      const x = left + i * step + (step - column) / 2;
      let base = 0;
      return svg("g", { class: "op-column", "data-bucket": b.label },
        svg("title", {}, `${b.label}: ${format(totals[i])}`),
        series.map((s) => {
          const v = b.values.get(s.key) ?? 0;
          if (v <= 0) return null;
          const rect = svg("rect", { x, y: y(base + v), width: column, height: Math.max(0.5, y(base) - y(base + v)), fill: s.colour },
            svg("title", {}, `${b.label} · ${s.label}: ${format(v)}`));
          base += v;
          return rect;
        }),
        i % labelEvery === 0 && svg("text", { x: x + column / 2, y: height - bottom + 16, "text-anchor": "middle", class: "op-chart-label" }, b.label));
    }));
  const legend = h("ul", { class: "op-legend" }, series.map((s) => {
    const mark = h("i", { class: "op-swatch" });
    mark.style.background = s.colour;
    return h("li", {}, mark, s.label);
  }));
  return h("div", { class: "op-chart-box" }, chart, legend);
}
