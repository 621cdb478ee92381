// Operate › Log: the whole log as auditors read it (the `auditLog` query): every aggregate
// type, filtered by aggregate, event names, actor, domain and time on the gateway, oldest first,
// a page at a time. Domain admins and auditors see their domain's events; superadmins and
// superauditors every domain's (or one). Each event's fields, cause and correlation one click away.

import { gql } from "../api.js";
import { clockEl, h, replace } from "../dom.js";
import { errorBox } from "../errors.js";
import { addNavItem } from "../nav.js";
import { AUDITORS } from "../op/format.js";
import { definePage } from "../router.js";
import { eventSummary } from "./op-events.js";

const PAGE = 100;
const TYPES = ["session", "node", "agent", "vfolder", "endpoint", "domain", "project", "user", "keypair",
  "resource_policy", "resource_group", "image", "registry", "quota", "join_token", "correction", "activity"];
const LOG = `query AuditLog($after: Int!, $first: Int!, $filter: AuditFilter) {
  auditLog(after: $after, first: $first, filter: $filter) {
    events { seq name aggregateType aggregateId version at actor domain project eventId causationId correlationId payload }
    nextAfter hasMore scanned
  }
}`;
const EVERY_DOMAIN = ["superadmin", "superauditor"];

function row(event) {
  const link = ["session", "node", "agent"].includes(event.aggregateType)
    ? h("a", { href: `#/operate/events/${event.aggregateType}/${event.aggregateId}` }, event.aggregateId)
    : event.aggregateId;
  return h("tr", { dataset: { seq: event.seq, name: event.name, domain: event.domain } },
    h("td", { class: "num mono" }, String(event.seq)),
    h("td", {}, clockEl(event.at), h("div", { class: "sub" }, new Date(event.at).toLocaleDateString())),
    h("td", {}, h("strong", {}, event.name), h("div", { class: "sub" }, event.aggregateType, " ", h("span", { class: "mono" }, link))),
    h("td", { class: "mono op-actor" }, event.actor, h("div", { class: "sub" }, event.domain)),
    h("td", {}, h("div", { class: "op-event-summary" }, eventSummary(event)),
      h("details", { class: "op-payload" }, h("summary", {}, "fields"),
        h("pre", {}, JSON.stringify({ ...event.payload, event_id: event.eventId, causation_id: event.causationId, correlation_id: event.correlationId, project: event.project }, null, 2)))));
}

function filterOf(form) {
  const value = (name) => form.elements[name]?.value.trim() || null;
  const since = value("since");
  const names = value("names");
  const filter = {
    aggregateType: value("type"), aggregateId: value("id"), actor: value("actor"), domain: value("domain"),
    names: names ? names.split(",").map((n) => n.trim()).filter(Boolean) : null,
    since: since ? new Date(since).toISOString() : null,
  };
  return Object.fromEntries(Object.entries(filter).filter(([, v]) => v !== null));
}

definePage({
  path: "/operate/log",
  title: "Log",
  roles: AUDITORS,
  async render({ root, viewer, scope }) {
    const body = h("tbody", { id: "op-auditlog-rows" });
    const problems = h("div", { class: "problems" });
    const status = h("p", { class: "summary", id: "op-auditlog-summary" });
    const more = h("button", { type: "button", id: "op-auditlog-more", hidden: true }, "Load more");
    const form = h("form", { class: "op-log-filters", id: "op-auditlog-filter" },
      h("label", { class: "field" }, h("span", { class: "label" }, "Aggregate"),
        h("select", { name: "type" }, h("option", { value: "" }, "any"), TYPES.map((t) => h("option", { value: t }, t)))),
      h("label", { class: "field" }, h("span", { class: "label" }, "Its id"), h("input", { name: "id", spellcheck: "false", size: 30 })),
      h("label", { class: "field" }, h("span", { class: "label" }, "Events (comma)"), h("input", { name: "names", spellcheck: "false" })),
      h("label", { class: "field" }, h("span", { class: "label" }, "Actor"), h("input", { name: "actor", placeholder: "keypair:AK…", spellcheck: "false" })),
      EVERY_DOMAIN.includes(viewer.role) && h("label", { class: "field" }, h("span", { class: "label" }, "Domain"), h("input", { name: "domain", spellcheck: "false" })),
      h("label", { class: "field" }, h("span", { class: "label" }, "Since"), h("input", { name: "since", type: "datetime-local" })),
      h("button", { type: "submit", class: "primary" }, "Show"));
    let after = 0;
    let shown = 0;
    let filter = {};
    const fetchPage = async () => {
      try {
        const { auditLog } = await gql(LOG, { after, first: PAGE, filter });
        if (scope.left) return;
        for (const event of auditLog.events) body.append(row(event));
        shown += auditLog.events.length;
        after = auditLog.nextAfter;
        more.hidden = !auditLog.hasMore;
        status.textContent = shown === 0
          ? (auditLog.hasMore ? "Nothing yet in what was looked at: load more." : "No events match.")
          : `${shown} events shown, up to log position ${after}.`;
        replace(problems);
      } catch (error) {
        if (!scope.left) replace(problems, errorBox(error, "The log could not be read"));
      }
    };
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      filter = filterOf(form);
      after = 0;
      shown = 0;
      replace(body);
      fetchPage();
    });
    more.addEventListener("click", () => fetchPage());
    replace(root,
      h("h1", {}, "Log"),
      h("p", { class: "hint" }, EVERY_DOMAIN.includes(viewer.role)
        ? "Every event of the log, oldest first: who did what, when, and why (its cause)."
        : `The events of the domain ${viewer.domain}, oldest first: who did what, when, and why (its cause).`),
      form, problems, status,
      h("table", { class: "data op-log" },
        h("thead", {}, h("tr", {}, ["seq", "when", "event", "actor", "what"].map((c) => h("th", {}, c)))), body),
      more);
    await fetchPage();
  },
});

addNavItem({ href: "#/operate/log", label: "Log", section: "Operate", roles: AUDITORS, order: 41 });
