// Operate › Queue: each resource group's waiting sessions, head first, with their place, what
// each kernel asks, how long they have waited, their fair-share factor (fair-share groups),
// the scheduler's reason and, in words, why they do not fit (fragmentation, not enough free,
// or room now). Live through clusterChanges. Asks only the queues, the waiting and the notes:
// no node.

import { clockEl, h, replace, resourcesWords, timeEl } from "../dom.js";
import { errorBox } from "../errors.js";
import { addNavItem } from "../nav.js";
import { loadQueues } from "../op/cluster.js";
import { followCluster, refresher } from "../op/feed.js";
import { OPERATORS, ordinal } from "../op/format.js";
import { noteBadge } from "../op/notes.js";
import { definePage } from "../router.js";

function asks(w) {
  const each = resourcesWords(w.perKernel);
  return w.clusterSize > 1 ? `${w.clusterSize} × (${each}) ${w.clusterMode}` : each;
}

const two = (x) => x.toFixed(2);

/** The owner's user factor, with the domain's and project's that order before it. */
function fairShare(w) {
  const f = w.fairShare;
  if (!f) return h("span", { class: "hint" }, "—");
  const title = "2^(-usage/share), 0 to 1: after priority the queue takes the highest domain, then project, then user factor";
  return h("span", { class: "op-fair-share", title },
    two(f.user), h("div", { class: "sub" }, `domain ${two(f.domain)} · project ${two(f.project)}`));
}

function row(w) {
  return h("tr", { dataset: { session: w.sessionId } },
    h("td", { class: "num" }, w.position ? ordinal(w.position) : h("span", { class: "hint", title: "not on the scheduler's list: not admitted yet, or set aside by a dependency or a start time" }, "—")),
    h("td", { class: "op-session" }, h("a", { href: `#/sessions/${w.sessionId}` }, w.name || w.sessionId.slice(0, 8)),
      h("div", { class: "sub" }, h("a", { href: `#/operate/events/session/${w.sessionId}` }, "event log"))),
    h("td", {}, w.user ?? "", w.domain && h("div", { class: "sub" }, w.domain)),
    h("td", {}, asks(w)),
    h("td", { class: "num" }, String(w.priority)),
    h("td", { class: "num" }, fairShare(w)),
    h("td", {}, timeEl(w.createdAt), w.admitted ? null : h("div", { class: "sub" }, "quota not reserved yet")),
    h("td", { class: "op-why" }, h("div", {}, w.reason),
      w.note && w.note.kind !== "fits" && h("div", { class: "op-note" }, noteBadge(w.note), " ", w.note.text)));
}

function groupSection(group) {
  return h("section", { class: "card op-queue", dataset: { group: group.name } },
    h("h2", {}, `Group ${group.name}`, h("span", { class: "tag" }, `${group.length} waiting`)),
    group.waiting.length < group.length && h("p", { class: "hint" }, `${group.length - group.waiting.length} of them belong to domains you may not read.`),
    h("table", { class: "table compact" },
      h("thead", {}, h("tr", {}, ["#", "Session", "Owner", "Each kernel asks", "Priority", "Fair share", "Waiting since", "Why it waits"].map((t) => h("th", {}, t)))),
      h("tbody", {}, group.waiting.map(row))));
}

definePage({
  path: "/operate/queue",
  title: "Queue",
  roles: OPERATORS,
  async render({ root, scope, query }) {
    const only = query.get("group");
    const updated = h("div", { class: "op-updated", id: "op-updated" });
    const problems = h("div", { class: "problems" });
    const body = h("div", { id: "op-queues" });
    replace(root, h("div", { class: "page-head" }, h("h1", {}, only ? `Queue of ${only}` : "Queues"), updated), problems, body);
    const load = async () => {
      try {
        const model = await loadQueues();
        if (scope.left) return;
        const groups = model.groups.filter((g) => !only || g.name === only);
        replace(problems);
        replace(body, groups.length ? groups.map(groupSection) : h("p", { class: "hint", id: "op-queue-empty" }, "Nothing waits."));
        replace(updated, "updated ", clockEl(new Date().toISOString()), ` · log position ${model.seq}`);
      } catch (error) {
        if (!scope.left) replace(problems, errorBox(error, "The queues could not be read"));
      }
    };
    const refresh = refresher(load);
    await refresh();
    followCluster(scope, (change) => {
      if (change === null || change.queues || change.sessions > 0 || change.nodeIds.length > 0) refresh();
    }, { onError: (error) => replace(problems, errorBox(error, "Live updates stopped")) });
  },
});

addNavItem({ href: "#/operate/queue", label: "Queue", section: "Operate", roles: OPERATORS, order: 20 });
