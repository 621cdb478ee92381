// "Endpoints" (model serving): the endpoints the person may see, with their status, replicas
// serving of desired and the app proxies' traffic now; and one endpoint: its URL, rules,
// replicas with their lifecycle, health and traffic kept apart, revisions, tokens and scaling
// decisions. Both pages refresh every few seconds while shown (traffic is measured, not
// logged: there is no event to follow for it).

import { gql } from "../api.js";
import { clockEl, h, replace, shellWords, statusBadge, timeEl } from "../dom.js";
import { errorBox } from "../errors.js";
import { addNavItem } from "../nav.js";
import { refresher } from "../op/feed.js";
import { definePage } from "../router.js";

const REFRESH_MS = 3000;
const TRAFFIC = "traffic { requestsPerSecond inflight p50Ms p99Ms }";
const LIST = `query Endpoints {
  endpoints(first: 200) {
    edges { node { id name status url desiredReplicas servingReplicas minReplicas maxReplicas
      currentRevision targetRevision openToPublic ${TRAFFIC} } }
  }
}`;
const ONE = `query Endpoint($id: String!) {
  endpoint(id: $id) {
    id name status url desiredReplicas servingReplicas minReplicas maxReplicas currentRevision
    targetRevision openToPublic coldStartTimeoutS maxSurge maxUnavailable lastScalingReason
    rules { metric scaleUpAbove scaleDownBelow step cooldownS windowS }
    ${TRAFFIC}
    replicas(ended: 10) { replica sessionId revision lifecycle health traffic reason changedAt }
    revisions { revision image command port modelFolder modelVersion reason addedAt rolledBackReason }
    tokens { tokenId note issuedAt expiresAt revokedAt }
    scalingHistory(last: 10) { replicas previous source reason at }
  }
}`;

function number(value, digits = 1) {
  return value === null || value === undefined ? "—" : value.toFixed(digits);
}

function trafficText(t) {
  if (t.requestsPerSecond === null) return h("span", { class: "hint", title: "no app proxy reports now" }, "not measured");
  return `${number(t.requestsPerSecond)} req/s · ${t.inflight ?? 0} in flight · p50 ${number(t.p50Ms)} ms · p99 ${number(t.p99Ms)} ms`;
}

function revisionText(e) {
  return e.targetRevision === null ? String(e.currentRevision) : `${e.currentRevision} → ${e.targetRevision}`;
}

function ruleText(r) {
  const up = r.scaleUpAbove === null ? "" : ` up above ${r.scaleUpAbove}`;
  const down = r.scaleDownBelow === null ? "" : ` down below ${r.scaleDownBelow}`;
  return `${r.metric}:${up}${down}, step ${r.step}, cooldown ${r.cooldownS}s, window ${r.windowS}s`;
}

function pageOf(load) {
  return async ({ root, scope, params }) => {
    const problems = h("div", { class: "problems" });
    const body = h("div", {});
    const updated = h("div", { class: "op-updated" });
    replace(root, problems, body, updated);
    const run = refresher(async () => {
      try {
        const shown = await load(params);
        if (scope.left) return;
        replace(problems);
        replace(body, shown);
        replace(updated, "updated ", clockEl(new Date().toISOString()));
      } catch (error) {
        if (!scope.left) replace(problems, errorBox(error, "The endpoints could not be read"));
      }
    });
    await run();
    const timer = setInterval(run, REFRESH_MS);
    scope.onLeave(() => clearInterval(timer));
  };
}

async function listing() {
  const { endpoints } = await gql(LIST);
  const rows = endpoints.edges.map((e) => e.node);
  return [
    h("div", { class: "page-head" }, h("h1", {}, "Endpoints")),
    h("p", { class: "hint" }, "Model-serving endpoints: replicas of a model server behind one URL at the app proxy. Create them with jetyard endpoint create."),
    h("table", { class: "table", id: "endpoints" },
      h("thead", {}, h("tr", {}, ["Endpoint", "Status", "Serving / desired", "Bounds", "Revision", "Traffic", "URL"].map((t) => h("th", {}, t)))),
      h("tbody", {}, rows.length === 0
        ? h("tr", {}, h("td", { colspan: 7, class: "empty" }, "No endpoints."))
        : rows.map((e) => h("tr", { dataset: { endpoint: e.name } },
          h("td", {}, h("a", { href: `#/endpoints/${e.id}` }, e.name)),
          h("td", {}, statusBadge(e.status)),
          h("td", { class: "num" }, `${e.servingReplicas} / ${e.desiredReplicas}`),
          h("td", { class: "num" }, `${e.minReplicas}–${e.maxReplicas}`),
          h("td", { class: "num" }, revisionText(e)),
          h("td", { class: "traffic" }, trafficText(e.traffic)),
          h("td", { class: "mono" }, e.url, e.openToPublic ? h("span", { class: "tag" }, "public") : null))))),
  ];
}

function replicaRows(replicas) {
  return replicas.map((r) => h("tr", { dataset: { replica: String(r.replica) } },
    h("td", { class: "num" }, String(r.replica)),
    h("td", { class: "num" }, String(r.revision)),
    h("td", {}, statusBadge(r.lifecycle)),
    h("td", {}, h("span", { class: `health health-${r.health.toLowerCase()}` }, r.health)),
    h("td", {}, r.traffic),
    h("td", {}, h("a", { href: `#/sessions/${r.sessionId}` }, r.sessionId.slice(0, 8))),
    h("td", { class: "op-why" }, r.reason, " ", timeEl(r.changedAt))));
}

async function detail(params) {
  const { endpoint: e } = await gql(ONE, { id: params.id });
  if (e === null) return h("p", { class: "empty" }, "There is no such endpoint, or you may not see it.");
  const facts = [
    ["Status", statusBadge(e.status)],
    ["URL", h("span", { class: "mono" }, e.url), e.openToPublic ? " (public: no token needed)" : " (Authorization: Bearer <token>)"],
    ["Replicas", `${e.servingReplicas} serving of ${e.desiredReplicas} desired (bounds ${e.minReplicas}–${e.maxReplicas})`],
    ["Traffic", trafficText(e.traffic)],
    ["Revision", revisionText(e), ` (surge ${e.maxSurge}, unavailable ${e.maxUnavailable})`],
    ["Cold start", `requests wait up to ${e.coldStartTimeoutS}s for a first replica`],
    ["Last scaled", e.lastScalingReason ?? "—"],
  ];
  return [
    h("div", { class: "page-head" }, h("h1", {}, `Endpoint ${e.name}`)),
    h("dl", { class: "details", id: "endpoint-facts" }, facts.flatMap(([k, ...v]) => [h("dt", {}, k), h("dd", {}, ...v)])),
    h("section", { class: "card" }, h("h2", {}, "Scaling rules"),
      e.rules.length ? h("ul", {}, e.rules.map((r) => h("li", {}, ruleText(r)))) : h("p", { class: "hint" }, "None: the desired count is what was set.")),
    h("section", { class: "card" }, h("h2", {}, "Replicas"),
      h("table", { class: "table compact", id: "endpoint-replicas" },
        h("thead", {}, h("tr", {}, ["#", "Revision", "Lifecycle", "Health", "Traffic", "Session", "Why"].map((t) => h("th", {}, t)))),
        h("tbody", {}, e.replicas.length ? replicaRows(e.replicas) : h("tr", {}, h("td", { colspan: 7, class: "empty" }, "No replicas."))))),
    h("section", { class: "card" }, h("h2", {}, "Revisions"),
      h("table", { class: "table compact" },
        h("thead", {}, h("tr", {}, ["#", "Image", "Command", "Port", "Model", "Why", "Added"].map((t) => h("th", {}, t)))),
        h("tbody", {}, e.revisions.map((r) => h("tr", {},
          h("td", { class: "num" }, String(r.revision)),
          h("td", { class: "mono" }, r.image),
          h("td", {}, r.command ? h("code", {}, shellWords(r.command)) : h("span", { class: "hint" }, "the image's own")),
          h("td", { class: "num" }, String(r.port)),
          h("td", {}, r.modelFolder ?? "—", r.modelVersion ? ` (${r.modelVersion})` : ""),
          h("td", {}, r.reason, r.rolledBackReason ? h("div", { class: "sub" }, `rolled back: ${r.rolledBackReason}`) : null),
          h("td", {}, timeEl(r.addedAt))))))),
    h("section", { class: "card" }, h("h2", {}, "Scaling decisions"),
      e.scalingHistory.length
        ? h("ul", { class: "plain" }, e.scalingHistory.map((s) => h("li", {}, timeEl(s.at), ` ${s.previous} → ${s.replicas} (${s.source}): ${s.reason}`)))
        : h("p", { class: "hint" }, "None yet: it runs the count it was created with.")),
    h("section", { class: "card" }, h("h2", {}, "Tokens"),
      h("table", { class: "table compact" },
        h("thead", {}, h("tr", {}, ["Token", "Note", "Issued", "Expires", "Revoked"].map((t) => h("th", {}, t)))),
        h("tbody", {}, e.tokens.map((t) => h("tr", {},
          h("td", { class: "mono" }, t.tokenId), h("td", {}, t.note), h("td", {}, timeEl(t.issuedAt)),
          h("td", {}, timeEl(t.expiresAt)), h("td", {}, t.revokedAt ? timeEl(t.revokedAt) : "—")))))),
  ];
}

definePage({ path: "/endpoints", title: "Endpoints", render: pageOf(listing) });
definePage({ path: "/endpoints/:id", title: "Endpoint", render: pageOf(detail) });

addNavItem({ href: "#/endpoints", label: "Endpoints", order: 25 });
