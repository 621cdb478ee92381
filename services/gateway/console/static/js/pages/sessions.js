// "My sessions": the sessions the person may see, newest first, a page at a time ("Show
// older" reads the next), kept current by ONE subscription for the whole list
// (sessionsChanged: status changes and queue moves of every row, and a session requested
// meanwhile, here, in another tab or from the CLI, added at the top). It starts at the log
// position the first page was read at, so nothing in between is missed; no polling.

import { gql } from "../api.js";
import { FINAL, h, replace, shortId, statusBadge, timeEl } from "../dom.js";
import { errorBox } from "../errors.js";
import { addNavItem } from "../nav.js";
import { definePage } from "../router.js";
import * as live from "../live.js";
import { queueText, resourcesText, sessionAsOf } from "../sessions-common.js";

const PAGE = 100;
const MAX_PENDING = 500; // waiting rows whose queue moves the feed follows (its limit)
// A row's fields, the same for the list and for a session added to it.
const FIELDS = "id name status statusReason type image clusterSize createdAt exitCode result queuePosition queueLength resources { cpu memoryBytes gpu } resourcesPerKernel { cpu memoryBytes gpu }";
const QUERY = `query MySessions($after: String) {
  sessions(first: ${PAGE}, after: $after, newestFirst: true) {
    seq totalCount
    edges { node { ${FIELDS} } }
    pageInfo { hasNextPage endCursor }
  }
}`;

const ENDED = "query Ended($id: ID!) { session(id: $id) { status exitCode result statusReason } }";
const ONE = `query One($id: ID!) { session(id: $id) { ${FIELDS} } }`;
const CHANGED = `subscription Changed($pending: [ID!], $after: Int) {
  sessionsChanged(pending: $pending, after: $after) {
    changes { id added status reason seq queuePosition queueLength }
  }
}`;

async function loadPage(after) {
  const { sessions } = await gql(QUERY, { after });
  return {
    rows: sessions.edges.map((e) => e.node),
    seq: sessions.seq,
    total: sessions.totalCount,
    more: sessions.pageInfo.hasNextPage ? sessions.pageInfo.endCursor : null,
  };
}

function statusCell(session) {
  const waiting = session.status === "PENDING" ? queueText(session.queuePosition, session.queueLength) : "";
  const detail = [waiting, session.statusReason].filter(Boolean).join(" · ");
  return h("td", { class: "status-cell" }, statusBadge(session.status), detail && h("div", { class: "reason" }, detail));
}

function resultText(session) {
  if (session.result === "success") return "succeeded";
  if (session.result === "terminated") return "terminated";
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

function summary(sessions, total) {
  const count = (test) => sessions.filter(test).length;
  const running = count((s) => s.status === "RUNNING");
  const waiting = count((s) => s.status === "PENDING");
  const starting = count((s) => ["SCHEDULED", "PULLING", "PREPARING", "CREATING"].includes(s.status));
  const parts = [`${running} running`, `${waiting} waiting`];
  if (starting) parts.push(`${starting} starting`);
  const scope = sessions.length < total ? ` of the ${sessions.length} newest shown` : "";
  return `${parts.join(", ")}${scope}; ${total} in all`;
}

definePage({
  path: "/sessions",
  title: "My sessions",
  async render({ root, scope, viewer }) {
    const heading = viewer.role === "user" ? "My sessions" : "Sessions";
    const counts = h("p", { class: "summary", id: "session-summary" });
    const problems = h("div", { class: "problems" });
    const body = h("tbody");
    const older = h("div", { class: "actions", id: "sessions-older" });
    replace(
      root,
      h("div", { class: "page-head" }, h("h1", {}, heading), h("a", { class: "button primary", href: "#/sessions/new" }, "New session")),
      viewer.role !== "user" && h("p", { class: "hint" }, `As ${viewer.role === "superadmin" ? "a superadmin" : `an ${viewer.role}`} you see every session you may read, not only yours.`),
      counts,
      problems,
      h("table", { class: "table", id: "sessions" },
        h("thead", {}, h("tr", {}, ["Session", "Status", "Type", "Image", "Resources", "Created", "Result"].map((t) => h("th", {}, t)))),
        body),
      older,
    );
    const first = await loadPage(null);
    if (scope.left) return;
    const rows = new Map(); // id -> {session, element}, newest first
    let total = first.total;
    let next = first.more;
    let seq = first.seq; // the log position the feed resumes after
    const recount = () => { counts.textContent = summary([...rows.values()].map((r) => r.session), total); };
    const emptyRow = () => h("tr", {}, h("td", { colspan: 7, class: "empty" }, "No sessions yet. ", h("a", { href: "#/sessions/new" }, "Start one"), "."));
    const add = (sessions, where) => {
      const fresh = sessions.filter((s) => !rows.has(s.id)).map((s) => ({ session: s, element: row(s) }));
      for (const entry of fresh) rows.set(entry.session.id, entry);
      if (where === "top") body.prepend(...fresh.map((e) => e.element));
      else body.append(...fresh.map((e) => e.element));
    };
    const show = (entry, session) => {
      entry.session = session;
      const fresh = row(session);
      entry.element.replaceWith(fresh);
      entry.element = fresh;
    };
    const drawOlder = () => {
      replace(older, next && h("button", { type: "button", id: "sessions-older-button", onclick: more }, `Show older (${total - rows.size} more)`));
    };
    add(first.rows, "bottom");
    if (rows.size === 0) replace(body, emptyRow());
    recount();
    drawOlder();

    let stop = () => {};
    const follow = () => {
      stop();
      stop = live.subscribe(CHANGED, () => ({
        // Asked again on every (re)connection: the rows waiting now, and where the feed was.
        pending: [...rows.values()].filter((r) => r.session.status === "PENDING").slice(0, MAX_PENDING).map((r) => r.session.id),
        after: seq,
      }), {
        next: (data) => apply(data.sessionsChanged.changes),
        error: (error) => replace(problems, errorBox(error, "Live updates stopped")),
      });
    };
    async function more() {
      const page = await loadPage(next);
      if (scope.left) return;
      next = page.more;
      total = page.total;
      add(page.rows, "bottom");
      recount();
      drawOlder();
      follow(); // its waiting rows' queue moves too
    }
    const ended = (entry, status) => {
      // Its exit code and result are on the session, not on the change: asked once.
      sessionAsOf(ENDED, entry.session.id, status, scope)
        .then((session) => { if (session && !scope.left) { show(entry, { ...entry.session, ...session }); recount(); } })
        .catch(() => {});
    };
    const arriving = new Map(); // id -> changes heard while its row is being read
    const added = async (id) => {
      arriving.set(id, []);
      try {
        const { session } = await gql(ONE, { id });
        if (session === null || rows.has(id) || scope.left) return;
        if (rows.size === 0) replace(body);
        total += 1;
        add([session], "top");
        drawOlder();
      } finally {
        const later = arriving.get(id) ?? [];
        arriving.delete(id);
        apply(later); // what changed since, in order (a change the view already held is harmless)
      }
    };
    function apply(changes) {
      if (scope.left) return;
      for (const change of changes) {
        seq = Math.max(seq, change.seq);
        const entry = rows.get(change.id);
        if (!entry) {
          // Requested after the list was read: it comes in at the top. (A change of an older
          // session not shown is not this page's.)
          if (arriving.has(change.id)) arriving.get(change.id).push(change);
          else if (change.added) added(change.id).catch((error) => replace(problems, errorBox(error, "A new session could not be read")));
          continue;
        }
        show(entry, {
          ...entry.session,
          status: change.status,
          statusReason: change.reason,
          queuePosition: change.queuePosition,
          queueLength: change.queueLength,
        });
        if (FINAL.has(change.status)) ended(entry, change.status);
      }
      recount();
    }
    follow();
    scope.onLeave(() => stop());
  },
});

addNavItem({ href: "#/sessions", label: "Sessions", order: 10 });
