// The usage table, from whatever `usage` query the gateway offers: its arguments and its
// answer's fields are read from the schema (introspection), so the table follows the query
// as it is built, and the section says so while there is none.

import { gql } from "./api.js";
import { h, replace } from "./dom.js";
import { errorBox } from "./errors.js";

const TYPE_REF = "kind name ofType { kind name ofType { kind name ofType { kind name } } }";
const QUERY_FIELD = `query UsageShape {
  __type(name: "Query") { fields { name description args { name description defaultValue type { ${TYPE_REF} } } type { ${TYPE_REF} } } }
}`;
const TYPE = `query UsageType($name: String!) {
  __type(name: $name) { kind name enumValues { name } fields { name type { ${TYPE_REF} } } }
}`;

const named = (ref) => (ref.ofType ? named(ref.ofType) : ref);
const isList = (ref) => ref.kind === "LIST" || (ref.ofType ? isList(ref.ofType) : false);
const typeText = (ref) => (ref.kind === "NON_NULL" ? `${typeText(ref.ofType)}!` : ref.kind === "LIST" ? `[${typeText(ref.ofType)}]` : ref.name);
const LEAF = new Set(["SCALAR", "ENUM"]);

async function typeOf(name, cache) {
  if (!cache.has(name)) cache.set(name, (await gql(TYPE, { name })).__type);
  return cache.get(name);
}

/** The selection for an object type: its leaves, and one level of nested objects' leaves. */
async function selection(name, cache, depth = 0) {
  const type = await typeOf(name, cache);
  const parts = [];
  for (const field of type.fields ?? []) {
    const inner = named(field.type);
    if (LEAF.has(inner.kind)) parts.push(field.name);
    else if (depth < 1 && inner.kind === "OBJECT") parts.push(`${field.name} { ${await selection(inner.name, cache, depth + 1)} }`);
  }
  return parts.join(" ");
}

function defaultFor(arg) {
  const name = arg.name.toLowerCase();
  const day = 24 * 3600 * 1000;
  if (name === "from" || name === "since" || name === "start") return new Date(Date.now() - 30 * day).toISOString().slice(0, 10) + "T00:00:00+00:00";
  if (name === "to" || name === "until" || name === "end") return new Date().toISOString().slice(0, 19) + "+00:00";
  return arg.defaultValue && arg.defaultValue !== "null" ? arg.defaultValue.replace(/^"|"$/g, "") : "";
}

const words = (key) => key.replace(/([a-z0-9])([A-Z])/g, "$1 $2").replace(/^./, (c) => c.toUpperCase());
const shownValue = (v) => (typeof v === "number" && !Number.isInteger(v) ? v.toLocaleString(undefined, { maximumFractionDigits: 3 }) : String(v ?? ""));

function table(rows) {
  if (!rows.length) return h("p", { class: "hint", id: "usage-empty" }, "No usage in this period.");
  const columns = Object.keys(rows[0]).filter((k) => rows.some((r) => r[k] === null || typeof r[k] !== "object" || !Array.isArray(r[k])));
  const cell = (v) => (v !== null && typeof v === "object" ? Object.entries(v).map(([k, x]) => `${k} ${shownValue(x)}`).join(", ") : shownValue(v));
  return h("table", { class: "table compact", id: "usage-table" },
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", {}, words(c))))),
    h("tbody", {}, rows.map((r) => h("tr", {}, columns.map((c) => h("td", { class: typeof r[c] === "number" ? "num" : null }, cell(r[c])))))));
}

function render(value, asked) {
  if (Array.isArray(value)) return table(value);
  if (value === null || typeof value !== "object") return h("p", {}, String(value));
  // What was asked (from, to, groupBy) is on the form already.
  const lists = Object.entries(value).filter(([, v]) => Array.isArray(v));
  const leaves = Object.entries(value).filter(([k, v]) => !Array.isArray(v) && !(k in asked) && !(`${k}_` in asked));
  return h("div", {},
    leaves.length > 0 && h("dl", { class: "details" }, leaves.map(([k, v]) => [h("dt", {}, words(k)), h("dd", {}, typeof v === "object" && v !== null ? JSON.stringify(v) : shownValue(v))])),
    lists.map(([k, v]) => (lists.length > 1 ? [h("h3", {}, words(k)), table(v)] : table(v))));
}

/** Fill `root` with the usage form and table, or say that the gateway has no usage query. */
export async function showUsage(root) {
  const fields = (await gql(QUERY_FIELD)).__type.fields;
  const usage = fields.find((f) => f.name === "usage");
  if (!usage) {
    replace(root, h("p", { class: "hint", id: "usage-missing" }, "Usage per period (who used what, by day, project or resource) will show here once the gateway offers the usage query; this gateway does not yet."));
    return;
  }
  const cache = new Map();
  const result = named(usage.type);
  const picked = LEAF.has(result.kind) ? "" : `{ ${await selection(result.name, cache)} }`;
  const inputs = [];
  for (const arg of usage.args) {
    const inner = named(arg.type);
    let input;
    if (inner.kind === "ENUM") {
      const values = (await typeOf(inner.name, cache)).enumValues.map((v) => v.name);
      input = h("select", { name: arg.name }, values.map((v) => h("option", { value: v }, v)));
    } else {
      input = h("input", { name: arg.name, value: defaultFor(arg), spellcheck: "false", required: arg.type.kind === "NON_NULL" && arg.defaultValue === null });
    }
    inputs.push({ arg, input, inner, list: isList(arg.type) });
  }
  const declared = inputs.map(({ arg }) => `$${arg.name}: ${typeText(arg.type)}`).join(", ");
  const passed = inputs.map(({ arg }) => `${arg.name}: $${arg.name}`).join(", ");
  const query = `query Usage${declared ? `(${declared})` : ""} { usage${passed ? `(${passed})` : ""} ${picked} }`;
  const out = h("div", { id: "usage-result" });
  const form = h("form", {
    class: "filters",
    id: "usage-form",
    onsubmit: async (event) => {
      event.preventDefault();
      const variables = {};
      for (const { arg, input, inner, list } of inputs) {
        const text = input.value.trim();
        if (text === "") continue;
        let value = inner.name === "Int" ? Number(text) : inner.name === "Float" ? Number(text) : inner.name === "Boolean" ? text === "true" : text;
        if (list) value = text.split(",").map((s) => s.trim());
        variables[arg.name] = value;
      }
      replace(out, h("p", { class: "hint" }, "Asking…"));
      try {
        replace(out, render((await gql(query, variables)).usage, { ...variables, from: 1, to: 1 }));
      } catch (error) {
        replace(out, errorBox(error, "No usage"));
      }
    },
  }, inputs.map(({ arg, input }) => h("label", { class: "field", title: arg.description ?? "" },
    h("span", { class: "label" }, arg.name, arg.type.kind === "NON_NULL" ? "" : h("span", { class: "hint" }, " optional")), input)),
  h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, "Show")));
  replace(root, usage.description && h("p", { class: "hint" }, usage.description), form, out);
  form.requestSubmit();
}
