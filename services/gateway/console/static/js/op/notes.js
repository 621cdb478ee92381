// Why waiting sessions do not fit, in the words of the `cluster` query's notes: the ones the
// group could hold in total but no node in one piece (fragmented), the ones it is short for,
// and a count of those that have room now and wait for something else.

import { h } from "../dom.js";

export const KIND_WORDS = { fragmented: "fragmented", short: "not enough free", fits: "has room" };

export function noteBadge(note) {
  return h("span", { class: `op-kind op-kind-${note.kind}`, dataset: { kind: note.kind } }, KIND_WORDS[note.kind] ?? note.kind);
}

/** Every note that says why a waiting session cannot fit, head of each queue first. */
export function noteList(groups, { empty = "Nothing waits." } = {}) {
  const waiting = groups.flatMap((g) => g.waiting);
  const blocked = waiting.filter((w) => w.note && w.note.kind !== "fits");
  const fitting = waiting.filter((w) => w.note && w.note.kind === "fits");
  if (waiting.length === 0) return h("p", { class: "hint" }, empty);
  return [
    blocked.length > 0
      ? h("ul", { class: "op-notes" }, blocked.map((w) => h("li", { dataset: { session: w.sessionId, kind: w.note.kind } },
        noteBadge(w.note), " ", h("span", { class: "op-note-text" }, w.note.text), " ",
        h("a", { href: `#/operate/queue?group=${encodeURIComponent(w.resourceGroup)}` }, "queue"))))
      : h("p", { class: "hint" }, "No waiting session is blocked by a lack of room."),
    fitting.length > 0 && h("p", { class: "hint" },
      `${fitting.length} waiting ${fitting.length === 1 ? "session has" : "sessions have"} room now: `
      + "they wait for their turn, their quota, a dependency or a start time (their reasons are on the ",
      h("a", { href: "#/operate/queue" }, "queue"), ")."),
  ];
}
