// Why waiting sessions do not fit, in the words of the `cluster` query's notes: the ones the
// group could hold in total but no node in one piece (fragmented), the ones it is short for,
// and a count of those that have room now and wait for something else.

import { h } from "../dom.js";
import { groupBy } from "./cluster.js";
import { ordinal } from "./format.js";

export const KIND_WORDS = { fragmented: "fragmented", short: "not enough free", fits: "has room", oversized: "never fits as is" };

export function noteBadge(note) {
  return h("span", { class: `op-kind op-kind-${note.kind}`, dataset: { kind: note.kind } }, KIND_WORDS[note.kind] ?? note.kind);
}

const SHOWN = 8; // situations said on the page; the rest are on the queue page
const NAMED = 3; // waiting sessions named under a situation

function sessionLink(w) {
  const name = w.name || w.sessionId.slice(0, 8);
  return h("a", { href: `#/sessions/${w.sessionId}` }, name, w.position ? ` (${ordinal(w.position)})` : "");
}

/** One situation: a lone request's note in full; several requests of one shape that meet the
 * same room, said once with the first few named. */
function situationItem(waiting) {
  const first = waiting[0];
  const queue = h("a", { href: `#/operate/queue?group=${encodeURIComponent(first.resourceGroup)}` }, "queue");
  const item = { dataset: { session: first.sessionId, kind: first.note.kind, waiting: waiting.length } };
  if (waiting.length === 1) {
    return h("li", item, noteBadge(first.note), " ", h("span", { class: "op-note-text" }, first.note.text), " ", queue);
  }
  const named = waiting.slice(0, NAMED);
  const rest = waiting.length - named.length;
  return h("li", item, noteBadge(first.note), " ", h("span", { class: "op-note-text" }, first.note.situation),
    h("div", { class: "op-note-who" }, `${waiting.length} waiting requests meet this: `,
      named.flatMap((w, i) => [i > 0 ? ", " : "", sessionLink(w)]),
      rest > 0 ? ` and ${rest} more` : "", " · ", queue));
}

/** Why waiting sessions cannot fit, head of each queue first: one entry per situation (the
 * requests of one shape in one group meet the same room), the first few said. */
export function noteList(groups, { empty = "Nothing waits." } = {}) {
  const waiting = groups.flatMap((g) => g.waiting);
  const blocked = waiting.filter((w) => w.note && w.note.kind !== "fits");
  const fitting = waiting.filter((w) => w.note && w.note.kind === "fits");
  if (waiting.length === 0) return h("p", { class: "hint" }, empty);
  const situations = groupBy(blocked, (w) => [w.resourceGroup, w.note.kind, w.note.situation || w.note.text].join("\u0000"));
  const shown = [...situations.values()].slice(0, SHOWN);
  const more = situations.size - shown.length;
  return [
    blocked.length > 0
      ? h("ul", { class: "op-notes" }, shown.map(situationItem))
      : h("p", { class: "hint" }, "No waiting session is blocked by a lack of room."),
    more > 0 && h("p", { class: "hint" }, `${more} more ${more === 1 ? "situation" : "situations"} on the `,
      h("a", { href: "#/operate/queue" }, "queue"), "."),
    fitting.length > 0 && h("p", { class: "hint" },
      `${fitting.length} waiting ${fitting.length === 1 ? "session has" : "sessions have"} room now: `
      + "they wait for their turn, their quota, a dependency or a start time (their reasons are on the ",
      h("a", { href: "#/operate/queue" }, "queue"), ")."),
  ];
}
