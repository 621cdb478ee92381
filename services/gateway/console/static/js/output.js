// A session's output in the page: the sessionOutput subscription from line 0, one block per
// kernel, kept in order by line number (a reconnect asks from 0 again; lines already shown
// are skipped). Falls back to sessionLogs for a session whose live output has expired.

import { gql } from "./api.js";
import { h, replace } from "./dom.js";
import { errorBox } from "./errors.js";
import * as live from "./live.js";

const OUTPUT = `subscription SessionOutput($id: ID!, $since: Int!) {
  sessionOutput(id: $id, since: $since) { kernelId position lines dropped notice }
}`;
const ARCHIVED = "query ArchivedOutput($id: ID!) { sessionLogs(id: $id) }";
const MAX_LINES = 20_000; // per kernel in the page; older lines leave the DOM

/** Fill `root` with the live output of `session` (needs id, kernelIds). */
export function showOutput(root, scope, session) {
  const kernels = new Map(); // kernelId -> {next, pre, count}
  const empty = h("p", { class: "hint", id: "output-empty" }, "No output yet.");
  const blocks = h("div", { class: "output-blocks" });
  replace(root, empty, blocks);
  let seen = 0;

  const blockOf = (kernelId) => {
    if (!kernels.has(kernelId)) {
      const main = session.kernelIds?.[0] === kernelId;
      const pre = h("pre", { class: "output", dataset: { kernel: kernelId } });
      const several = (session.clusterSize ?? 1) > 1;
      blocks.append(h("div", { class: "output-block" }, several && h("div", { class: "sub" }, `kernel ${kernelId}${main ? " (main)" : ""}`), pre));
      kernels.set(kernelId, { next: 0, pre, count: 0 });
    }
    return kernels.get(kernelId);
  };

  const add = (chunk) => {
    const kernel = blockOf(chunk.kernelId);
    const atBottom = kernel.pre.scrollTop + kernel.pre.clientHeight >= kernel.pre.scrollHeight - 4;
    if (chunk.notice && chunk.position >= kernel.next) kernel.pre.append(h("span", { class: "notice" }, `${chunk.notice}\n`));
    const fresh = [];
    chunk.lines.forEach((line, i) => {
      if (chunk.position + i >= kernel.next) fresh.push(line);
    });
    kernel.next = Math.max(kernel.next, chunk.position + chunk.lines.length);
    if (fresh.length === 0) return;
    empty.remove();
    seen += fresh.length;
    kernel.pre.append(`${fresh.join("\n")}\n`);
    kernel.count += fresh.length;
    while (kernel.count > MAX_LINES && kernel.pre.firstChild) {
      kernel.count -= (kernel.pre.firstChild.textContent.match(/\n/g) ?? []).length;
      kernel.pre.firstChild.remove();
    }
    if (atBottom) kernel.pre.scrollTop = kernel.pre.scrollHeight;
  };

  const archived = async () => {
    if (seen > 0) return;
    try {
      const { sessionLogs } = await gql(ARCHIVED, { id: session.id });
      if (sessionLogs && !scope.left) {
        empty.remove();
        blocks.append(h("pre", { class: "output" }, sessionLogs));
      }
    } catch (error) {
      if (!scope.left) root.append(errorBox(error, "The output could not be read"));
    }
  };

  const stop = live.subscribe(OUTPUT, { id: session.id, since: 0 }, {
    next: (data) => add(data.sessionOutput),
    error: (error) => root.append(errorBox(error, "Live output stopped")),
    complete: () => {
      root.dataset.complete = "true";
      archived();
    },
  });
  scope.onLeave(stop);
}
