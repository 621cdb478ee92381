// Operate › Usage: resources × time per domain, project, user, session or resource group over
// a chosen range (the `usage` query), as a bar chart of the rows, stacked columns over time
// (one `usage` per time bucket, asked in batches) and a table; "Export CSV" downloads
// /usage.csv for the very same range, grouping and filters. No subscription carries usage: a
// range that runs until now is asked again when the cluster says something changed.

import { gql } from "../api.js";
import { h, replace, when } from "../dom.js";
import { errorBox } from "../errors.js";
import { addNavItem } from "../nav.js";
import { OTHERS, PALETTE, barChart, stackedColumns } from "../op/chart.js";
import { download } from "../op/download.js";
import { followCluster, refresher } from "../op/feed.js";
import { OPERATORS } from "../op/format.js";
import { definePage } from "../router.js";

const GROUPS = { DOMAIN: "Domain", PROJECT: "Project", USER: "User", SESSION: "Session", RESOURCE_GROUP: "Resource group" };
const METRICS = {
  gpuSeconds: { label: "GPU", unit: "GPU" },
  cpuCoreSeconds: { label: "CPU", unit: "core" },
  memoryGibSeconds: { label: "Memory", unit: "GiB" },
};
const FILTERS = { domain: "String", projectId: "ID", userId: "ID", resourceGroup: "String" };
const FILTER_LABELS = { domain: "Domain", projectId: "Project (id, or name)", userId: "User id", resourceGroup: "Resource group" };
/** Seconds in the largest unit that keeps a report's numbers readable. */
const SCALES = [{ per: 3600, suffix: "h" }, { per: 60, suffix: "min" }, { per: 1, suffix: "s" }];
const FILTER_ARGS = Object.keys(FILTERS).map((f) => `${f}: $${f}`).join(", ");
const FILTER_VARS = Object.entries(FILTERS).map(([f, t]) => `$${f}: ${t}`).join(", ");
const USAGE = `query Usage($from: DateTime!, $to: DateTime!, $groupBy: UsageGroup!, ${FILTER_VARS}) {
  usage(from: $from, to: $to, groupBy: $groupBy, ${FILTER_ARGS}) {
    from to groupBy
    rows { key name sessions cpuCoreSeconds memoryGibSeconds gpuSeconds gpuDeviceSeconds { node device seconds shareSeconds } }
  }
}`;
const BATCH = 12; // aliases per request (the gateway allows 15)
const BUCKETS = 24;
const STEPS_H = [1, 2, 3, 6, 12, 24, 48, 24 * 7, 24 * 14, 24 * 30];
const CHART_SERIES = 6;
const REFRESH_AFTER_MS = 15_000;
const HOUR = 3600_000;

const iso = (date) => date.toISOString().replace(/\.\d{3}Z$/, "Z");
const localInput = (date) => new Date(date.getTime() - date.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
const scaleFor = (seconds) => SCALES.find((s) => seconds >= s.per) ?? SCALES.at(-1);
const number = (x) => (x === 0 || x >= 1
  ? x.toLocaleString(undefined, { maximumFractionDigits: x >= 100 ? 0 : 2 })
  : x.toLocaleString(undefined, { maximumSignificantDigits: 2 }));

/** Local-time boundaries `stepH` hours apart (days from midnight), covering [from, to). */
function bucketsOf(from, to) {
  const span = to - from;
  const stepH = STEPS_H.find((s) => span / (s * HOUR) <= BUCKETS - 1) ?? STEPS_H.at(-1);
  const first = new Date(from);
  first.setMinutes(0, 0, 0);
  if (stepH >= 24) first.setHours(0);
  else first.setHours(first.getHours() - (first.getHours() % stepH));
  const out = [];
  let lastDay = "";
  for (let start = first.getTime(); start < to.getTime(); start += stepH * HOUR) {
    const at = new Date(start);
    const day = at.toLocaleDateString(undefined, { month: "short", day: "numeric" });
    const time = at.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" });
    out.push({
      from: new Date(Math.max(start, from.getTime())),
      to: new Date(Math.min(start + stepH * HOUR, to.getTime())),
      label: stepH >= 24 ? day : day !== lastDay ? `${day} ${time}` : time,
    });
    lastDay = day;
  }
  return out;
}

async function overTime(buckets, groupBy, filters) {
  const answers = [];
  for (let i = 0; i < buckets.length; i += BATCH) {
    const chunk = buckets.slice(i, i + BATCH);
    const vars = chunk.map((_, j) => `$f${j}: DateTime!, $t${j}: DateTime!`).join(", ");
    const fields = chunk.map((_, j) => `b${j}: usage(from: $f${j}, to: $t${j}, groupBy: $groupBy, ${FILTER_ARGS}) { rows { key gpuSeconds cpuCoreSeconds memoryGibSeconds } }`).join("\n");
    const variables = { groupBy, ...filters };
    chunk.forEach((b, j) => { variables[`f${j}`] = iso(b.from); variables[`t${j}`] = iso(b.to); });
    const data = await gql(`query UsageOverTime($groupBy: UsageGroup!, ${FILTER_VARS}, ${vars}) {\n${fields}\n}`, variables);
    chunk.forEach((_, j) => answers.push(data[`b${j}`].rows));
  }
  return answers;
}

function rowLabel(row, groupBy) {
  if (!row.name) return row.key;
  return groupBy === "SESSION" || groupBy === "USER" ? row.name : row.name === row.key ? row.key : row.name;
}

function table(rows, groupBy, scales) {
  if (rows.length === 0) return h("p", { class: "hint", id: "op-usage-empty" }, "No usage in this range.");
  const metrics = Object.keys(METRICS);
  const amount = (r, m) => number(r[m] / scales[m].per);
  return h("table", { class: "table compact", id: "op-usage-table" },
    h("thead", {}, h("tr", {}, [GROUPS[groupBy], "Sessions", ...metrics.map((m) => `${METRICS[m].unit}-${scales[m].suffix}`), "GPUs used"].map((t) => h("th", {}, t)))),
    h("tbody", {}, rows.map((r) => h("tr", { dataset: { key: r.key } },
      h("td", {}, rowLabel(r, groupBy), r.name && r.name !== r.key && h("div", { class: "sub mono" }, r.key)),
      h("td", { class: "num" }, String(r.sessions)),
      metrics.map((m) => h("td", { class: "num" }, amount(r, m))),
      h("td", { class: "num", title: r.gpuDeviceSeconds.map((d) => `${d.node}/${d.device}: ${number(d.seconds / 3600)} h held`).join("\n") }, String(r.gpuDeviceSeconds.length))))));
}

definePage({
  path: "/operate/usage",
  title: "Usage",
  roles: OPERATORS,
  async render({ root, scope }) {
    const now = new Date();
    const form = h("form", { class: "filters op-usage-form", id: "op-usage-form" },
      h("label", { class: "field" }, h("span", { class: "label" }, "From"), h("input", { type: "datetime-local", name: "from", value: localInput(new Date(now - 7 * 24 * HOUR)), required: true })),
      h("label", { class: "field" }, h("span", { class: "label" }, "To ", h("span", { class: "hint" }, "empty: now")), h("input", { type: "datetime-local", name: "to" })),
      h("label", { class: "field" }, h("span", { class: "label" }, "Per"), h("select", { name: "groupBy" }, Object.entries(GROUPS).map(([v, t]) => h("option", { value: v }, t)))),
      h("label", { class: "field" }, h("span", { class: "label" }, "Chart"), h("select", { name: "metric" }, Object.entries(METRICS).map(([v, m]) => h("option", { value: v }, m.label)))),
      Object.keys(FILTERS).map((f) => h("label", { class: "field" }, h("span", { class: "label" }, FILTER_LABELS[f], h("span", { class: "hint" }, " optional")), h("input", { name: f, spellcheck: "false" }))),
      h("div", { class: "actions" },
        h("button", { type: "submit", class: "primary" }, "Show"),
        h("button", { type: "button", id: "op-usage-csv", disabled: true }, "Export CSV")));
    const presets = h("div", { class: "actions op-presets" }, h("span", { class: "hint" }, "Last"),
      [["24 hours", 24], ["7 days", 24 * 7], ["30 days", 24 * 30]].map(([label, span]) => h("button", {
        type: "button",
        class: "link",
        onclick: () => {
          form.elements.from.value = localInput(new Date(Date.now() - span * HOUR));
          form.elements.to.value = "";
          form.requestSubmit();
        },
      }, label)));
    const result = h("div", { id: "op-usage-result" });
    const problems = h("div", { class: "problems" });
    replace(root, h("div", { class: "page-head" }, h("h1", {}, "Usage")),
      h("p", { class: "hint" }, "Resources allocated to running kernels × time (docs/usage.md). Running kernels count up to now."),
      presets, form, problems, result);

    let asked = null; // {from, to, groupBy, filters, untilNow}
    let shownAt = 0;

    const show = async () => {
      const from = new Date(form.elements.from.value);
      const untilNow = form.elements.to.value === "";
      const to = untilNow ? new Date() : new Date(form.elements.to.value);
      const groupBy = form.elements.groupBy.value;
      const metric = form.elements.metric.value;
      const filters = Object.fromEntries(Object.keys(FILTERS).map((f) => [f, form.elements[f].value.trim() || null]));
      asked = { from: iso(from), to: iso(to), groupBy, filters, untilNow };
      replace(problems);
      try {
        const { usage } = await gql(USAGE, { from: asked.from, to: asked.to, groupBy, ...filters });
        const buckets = bucketsOf(from, to);
        const series = overTime(buckets, groupBy, filters);
        const rows = [...usage.rows].sort((a, b) => b[metric] - a[metric]);
        const total = (field) => usage.rows.reduce((sum, r) => sum + r[field], 0);
        const scales = Object.fromEntries(Object.keys(METRICS).map((m) => [m, scaleFor(Math.max(0, ...usage.rows.map((r) => r[m])))]));
        const scale = scales[metric];
        const unit = `${METRICS[metric].unit}-${scale.suffix}`;
        const format = (v) => `${number(v / scale.per)} ${unit}`;
        const axis = (v) => number(v / scale.per);
        const top = rows.slice(0, CHART_SERIES).filter((r) => r[metric] > 0);
        const colours = new Map(top.map((r, i) => [r.key, PALETTE[i % PALETTE.length]]));
        const perBucket = (await series).map((bucketRows, i) => {
          const values = new Map();
          for (const r of bucketRows) {
            const key = colours.has(r.key) ? r.key : "__others";
            values.set(key, (values.get(key) ?? 0) + r[metric]);
          }
          return { label: buckets[i].label, values };
        });
        const legend = top.map((r) => ({ key: r.key, label: rowLabel(r, groupBy), colour: colours.get(r.key) }));
        if (rows.length > top.length) legend.push({ key: "__others", label: "the others", colour: OTHERS });
        if (scope.left) return;
        form.querySelector("#op-usage-csv").disabled = false;
        const per = `${METRICS[metric].label} per ${GROUPS[groupBy].toLowerCase()} (${unit})`;
        const overTimeTitle = `${METRICS[metric].label} over time (${unit})`;
        const barsBox = h("div", { class: "op-chart-slot" });
        const columnsBox = h("div", { class: "op-chart-slot" });
        const said = Object.keys(METRICS).map((m) => `${number(total(m) / scales[m].per)} ${METRICS[m].unit}-${scales[m].suffix}`);
        replace(result,
          h("p", { class: "summary", id: "op-usage-summary" },
            `${when(usage.from)} – ${when(usage.to)} · ${usage.rows.length} ${GROUPS[groupBy].toLowerCase()}${usage.rows.length === 1 ? "" : "s"} · ${said.join(", ")}`),
          h("div", { class: "columns op-usage-charts" },
            h("section", { class: "card" }, h("h2", {}, per), barsBox),
            h("section", { class: "card" }, h("h2", {}, overTimeTitle), columnsBox)),
          h("section", { class: "card" }, h("h2", {}, "Rows"), table(usage.rows, groupBy, scales)));
        // Drawn at their boxes' width once placed, so the text in them is at its real size.
        replace(barsBox, top.length
          ? barChart(rows.slice(0, 12).map((r) => ({ label: rowLabel(r, groupBy), value: r[metric], colour: colours.get(r.key) ?? OTHERS })), { format, title: per, width: Math.max(320, barsBox.clientWidth) })
          : h("p", { class: "hint" }, `No ${METRICS[metric].label} use in this range.`));
        replace(columnsBox, stackedColumns(perBucket, legend, { format, axis, title: overTimeTitle, width: Math.max(320, columnsBox.clientWidth) }));
        result.dataset.from = asked.from;
        result.dataset.to = asked.to;
        result.dataset.groupBy = groupBy;
        shownAt = Date.now();
      } catch (error) {
        if (!scope.left) replace(problems, errorBox(error, "No usage"));
      }
    };
    const run = refresher(show); // a Show pressed while one runs is run after it

    form.addEventListener("submit", (event) => { event.preventDefault(); run(); });
    form.querySelector("#op-usage-csv").addEventListener("click", async () => {
      if (!asked) return;
      const params = new URLSearchParams({ from: asked.from, to: asked.to, groupBy: asked.groupBy });
      for (const [f, v] of Object.entries(asked.filters)) if (v) params.set(f, v);
      try {
        await download(`/usage.csv?${params}`, `usage-${asked.groupBy.toLowerCase()}.csv`);
      } catch (error) {
        replace(problems, errorBox(error, "The CSV could not be made"));
      }
    });
    await run();
    // A range until now grows while kernels run: asked again when the cluster changes.
    followCluster(scope, (change) => {
      if (asked?.untilNow && (change === null || change.sessions > 0) && Date.now() - shownAt > REFRESH_AFTER_MS) run();
    });
  },
});

addNavItem({ href: "#/operate/usage", label: "Usage", section: "Operate", roles: OPERATORS, order: 30 });
