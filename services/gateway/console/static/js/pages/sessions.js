// "My sessions": every session the person may see, newest first, each row kept current by
// its status subscription while it has not ended, and a session requested meanwhile (here, in
// another tab, from the CLI) added at the top by the sessionsAdded subscription (no reload, no
// polling).

import { gql } from "../api.js";
import { FINAL, h, replace, shortId, statusBadge, timeEl } from "../dom.js";
import { errorBox } from "../errors.js";
import { addNavItem } from "../nav.js";
import { definePage } from "../router.js";
import * as live from "../live.js";
import { followStatus, queueText, resourcesText, sessionAsOf } from "../sessions-common.js";

const PAGE = 200;
const MAX_PAGES = 10;
// A row's fields, the same for the list and for a session added to it.
const FIELDS = "id name status statusReason type image clusterSize createdAt exitCode result queuePosition queueLength resources { cpu memoryBytes gpu }";
const QUERY = `query MySessions($after: String) {
  sessions(first: ${PAGE}, after: $after) {
    edges { node { ${FIELDS} } }
    pageInfo { hasNextPage endCursor }
  }
}`;

const ENDED = "query Ended($id: ID!) { session(id: $id) { status exitCode result statusReason } }";
const ONE = `query One($id: ID!) { session(id: $id) { ${FIELDS} } }`;
const ADDED = "subscription Added { sessionsAdded { id } }";

async function loadAll() {
  const found = [];
  let after = null;
  for (let page = 0; page < MAX_PAGES; page += 1) {
    const { sessions } = await gql(QUERY, { after });
    found.push(...sessions.edges.map((e) => e.node));
    if (!sessions.pageInfo.hasNextPage) return { sessions: found, complete: true };
    after = sessions.pageInfo.endCursor;
  }
  return { sessions: found, complete: false };
}

function statusCell(session) {
  const waiting = session.status === "PENDING" ? queueText(session.queuePosition, session.queueLength) : "";
  const detail = [waiting, session.statusReason].filter(Boolean).join(" · ");
  return h("td", { class: "status-cell" }, statusBadge(session.status), detail && h("div", { class: "reason" }, detail));
}

function resultText(session) {
  if (session.result === "success") return "succeeded";
  if (session.result === "failure") return session.exitCode === null ? "failed" : `failed (exit ${session.exitCode})`;
  return session.exitCode === null || session.exitCode === undefined ? "" : `exit ${session.exitCode}`;
}

function row(session) {
  return h(
    "tr",
    { dataset: { session: session.id }, class: FINAL.has(session.status) ? "ended" : null },
    h("td", {}, h("a", { href: `#/sessions/${session.id}`, title: session.id, class: session.name ? null : "mono" }, session.name || shortId(session.id))),
    statusCell(session),
    h("td", {}, session.type),
    h("td", { class: "mono" }, session.image),
    h("td", { class: "nowrap" }, resourcesText(session)),
    h("td", {}, timeEl(session.createdAt)),
    h("td", {}, resultText(session)),
  );
}

function summary(sessions) {
  const count = (test) => sessions.filter(test).length;
  const running = count((s) => s.status === "RUNNING");
  const waiting = count((s) => s.status === "PENDING");
  const starting = count((s) => ["SCHEDULED", "PREPARING", "CREATING"].includes(s.status));
  const parts = [`${running} running`, `${waiting} waiting`];
  if (starting) parts.push(`${starting} starting`);
  return `${parts.join(", ")}, ${sessions.length} in all`;
}

definePage({
  path: "/sessions",
  title: "My sessions",
  async render({ root, scope, viewer }) {
    const heading = viewer.role === "user" ? "My sessions" : "Sessions";
    const counts = h("p", { class: "summary", id: "session-summary" });
    const problems = h("div", { class: "problems" });
    const body = h("tbody");
    replace(
      root,
      h("div", { class: "page-head" }, h("h1", {}, heading), h("a", { class: "button primary", href: "#/sessions/new" }, "New session")),
      viewer.role !== "user" && h("p", { class: "hint" }, `As ${viewer.role === "superadmin" ? "a superadmin" : `an ${viewer.role}`} you see every session you may read, not only yours.`),
      counts,
      problems,
      h("table", { class: "table", id: "sessions" },
        h("thead", {}, h("tr", {}, ["Session", "Status", "Type", "Image", "Resources", "Created", "Result"].map((t) => h("th", {}, t)))),
        body),
    );
    const { sessions, complete } = await loadAll();
    if (scope.left) return;
    sessions.reverse(); // newest first
    const rows = new Map(sessions.map((s) => [s.id, { session: s, element: row(s) }]));
    replace(body, [...rows.values()].map((r) => r.element));
    if (sessions.length === 0) {
      replace(body, h("tr", {}, h("td", { colspan: 7, class: "empty" }, "No sessions yet. ", h("a", { href: "#/sessions/new" }, "Start one"), ".")));
    }
    const show = (entry, session) => {
      entry.session = session;
      const fresh = row(session);
      entry.element.replaceWith(fresh);
      entry.element = fresh;
      recount();
    };
    const recount = () => { counts.textContent = summary([...rows.values()].map((r) => r.session)) + (complete ? "" : " (the oldest are not shown)"); };
    recount();
    const follow = (entry) => {
      if (FINAL.has(entry.session.status)) return;
      followStatus(scope, entry.session.id, (change) => {
        const updated = {
          ...entry.session,
          status: change.status,
          statusReason: change.reason,
          queuePosition: change.queuePosition,
          queueLength: change.queueLength,
        };
        show(entry, updated);
        if (FINAL.has(change.status)) {
          // Its exit code and result are on the session, not on the change: asked once.
          sessionAsOf(ENDED, entry.session.id, change.status, scope)
            .then((session) => { if (session && !scope.left) show(entry, { ...entry.session, ...session }); })
            .catch(() => {});
        }
      }, { error: (error) => replace(problems, errorBox(error, `Live updates for ${entry.session.id} stopped`)) });
    };
    for (const entry of rows.values()) follow(entry);
    // Sessions requested from now on (anywhere) come in at the top.
    const stop = live.subscribe(ADDED, {}, {
      next: async (data) => {
        const id = data.sessionsAdded.id;
        if (rows.has(id) || scope.left) return;
        const { session } = await gql(ONE, { id });
        if (session === null || rows.has(id) || scope.left) return;
        if (rows.size === 0) replace(body);
        const entry = { session, element: row(session) };
        rows.set(id, entry);
        body.prepend(entry.element);
        recount();
        follow(entry);
      },
      error: (error) => replace(problems, errorBox(error, "New sessions are no longer added live")),
    });
    scope.onLeave(stop);
  },
});

addNavItem({ href: "#/sessions", label: "Sessions", order: 10 });
