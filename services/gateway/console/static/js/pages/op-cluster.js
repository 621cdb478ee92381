// Operate › Cluster: every node with its state (cordon, drain and uncordon from its card), the
// GPU map of every device with its whole and fractional holds, the sessions on a node when its
// card is opened, and why waiting requests do not fit, in words. Live: the clusterChanges
// subscription says which nodes changed and carries their rows (no polling, no second ask);
// only those are drawn, and the notes asked again at most once a second. A card's body
// (meters, GPU map, actions) is drawn when it comes near the screen, so a thousand nodes cost
// a screenful to show.

import { gql } from "../api.js";
import { bytes, clockEl, h, replace } from "../dom.js";
import { errorBox } from "../errors.js";
import { addNavItem } from "../nav.js";
import { CHANGED, changedNodes, loadCluster, loadKernels, loadNodes, loadNotes } from "../op/cluster.js";
import { followCluster, refresher } from "../op/feed.js";
import { OPERATORS, gpuAmount, mayOperateNodes } from "../op/format.js";
import { gpuMap, kernelTable, meter, signature } from "../op/gpu-map.js";
import { noteList } from "../op/notes.js";
import { bytesOf, progressBar } from "../progress.js";
import { definePage } from "../router.js";

const MUTATIONS = {
  cordon: "mutation Cordon($id: ID!, $reason: String!) { cordonNode(id: $id, reason: $reason) { status message } }",
  drain: "mutation Drain($id: ID!, $reason: String!, $deadline: Int) { drainNode(id: $id, reason: $reason, deadlineSeconds: $deadline) { status message } }",
  uncordon: "mutation Uncordon($id: ID!, $reason: String!) { uncordonNode(id: $id, reason: $reason) { status message } }",
};
const VERBS = { cordon: "Cordon", drain: "Drain", uncordon: "Uncordon" };
const EAGER = 24; // cards whose body a full load draws at once: more than a screenful
const NEAR = "1200px 0px"; // how close to the screen a card's body is drawn
const TICK_MS = 50; // the most often the page hears of a change
const NOTES_GAP_MS = 1000; // the most often the queues and notes are asked again
const NOTES_AFTER_MS = 300; // after a tick: its nodes are drawn first

function stateBadge(node) {
  return h("span", { class: `op-state op-state-${node.state}`, dataset: { state: node.state } }, node.state);
}

function summary(nodes, sessions, groups) {
  const states = new Map();
  for (const n of nodes) states.set(n.state, (states.get(n.state) ?? 0) + 1);
  const byState = [...states].map(([s, n]) => `${n} ${s}`).join(", ");
  const offered = nodes.filter((n) => n.state === "schedulable");
  const free = offered.reduce((sum, n) => sum + n.gpuFree, 0);
  const total = nodes.reduce((sum, n) => sum + n.gpuCapacity, 0);
  const waiting = groups.reduce((sum, g) => sum + g.waiting.length, 0);
  return `${nodes.length} ${nodes.length === 1 ? "node" : "nodes"}${byState ? ` (${byState})` : ""} · `
    + `${gpuAmount(free)} of ${gpuAmount(total)} GPUs free on schedulable nodes · `
    + `${sessions} ${sessions === 1 ? "session" : "sessions"} on nodes · ${waiting} waiting`;
}

function kernelsWords(node) {
  return `Sessions on it (${node.allocations} ${node.allocations === 1 ? "kernel" : "kernels"})`;
}

function meters(node) {
  const cpuUsed = Number(node.used.cpu);
  const cpuCap = Number(node.capacity.cpu);
  const memUsed = Number(node.used.memoryBytes);
  const memCap = Number(node.capacity.memoryBytes);
  return [
    meter("CPU", cpuUsed, cpuCap, `${node.used.cpu} of ${node.capacity.cpu} cores`),
    meter("Memory", memUsed, memCap, `${bytes(memUsed)} of ${bytes(memCap)}`),
    node.gpuCapacity > 0 && meter("GPU", node.gpuCapacity - node.gpuFree, node.gpuCapacity,
      `${node.used.gpu} of ${node.capacity.gpu} held`),
  ];
}

function actionsFor(node) {
  if (node.state === "lost") return [];
  if (node.state === "schedulable") return ["cordon", "drain"];
  if (node.state === "cordoned") return ["uncordon", "drain"];
  return ["uncordon"];
}

definePage({
  path: "/operate/cluster",
  title: "Cluster",
  roles: OPERATORS,
  async render({ root, scope, viewer }) {
    const updated = h("div", { class: "op-updated", id: "op-updated" });
    const problems = h("div", { class: "problems" });
    const totals = h("p", { class: "summary", id: "op-cluster-summary" });
    const notes = h("div", { id: "op-notes" });
    const grid = h("div", { class: "op-nodes", id: "op-nodes" });
    replace(root,
      h("div", { class: "page-head" }, h("h1", {}, "Cluster"), updated),
      problems, totals,
      h("section", { class: "card", id: "op-fragmentation" }, h("h2", {}, "Why requests wait"), notes),
      grid);

    const cards = new Map(); // node id -> {node, seq, headShown, bodyShown, near, card, head, actions, status, meters, map, said, kernels, kernelsShown}
    const byCard = new Map(); // card element -> its entry (for the observer)
    let sessionsOnNodes = 0;
    let groups = [];
    const seen = { nodes: 0, notes: 0 }; // the log positions drawn
    const forms = new Map(); // node id -> the open form's element (kept across refreshes)
    const opened = new Set(); // node ids whose sessions are shown: their kernels are asked with the cluster
    const operate = mayOperateNodes(viewer);

    const send = async (node, kind, form) => {
      const reason = form.elements.reason.value.trim() || `${kind === "drain" ? "drained" : `${kind}ed`} from the console`;
      const variables = { id: node.id, reason };
      if (kind === "drain") {
        const deadline = form.elements.deadline.value.trim();
        variables.deadline = deadline === "" ? null : Number(deadline);
      }
      const status = form.querySelector(".op-form-status");
      form.querySelector("button[type=submit]").disabled = true;
      replace(status, h("span", { class: "hint" }, "Sent: the scheduler decides…"));
      try {
        const answer = Object.values(await gql(MUTATIONS[kind], variables))[0];
        forms.delete(node.id);
        const entry = cards.get(node.id);
        drawActions(entry);
        replace(entry.status, h("span", { class: "op-done" }, `${VERBS[kind]}: ${answer.status.toLowerCase()}${answer.message ? ` (${answer.message})` : ""}`));
        named.add(node.id);
        await nodesAgain();
      } catch (error) {
        replace(status, errorBox(error, `${VERBS[kind]} refused`));
        form.querySelector("button[type=submit]").disabled = false;
      }
    };

    const formFor = (node, kind) => {
      const form = h("form", { class: "op-node-form", dataset: { kind } },
        h("label", { class: "field" }, h("span", { class: "label" }, "Reason"),
          h("input", { name: "reason", placeholder: `${kind === "drain" ? "drained" : `${kind}ed`} from the console`, maxlength: 200 })),
        kind === "drain" && h("label", { class: "field" }, h("span", { class: "label" }, "Stop what still runs after (seconds)"),
          h("input", { name: "deadline", type: "number", min: 1, placeholder: "empty: let it end by itself" })),
        h("div", { class: "actions" },
          h("button", { type: "submit", class: kind === "uncordon" ? "primary" : "danger" }, `${VERBS[kind]} ${node.hostname}`),
          h("button", { type: "button", onclick: () => { forms.delete(node.id); drawActions(cards.get(node.id)); } }, "Cancel")),
        h("div", { class: "op-form-status" }));
      form.addEventListener("submit", (event) => { event.preventDefault(); send(node, kind, form); });
      return form;
    };

    const buttons = (node) => h("div", { class: "actions" },
      operate && actionsFor(node).map((kind) => h("button", {
        type: "button",
        class: `op-${kind}`,
        onclick: () => {
          forms.set(node.id, formFor(node, kind));
          drawActions(cards.get(node.id));
          forms.get(node.id).elements.reason.focus();
        },
      }, kind === "uncordon" ? "Uncordon…" : `${VERBS[kind]}…`)),
      h("a", { class: "button", href: `#/operate/events/node/${node.id}` }, "Event log"));

    const drawActions = (entry) => {
      const open = forms.get(entry.node.id);
      // An open form stays the same element, so typing is not lost when the cluster changes.
      if (open) {
        if (open.parentNode !== entry.actions) replace(entry.actions, open);
      } else {
        replace(entry.actions, buttons(entry.node));
      }
    };

    const drawKernels = (entry, kernels) => {
      const shown = JSON.stringify(kernels);
      if (shown === entry.kernelsShown) return;
      entry.kernelsShown = shown;
      replace(entry.kernels, kernelTable(kernels));
    };

    // The sessions on a node are drawn when its card is opened (asked then), and followed
    // while it stays open; closed, they are dropped.
    const toggled = async (entry) => {
      const id = entry.node.id;
      if (!entry.more.open) {
        opened.delete(id);
        entry.kernelsShown = null;
        replace(entry.kernels);
        return;
      }
      opened.add(id);
      replace(entry.kernels, h("p", { class: "hint" }, "Reading…"));
      try {
        const found = await loadKernels([id]);
        if (!scope.left && opened.has(id)) drawKernels(entry, found.get(id));
      } catch (error) {
        if (!scope.left) replace(entry.kernels, errorBox(error, "The sessions could not be read"));
      }
    };

    const cardFor = (node) => {
      const entry = {
        node,
        seq: 0,
        headShown: null,
        bodyShown: null,
        near: false,
        head: h("div", { class: "op-node-head" }),
        actions: h("div", { class: "op-node-actions" }),
        status: h("div", { class: "op-node-status" }),
        meters: h("div", { class: "op-meters" }),
        map: h("div", { class: "op-node-map" }),
        said: h("summary", {}),
        kernels: h("div", { class: "op-node-kernels" }),
        kernelsShown: null,
      };
      entry.more = h("details", { class: "op-node-more", ontoggle: () => toggled(entry) }, entry.said, entry.kernels);
      entry.card = h("section", { class: "card op-node", dataset: { node: node.id, drawn: "no" } },
        entry.head, entry.actions, entry.status, h("div", { class: "op-node-body" }, entry.meters, entry.map, entry.more));
      cards.set(node.id, entry);
      byCard.set(entry.card, entry);
      near.observe(entry.card);
      return entry;
    };

    const drawHead = (entry) => {
      const node = entry.node;
      const shown = JSON.stringify([node.hostname, node.state, node.resourceGroup, node.reason, node.pulls]);
      if (shown === entry.headShown) return;
      entry.headShown = shown;
      entry.card.dataset.state = node.state;
      replace(entry.head,
        h("h2", {}, node.hostname, " ", stateBadge(node)),
        h("div", { class: "sub" }, `group ${node.resourceGroup} · `, h("span", { class: "mono" }, node.id)),
        node.reason && h("div", { class: "reason op-node-reason" }, node.reason),
        (node.pulls ?? []).length > 0 && h("ul", { class: "op-node-pulls" },
          ...node.pulls.map((p) => h("li", { dataset: { reference: p.reference } },
            h("span", { class: "hint" }, "pulling"), h("span", { class: "mono" }, p.reference),
            progressBar(p.totalBytes ? p.doneBytes / p.totalBytes : 0, bytesOf(p.doneBytes, p.totalBytes)),
            h("span", { class: "hint" }, ` for ${p.kernels} kernel${p.kernels === 1 ? "" : "s"}`)))));
    };

    /** A card's body (actions, meters, GPU map), drawn when it is near the screen (or `now`),
     * and again only when what it shows changed. */
    const drawBody = (entry, now = false) => {
      const shown = signature(entry.node);
      if (shown === entry.bodyShown) return;
      if (!(now || entry.near)) {
        // Away from the screen: what it showed is dropped, never left stale, and drawn
        // again when it comes near.
        if (entry.bodyShown !== null) {
          entry.bodyShown = null;
          entry.card.dataset.drawn = "no";
          replace(entry.actions);
          replace(entry.meters);
          replace(entry.map);
        }
        return;
      }
      entry.bodyShown = shown;
      entry.card.dataset.drawn = "yes";
      drawActions(entry);
      replace(entry.meters, meters(entry.node));
      replace(entry.map, gpuMap(entry.node));
      entry.said.textContent = kernelsWords(entry.node);
    };

    const near = new IntersectionObserver((records) => {
      for (const record of records) {
        const entry = byCard.get(record.target);
        if (!entry) continue;
        entry.near = record.isIntersecting;
        drawBody(entry);
      }
    }, { rootMargin: NEAR });

    /** Draw a node as of log position `seq`, unless its card already shows a later one. */
    const draw = (node, seq, { now = false } = {}) => {
      const entry = cards.get(node.id) ?? cardFor(node);
      if (seq < entry.seq) return entry.card;
      entry.seq = seq;
      entry.node = node;
      drawHead(entry);
      drawBody(entry, now);
      if (node.kernels && opened.has(node.id)) drawKernels(entry, node.kernels);
      return entry.card;
    };

    const drop = (id) => {
      const entry = cards.get(id);
      if (!entry) return;
      near.unobserve(entry.card);
      entry.card.remove();
      byCard.delete(entry.card);
      cards.delete(id);
      opened.delete(id);
      forms.delete(id);
    };

    const stamp = () => {
      const nodes = [...cards.values()].map((e) => e.node);
      totals.textContent = summary(nodes, sessionsOnNodes, groups);
      replace(updated, "updated ", clockEl(new Date().toISOString()), ` · log position ${Math.max(seen.nodes, seen.notes)}`);
    };

    const showNotes = (model) => {
      if (model.seq < seen.notes) return;
      seen.notes = model.seq;
      groups = model.groups;
      replace(notes, noteList(groups, { empty: "Nothing waits." }));
    };

    /** Everything again: on opening, after the live connection came back, or when a node
     * joined or left. */
    const loadAll = async () => {
      const asked = new Set(opened);
      let model;
      try {
        model = await loadCluster(asked);
      } catch (error) {
        if (!scope.left) replace(problems, errorBox(error, "The cluster could not be read"));
        return;
      }
      if (scope.left) return;
      replace(problems);
      sessionsOnNodes = model.sessionsOnNodes;
      seen.nodes = Math.max(seen.nodes, model.seq);
      showNotes(model);
      const present = new Set();
      for (const stale of grid.querySelectorAll(":scope > :not(.op-node)")) stale.remove();
      model.nodes.forEach((node, i) => {
        present.add(node.id);
        if (!asked.has(node.id)) node.kernels = null;
        const card = draw(node, model.seq, { now: i < EAGER });
        if (grid.children[i] !== card) grid.insertBefore(card, grid.children[i] ?? null);
      });
      for (const id of [...cards.keys()]) if (!present.has(id)) drop(id);
      if (model.nodes.length === 0) replace(grid, h("p", { class: "hint" }, "No node has registered yet."));
      stamp();
    };

    /** Nodes as of `model.seq` ({seq, sessionsOnNodes, nodes}), for the `ids` asked: a node
     * that joined or left draws the whole page again. */
    const drawNodes = async (ids, model) => {
      const found = new Map(model.nodes.map((n) => [n.id, n]));
      if (ids.some((id) => found.has(id) !== cards.has(id))) {
        await full();
        return;
      }
      sessionsOnNodes = model.sessionsOnNodes;
      seen.nodes = Math.max(seen.nodes, model.seq);
      for (const node of found.values()) {
        if (!opened.has(node.id)) node.kernels = null;
        draw(node, model.seq);
      }
      stamp();
    };

    // Nodes asked again together (after a form was sent; an open card a tick named, for its
    // sessions).
    const named = new Set();
    const loadNamed = async () => {
      const ids = [...named];
      named.clear();
      if (ids.length === 0) return;
      let model;
      try {
        model = await loadNodes(ids, ids.filter((id) => opened.has(id)));
      } catch (error) {
        if (!scope.left) replace(problems, errorBox(error, "The cluster could not be read"));
        return;
      }
      if (!scope.left) await drawNodes(ids, model);
    };

    const loadNotesNow = async () => {
      try {
        const model = await loadNotes();
        if (scope.left) return;
        showNotes(model);
        stamp();
      } catch (error) {
        if (!scope.left) replace(problems, errorBox(error, "The queues could not be read"));
      }
    };

    const full = refresher(loadAll);
    const nodesAgain = refresher(loadNamed);
    const notesAgain = refresher(loadNotesNow, { gapMs: NOTES_GAP_MS });
    scope.onLeave(() => near.disconnect());
    await full();
    followCluster(scope, (change) => {
      if (change === null) {
        full();
        return;
      }
      if (change.nodeIds.length > 0) {
        // The tick carries the rows of the nodes it names; an open card's sessions are asked.
        drawNodes(change.nodeIds, changedNodes(change));
        for (const id of change.nodeIds) if (opened.has(id)) named.add(id);
        if (named.size > 0) nodesAgain();
      }
      if (change.queues || change.sessions > 0 || change.nodeIds.length > 0) {
        setTimeout(() => { if (!scope.left) notesAgain(); }, NOTES_AFTER_MS);
      }
    }, {
      every: TICK_MS,
      fields: CHANGED,
      onError: (error) => replace(problems, errorBox(error, "Live updates stopped")),
    });
  },
});

addNavItem({ href: "#/operate/cluster", label: "Cluster", section: "Operate", roles: OPERATORS, order: 10 });
