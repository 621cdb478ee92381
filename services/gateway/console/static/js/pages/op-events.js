// Operate › Audit: the event log of any session, node or agent (the `eventLog` query), oldest
// first, a page at a time, filtered by event name (on the gateway) and by text (in the page),
// each event's fields one click away. Live: a session's log grows with its sessionStatus
// subscription, a node's or agent's with the clusterChanges ticks that name it.

import { gql } from "../api.js";
import { clockEl, h, replace, resourcesWords } from "../dom.js";
import { errorBox } from "../errors.js";
import { addNavItem } from "../nav.js";
import { followCluster, refresher } from "../op/feed.js";
import { AUDITORS, gpuAmount } from "../op/format.js";
import { definePage, navigate } from "../router.js";
import { followStatus } from "../sessions-common.js";

const PAGE = 100;
const KINDS = { session: "Session", node: "Node", agent: "Agent" };
const LOG = `query EventLog($aggregate: String!, $id: ID!, $after: Int!, $first: Int!, $names: [String!]) {
  eventLog(aggregate: $aggregate, id: $id, after: $after, first: $first, names: $names) {
    events { seq name version at actor eventId causationId correlationId payload }
    nextAfter hasMore lastSeq
  }
}`;
const NODES = "query AuditNodes { nodes { id hostname state } }";

/** An event's slots ({cpu_milli, memory_bytes, gpu_hundredths}) in words. */
function slotsText(s) {
  return resourcesWords({ cpu: s.cpu_milli / 1000, memoryBytes: s.memory_bytes, gpu: gpuAmount(s.gpu_hundredths ?? 0) });
}

/** The few fields that say what an event did, in a line (a session named links to its log). */
export function eventSummary(event) {
  const p = event.payload ?? {};
  const parts = [];
  if (p.spec) parts.push(`${p.spec.image} · ${p.spec.kernels?.length ?? 1} kernel${p.spec.kernels?.length > 1 ? "s" : ""}`);
  if (p.hostname && !p.kernel_id) parts.push(p.hostname);
  if (p.kernel_id) parts.push(`kernel ${p.kernel_id}`);
  if (p.session_id) parts.push(h("a", { href: `#/operate/events/session/${p.session_id}` }, `session ${p.session_id}`));
  if (p.slots) parts.push(slotsText(p.slots));
  if (p.capacity && !p.slots) parts.push(`capacity ${slotsText(p.capacity)}`);
  if (Array.isArray(p.devices) && p.devices.length) {
    parts.push(`GPU ${p.devices.map((d) => (d.whole || d.hundredths === undefined ? `${d.index}` : `${d.index} (${gpuAmount(d.hundredths)})`)).join(", ")}`);
  }
  if (p.exit_code !== undefined && p.exit_code !== null) parts.push(`exit ${p.exit_code}`);
  if (p.reason) parts.push(p.reason);
  return parts.flatMap((part, i) => (i === 0 ? [part] : [" · ", part]));
}

const dayOf = (iso) => new Date(iso).toLocaleDateString(undefined, { year: "numeric", month: "short", day: "numeric" });

/** One event; `newDay`: say its date too (the first row, and each row on a later day). */
function eventRow(event, newDay) {
  return h("tr", { dataset: { seq: event.seq, name: event.name } },
    h("td", { class: "num mono" }, String(event.seq)),
    h("td", {}, clockEl(event.at), newDay && h("div", { class: "sub" }, dayOf(event.at))),
    h("td", {}, h("strong", {}, event.name), h("div", { class: "sub" }, `v${event.version}`)),
    h("td", { class: "mono op-actor" }, event.actor),
    h("td", {}, h("div", { class: "op-event-summary" }, eventSummary(event)),
      h("details", { class: "op-payload" }, h("summary", {}, "fields"),
        h("pre", {}, JSON.stringify({ ...event.payload, event_id: event.eventId, causation_id: event.causationId, correlation_id: event.correlationId }, null, 2)))));
}

function picker(root, nodes) {
  const form = h("form", { class: "inline-form", id: "op-audit-open" },
    h("select", { name: "kind" }, Object.entries(KINDS).map(([v, t]) => h("option", { value: v }, t))),
    h("input", { name: "id", placeholder: "its id", required: true, spellcheck: "false", size: 40 }),
    h("button", { type: "submit", class: "primary" }, "Open"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    navigate(`/operate/events/${form.elements.kind.value}/${encodeURIComponent(form.elements.id.value.trim())}`);
  });
  replace(root, h("h1", {}, "Audit trail"),
    h("p", { class: "hint" }, "Every event of a session, a node's ledger or an agent, as the log holds it. A session's id is on its page; nodes are listed below."),
    form,
    nodes && h("section", { class: "card" }, h("h2", {}, "Nodes"),
      h("ul", { class: "plain op-audit-nodes" }, nodes.map((n) => h("li", {},
        h("a", { href: `#/operate/events/node/${n.id}` }, n.hostname), " ", h("span", { class: "sub mono" }, n.id), " ",
        h("a", { href: `#/operate/events/agent/${n.id}`, class: "sub" }, "its agent"))))));
}

definePage({
  path: "/operate/events",
  title: "Audit trail",
  roles: AUDITORS,
  async render({ root, viewer }) {
    picker(root, ["superadmin", "superauditor"].includes(viewer.role) ? (await gql(NODES)).nodes : null);
  },
});

definePage({
  path: "/operate/events/:kind/:id",
  title: "Event log",
  roles: AUDITORS,
  async render({ root, params, query, scope }) {
    const { kind, id } = params;
    if (!KINDS[kind]) {
      navigate("/operate/events");
      return;
    }
    let names = query.get("names") ? query.get("names").split(",").filter(Boolean) : null;
    const body = h("tbody");
    const problems = h("div", { class: "problems" });
    const status = h("p", { class: "summary", id: "op-log-summary" });
    const more = h("button", { type: "button", id: "op-log-more", hidden: true }, "Older pages: load more");
    const search = h("input", { type: "search", placeholder: "filter the rows shown (text)", id: "op-log-search", spellcheck: "false" });
    const only = h("select", { id: "op-log-names", multiple: true, size: 1, title: "only these events (asked of the gateway)" });
    const seenNames = new Set(names ?? []);
    let after = 0;
    let lastShown = 0;
    let lastDay = "";
    let loaded = [];

    replace(root,
      h("div", { class: "page-head" },
        h("div", {}, h("div", { class: "crumbs" }, h("a", { href: "#/operate/events" }, "Audit trail"), " /"),
          h("h1", {}, `${KINDS[kind]} `, h("span", { class: "mono op-log-id" }, id))),
        h("div", { class: "actions" }, kind === "session" && h("a", { class: "button", href: `#/sessions/${id}` }, "Session page"))),
      problems,
      h("div", { class: "op-log-filters" },
        h("label", { class: "field" }, h("span", { class: "label" }, "Search"), search),
        h("label", { class: "field" }, h("span", { class: "label" }, "Only these events"), only),
        h("div", { class: "actions" },
          h("button", { type: "button", id: "op-log-apply", onclick: () => {
            const picked = [...only.selectedOptions].map((o) => o.value);
            const path = `/operate/events/${kind}/${encodeURIComponent(id)}`;
            navigate(picked.length ? `${path}?names=${picked.join(",")}` : path);
          } }, "Apply"),
          names && h("a", { class: "button", href: `#/operate/events/${kind}/${encodeURIComponent(id)}` }, "All events"))),
      status,
      h("table", { class: "table compact", id: "op-log" },
        h("thead", {}, h("tr", {}, ["Seq", "When", "Event", "Actor", "What"].map((t) => h("th", {}, t)))), body),
      more);

    const drawNames = () => {
      const chosen = new Set(names ?? []);
      replace(only, [...seenNames].sort().map((n) => h("option", { value: n, selected: chosen.has(n) }, n)));
      only.size = Math.min(6, Math.max(2, seenNames.size));
    };
    const applySearch = () => {
      const text = search.value.trim().toLowerCase();
      for (const row of body.children) row.hidden = text !== "" && !row.textContent.toLowerCase().includes(text);
    };
    search.addEventListener("input", applySearch);

    const fetchPage = async () => {
      const { eventLog } = await gql(LOG, { aggregate: kind, id, after, first: PAGE, names });
      if (scope.left) return;
      for (const event of eventLog.events) {
        if (event.seq <= lastShown) continue;
        loaded.push(event);
        seenNames.add(event.name);
        body.append(eventRow(event, dayOf(event.at) !== lastDay));
        lastDay = dayOf(event.at);
        lastShown = event.seq;
      }
      after = eventLog.nextAfter;
      more.hidden = !eventLog.hasMore;
      drawNames();
      applySearch();
      const filtered = names ? ` (only ${names.join(", ")})` : "";
      status.textContent = loaded.length === 0
        ? `No events${filtered}. ${eventLog.lastSeq === 0 ? `There is no ${kind} ${id} in the log.` : ""}`
        : `${loaded.length} events shown${filtered}; the newest is at log position ${eventLog.lastSeq}.`;
      return eventLog.hasMore;
    };
    const load = async () => {
      try {
        // Follow on until the newest: a live change appends what came after the last page.
        while (await fetchPage()) { if (loaded.length >= PAGE * 10) break; }
        replace(problems);
      } catch (error) {
        if (!scope.left) replace(problems, errorBox(error, "The events could not be read"));
      }
    };
    const refresh = refresher(load);
    more.addEventListener("click", () => refresh());
    await refresh();
    if (kind === "session") {
      followStatus(scope, id, () => refresh(), { error: () => {} });
    } else {
      followCluster(scope, (change) => {
        if (change === null || change.nodeIds.includes(id)) refresh();
      });
    }
  },
});

addNavItem({ href: "#/operate/events", label: "Audit", section: "Operate", roles: AUDITORS, order: 40 });
