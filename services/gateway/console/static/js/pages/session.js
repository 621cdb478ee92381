// One session: what it asked for, its status history (live), where it waits and why, the
// image pulls it waits for (live, per node), its output (live from line 0), its apps and its
// terminal.

import { gql } from "../api.js";
import { FINAL, clockEl, h, replace, shellWords, statusBadge, when } from "../dom.js";
import { errorBox } from "../errors.js";
import * as live from "../live.js";
import { showOutput } from "../output.js";
import { AUDITORS } from "../op/format.js";
import { bytesOf, progressBar } from "../progress.js";
import { definePage } from "../router.js";
import { followStatus, queueText, resourcesText, sessionAsOf, sessionLabel } from "../sessions-common.js";
import { openTerminal } from "../terminal.js";

const SESSION = `query Session($id: ID!) {
  session(id: $id) {
    id name status statusReason type image command clusterSize clusterMode nodeIds kernelIds
    exitCode result createdAt timeoutSeconds queuePosition queueLength dependsOn startsAt
    resources { cpu memoryBytes gpu } resourcesPerKernel { cpu memoryBytes gpu }
    mounts { folderId name path readOnly }
    servicePorts { kernelId name protocol port state public }
  }
}`;
const PULLS = `subscription SessionPulls($id: ID!) {
  sessionPulls(id: $id) { nodeId nodeName reference status doneBytes totalBytes layers { layer doneBytes totalBytes } cause reason }
}`;
// A session in one of these may still pull its image; sessionPulls ends once it runs or ends.
const BEFORE_RUNNING = new Set(["PENDING", "SCHEDULED", "PULLING"]);
const TERMINATE = `mutation Terminate($id: ID!) { terminateSession(id: $id) { status message } }`;
const START_APP = `mutation StartApp($id: ID!, $app: String!) { startApp(sessionId: $id, app: $app) { url expiresAt } }`;

function details(session) {
  const rows = [
    ["Id", h("span", { class: "mono" }, session.id)],
    ["Type", session.type],
    ["Image", h("span", { class: "mono" }, session.image)],
    ["Command", session.command ? h("code", {}, shellWords(session.command)) : h("span", { class: "hint" }, "the image's own")],
    ["Resources", resourcesText(session)],
    session.clusterSize > 1 && ["Placement", session.clusterMode],
    ["Nodes", session.nodeIds.length ? session.nodeIds.join(", ") : h("span", { class: "hint" }, "not placed yet")],
    ["Created", when(session.createdAt)],
    session.timeoutSeconds && ["Time limit", `${session.timeoutSeconds} s`],
    session.startsAt && ["Not before", when(session.startsAt)],
    session.dependsOn.length && ["After", session.dependsOn.map((d) => h("a", { href: `#/sessions/${d}`, class: "mono" }, d, " "))],
    ["Folders", session.mounts.length
      ? h("ul", { class: "plain" }, session.mounts.map((m) => h("li", {}, h("a", { href: `#/folders/${m.folderId}` }, m.name), ` at `, h("code", {}, m.path), m.readOnly ? " (read-only)" : "")))
      : h("span", { class: "hint" }, "none")],
    FINAL.has(session.status) && ["Result", resultOf(session)],
  ].filter(Boolean);
  return h("dl", { class: "details" }, rows.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

function resultOf(session) {
  if (session.result === "success") return "succeeded (exit 0)";
  if (session.result === "terminated") return session.exitCode === null ? "terminated" : `terminated (the stop's exit ${session.exitCode})`;
  if (session.result === "failure") return session.exitCode === null ? "failed" : `failed (exit ${session.exitCode})`;
  return session.exitCode === null ? "did not run" : `exit ${session.exitCode}`;
}

const PULL_WORDS = { pulling: "pulling", finished: "pulled", failed: "failed" };

/** One node's pull of one image: a bar of bytes (layers in a fold), or why it failed. */
function pullRow(pull) {
  const done = pull.status === "finished" ? pull.totalBytes : pull.doneBytes;
  const share = pull.status === "finished" ? 1 : pull.totalBytes > 0 ? done / pull.totalBytes : 0;
  return h("li", { class: `pull pull-${pull.status}`, dataset: { node: pull.nodeId, status: pull.status } },
    h("div", { class: "pull-head" }, h("strong", {}, pull.nodeName || pull.nodeId), " ", h("span", { class: "mono" }, pull.reference),
      h("span", { class: "tag" }, PULL_WORDS[pull.status] ?? pull.status)),
    pull.status === "failed"
      ? h("div", { class: "pull-failure", role: "alert" }, pull.cause && [h("code", { class: "error-code" }, pull.cause), " "], pull.reason || "the pull failed")
      : progressBar(share, pull.status === "finished" && !(done > 0) ? "done" : bytesOf(done, pull.totalBytes)),
    pull.status === "pulling" && pull.layers.length > 0 && h("details", { class: "pull-layers" },
      h("summary", {}, `${pull.layers.length} ${pull.layers.length === 1 ? "layer" : "layers"}`),
      h("ul", { class: "plain" }, pull.layers.map((l) => h("li", {}, h("span", { class: "mono", title: l.layer }, l.layer.slice(0, 19)),
        progressBar(l.totalBytes > 0 ? l.doneBytes / l.totalBytes : 0, bytesOf(l.doneBytes, l.totalBytes)))))));
}

function historyRow(change) {
  return h("tr", { dataset: { status: change.status } }, h("td", {}, clockEl(change.at)), h("td", {}, statusBadge(change.status)), h("td", {}, change.reason));
}

definePage({
  path: "/sessions/:id",
  title: "Session",
  async render({ root, params, scope, viewer }) {
    const { session } = await gql(SESSION, { id: params.id });
    if (scope.left) return;
    if (session === null) {
      replace(root, h("h1", {}, "No such session"), h("p", {}, `There is no session ${params.id} that you can see. `, h("a", { href: "#/sessions" }, "Back to sessions")));
      return;
    }
    let current = session;
    const badge = h("span", { id: "session-status" }, statusBadge(session.status));
    const wait = h("div", { class: "wait", id: "session-wait", role: "status" });
    const pullList = h("ul", { class: "plain pulls" });
    const pullBox = h("section", { class: "card", id: "session-pulls", hidden: true, "aria-live": "polite" }, h("h2", {}, "Image pull"), pullList);
    const problems = h("div", { class: "problems" });
    const terminate = h("button", { type: "button", class: "danger", id: "terminate" }, "Terminate");
    // Administrators may read the session's events (the audit trail) on the Audit page.
    const audit = AUDITORS.includes(viewer?.role)
      ? h("a", { class: "button", href: `#/operate/events/session/${session.id}`, id: "session-events" }, "Event log")
      : null;
    const detailBox = h("div", {}, details(session));
    const history = h("tbody");
    const apps = h("div", { id: "session-apps" });
    const terminalBox = h("div", { class: "terminal", id: "terminal", hidden: true });
    const output = h("div", { id: "session-output" });
    replace(
      root,
      h("div", { class: "page-head" },
        h("div", {}, h("div", { class: "crumbs" }, h("a", { href: "#/sessions" }, "Sessions"), " /"),
          h("h1", {}, sessionLabel(session), " ", badge)),
        h("div", { class: "actions" }, audit, terminate)),
      problems,
      wait,
      pullBox,
      h("div", { class: "columns" },
        h("section", { class: "card" }, h("h2", {}, "Details"), detailBox),
        h("section", { class: "card" }, h("h2", {}, "Status history"),
          h("table", { class: "table compact", id: "history" }, h("thead", {}, h("tr", {}, h("th", {}, "When"), h("th", {}, "Status"), h("th", {}, "Why"))), history))),
      h("section", { class: "card" }, h("h2", {}, "Apps"), apps, terminalBox),
      h("section", { class: "card" }, h("h2", {}, "Output"), output),
    );

    const drawWait = () => {
      if (current.status !== "PENDING") {
        replace(wait);
        wait.hidden = true;
        return;
      }
      wait.hidden = false;
      const place = queueText(current.queuePosition, current.queueLength);
      replace(wait, h("strong", {}, "Waiting"), place && ` · ${place}`, current.statusReason && h("div", {}, current.statusReason));
    };

    // Each node's pull of each image, as sessionPulls last said (a finished pull keeps the
    // bytes its last progress said: the finish carries none).
    const pulls = new Map();
    const pulled = (update) => {
      const key = `${update.nodeId} ${update.reference}`;
      const before = pulls.get(key);
      const keep = update.status === "finished" && before
        ? { doneBytes: before.totalBytes, totalBytes: before.totalBytes, layers: [] } : {};
      pulls.set(key, { ...update, ...keep });
      pullBox.hidden = false;
      replace(pullList, [...pulls.values()].map(pullRow));
    };
    let stopPulls = null;
    scope.onLeave(() => stopPulls?.());
    const followPulls = () => {
      if (stopPulls !== null || !BEFORE_RUNNING.has(current.status)) return;
      const ended = () => { stopPulls = null; };
      stopPulls = live.subscribe(PULLS, { id: current.id }, {
        next: (data) => pulled(data.sessionPulls),
        error: (error) => { ended(); replace(problems, errorBox(error, "Pull progress stopped")); },
        complete: ended,
      });
    };

    let closeTerminal = null;
    scope.onLeave(() => closeTerminal?.());
    const openApp = async (app) => {
      // A tab opened now (in the click) is not a blocked pop-up; it is sent to the app once
      // the gateway has granted it.
      const tab = window.open("about:blank", "_blank");
      try {
        const { startApp } = await gql(START_APP, { id: current.id, app });
        if (tab) {
          tab.opener = null;
          tab.location.href = startApp.url;
        }
      } catch (error) {
        tab?.close();
        replace(problems, errorBox(error, `Could not open ${app}`));
      }
    };
    const drawApps = () => {
      const running = current.status === "RUNNING";
      const http = current.servicePorts.filter((p) => p.protocol === "http");
      const terminalButton = h("button", {
        type: "button",
        id: "open-terminal",
        disabled: !running || closeTerminal !== null,
        onclick: async () => {
          terminalBox.hidden = false;
          replace(terminalBox);
          try {
            closeTerminal = await openTerminal(terminalBox, current.id, { onClose: () => { closeTerminal = null; drawApps(); } });
          } catch (error) {
            terminalBox.hidden = true;
            replace(problems, errorBox(error, "Could not open the terminal"));
          }
          drawApps();
        },
      }, "Open terminal");
      replace(
        apps,
        !running && h("p", { class: "hint" }, FINAL.has(current.status) ? "The session has ended." : "Apps open once the session is RUNNING."),
        h("ul", { class: "apps" },
          h("li", {}, terminalButton, " ", h("span", { class: "hint" }, "a shell in the main kernel")),
          http.map((p) => h("li", {},
            h("button", { type: "button", disabled: !running || p.state !== "open", onclick: () => openApp(p.name) }, `Open ${p.name}`),
            " ", h("span", { class: "hint" }, `port ${p.port}, ${p.state}${p.public ? ", public" : ""}`)))),
      );
    };

    const refresh = async () => {
      try {
        const fresh = await sessionAsOf(SESSION, current.id, current.status, scope);
        if (fresh && !scope.left) {
          current = { ...fresh, status: current.status, statusReason: current.statusReason };
          replace(detailBox, details(current));
          drawApps();
        }
      } catch {
        // The live status is still right; details catch up on the next change.
      }
    };

    terminate.addEventListener("click", async () => {
      terminate.disabled = true;
      try {
        await gql(TERMINATE, { id: current.id });
      } catch (error) {
        replace(problems, errorBox(error, "Not terminated"));
        terminate.disabled = false;
      }
    });

    const seen = new Map(); // seq -> row
    followStatus(scope, session.id, (change) => {
      const row = historyRow(change);
      if (seen.has(change.seq)) seen.get(change.seq).replaceWith(row); // the queue moved
      else history.append(row);
      seen.set(change.seq, row);
      const moved = change.status !== current.status;
      current = { ...current, status: change.status, statusReason: change.reason, queuePosition: change.queuePosition, queueLength: change.queueLength };
      replace(badge, statusBadge(change.status));
      terminate.hidden = FINAL.has(change.status) || change.status === "TERMINATING";
      drawWait();
      if (moved) {
        followPulls(); // again if requeued and placed anew
        drawApps();
        refresh(); // nodes, kernels, apps and the exit code change with the status
      }
    }, { error: (error) => replace(problems, errorBox(error, "Live status stopped")) });

    terminate.hidden = FINAL.has(session.status);
    drawWait();
    followPulls();
    drawApps();
    showOutput(output, scope, session);
  },
});
