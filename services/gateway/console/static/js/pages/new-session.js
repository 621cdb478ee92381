// "New session": the createSession form. It checks what the gateway checks (rules.js) as
// the person types, and shows the gateway's own answer when it refuses anyway.

import { GraphQLFailure, gql, gqlPartial } from "../api.js";
import { h, replace } from "../dom.js";
import { errorBox } from "../errors.js";
import { definePage, navigate } from "../router.js";
import { Problem, checkSession, loadRules, splitWords } from "../rules.js";

const CHOICES = `query NewSessionChoices {
  images { name minResources { cpu memoryBytes gpu } maxResources { cpu memoryBytes gpu } }
  vfolders(first: 500, status: "ready") { edges { node { id name ownerKind permission } } }
  resourceGroups { name description allowedSessionTypes }
  projects { id name }
}`;
const CREATE = `mutation CreateSession($input: CreateSessionInput!) {
  createSession(input: $input) { commandId status code message sessionId }
}`;

function newCommandId() {
  return [...crypto.getRandomValues(new Uint8Array(16))].map((b) => b.toString(16).padStart(2, "0")).join("");
}

function field(name, label, input, hint = null) {
  return h(
    "div",
    { class: "field", dataset: { field: name } },
    h("label", { class: "label", for: input.id || null }, label),
    input,
    hint && h("span", { class: "hint" }, hint),
    h("span", { class: "field-problem", role: "status" }),
  );
}

function envOf(text) {
  return text.split("\n").map((l) => l.replace(/\r$/, "")).filter((l) => l.trim() !== "").map((line) => {
    const at = line.indexOf("=");
    return at < 0 ? { name: line.trim(), value: "" } : { name: line.slice(0, at).trim(), value: line.slice(at + 1) };
  });
}

definePage({
  path: "/sessions/new",
  title: "New session",
  async render({ root, scope, viewer }) {
    replace(root, h("h1", {}, "New session"), h("p", { class: "hint" }, "Loading images and folders…"));
    const [rules, choices] = await Promise.all([loadRules(), gqlPartial(CHOICES)]);
    if (scope.left) return;
    const { data } = choices;
    const images = data?.images ?? [];
    const folders = (data?.vfolders?.edges ?? []).map((e) => e.node).filter((f) => f.permission);
    const groups = data?.resourceGroups ?? [];
    const projects = (data?.projects ?? []).filter((p) => viewer.projects.includes(p.id));
    let commandId = newCommandId();
    let touched = false;

    const input = (name, attributes = {}) => h("input", { id: `f-${name}`, name, ...attributes });
    const image = input("image", { list: "image-choices", required: true, autocomplete: "off", spellcheck: "false", value: images[0]?.name ?? "" });
    const typeRadios = ["interactive", "batch"].map((t) => h("label", { class: "choice" },
      h("input", { type: "radio", name: "type", value: t, checked: t === "interactive" }), ` ${t}`));
    const command = input("command", { placeholder: "e.g. python train.py --epochs 10", spellcheck: "false", autocomplete: "off" });
    const words = h("span", { class: "hint mono", id: "command-words" });
    const name = input("name", { placeholder: "optional", autocomplete: "off", spellcheck: "false" });
    const cpu = input("cpu", { value: "1", inputmode: "decimal" });
    const memory = input("memory", { value: "1g" });
    const gpu = input("gpu", { value: "0", inputmode: "decimal" });
    const clusterSize = input("clusterSize", { type: "number", min: 1, max: rules.clusterSize.max, value: 1 });
    const clusterMode = h("select", { id: "f-clusterMode", name: "clusterMode" },
      h("option", { value: "single-node" }, "all kernels on one node"),
      h("option", { value: "multi-node" }, "kernels may spread over nodes"));
    const timeout = input("timeoutSeconds", { type: "number", min: 1, placeholder: "no limit" });
    const after = input("dependsOn", { placeholder: "session ids, optional", spellcheck: "false", autocomplete: "off" });
    const env = h("textarea", { id: "f-env", name: "env", rows: 3, placeholder: "NAME=value, one per line", spellcheck: "false" });
    const group = h("select", { id: "f-resourceGroup", name: "resourceGroup" },
      (groups.length ? groups : [{ name: "default", description: "" }]).map((g) => h("option", { value: g.name, selected: g.name === "default" }, g.description ? `${g.name} — ${g.description}` : g.name)));
    const project = h("select", { id: "f-project", name: "project" }, projects.map((p) => h("option", { value: p.name }, p.name)));
    const mountRows = folders.map((f) => {
      const readOnlyShare = f.permission === "ro";
      const row = {
        folder: f,
        use: h("input", { type: "checkbox", name: "mount", value: f.name, "aria-label": `mount ${f.name}` }),
        path: h("input", { class: "mount-path", placeholder: `${rules.mounts.root}/${f.name}`, spellcheck: "false", "aria-label": `mount path of ${f.name}` }),
        readOnly: h("input", { type: "checkbox", checked: readOnlyShare, disabled: readOnlyShare, "aria-label": `${f.name} read-only` }),
      };
      row.element = h("tr", {}, h("td", {}, h("label", {}, row.use, " ", f.name)), h("td", {}, f.ownerKind === "project" ? "project" : "yours"), h("td", {}, row.path), h("td", {}, h("label", {}, row.readOnly, " read-only")));
      return row;
    });

    const form = h("form", { class: "session-form", id: "new-session", novalidate: true });
    const problems = h("div", { class: "problems" });
    const submit = h("button", { type: "submit", class: "primary" }, "Start session");
    replace(
      form,
      h("fieldset", {}, h("legend", {}, "What to run"),
        field("image", "Image", image, images.length ? "A registered image, or any image your nodes have." : "No image is registered: type the name of an image your nodes have."),
        h("datalist", { id: "image-choices" }, images.map((i) => h("option", { value: i.name }))),
        h("div", { class: "field", dataset: { field: "type" } }, h("span", { class: "label" }, "Type"), h("div", { class: "choices" }, typeRadios),
          h("span", { class: "hint" }, "Interactive sessions run until stopped; batch sessions end with their command."), h("span", { class: "field-problem" })),
        field("command", "Command", command, words),
        field("name", "Name", name)),
      h("fieldset", {}, h("legend", {}, "Resources per kernel"),
        h("div", { class: "row" },
          field("cpu", "CPU cores", cpu, `at least ${rules.cpu.minMilli / 1000}`),
          field("memory", "Memory", memory, "e.g. 512m, 4g (at least 6m)"),
          field("gpu", "GPUs", gpu, "whole devices (2) or shares (0.25)")),
        h("div", { class: "row" },
          field("clusterSize", "Kernels", clusterSize, `1 to ${rules.clusterSize.max}, each with the resources above`),
          field("clusterMode", "Placement", clusterMode))),
      h("fieldset", {}, h("legend", {}, "Folders"),
        folders.length
          ? h("table", { class: "table compact mounts" }, h("thead", {}, h("tr", {}, ["Folder", "Owner", "Mount path", ""].map((t) => h("th", {}, t)))), h("tbody", {}, mountRows.map((r) => r.element)))
          : h("p", { class: "hint" }, "You have no folders yet. ", h("a", { href: "#/folders" }, "Create one"), " to keep data across sessions."),
        h("div", { class: "field field-only-problem", dataset: { field: "mounts" } }, h("span", { class: "field-problem" })),
        h("p", { class: "hint" }, "Folders whose name starts with a dot are mounted into every session.")),
      h("fieldset", {}, h("legend", {}, "More"),
        h("div", { class: "row" },
          projects.length > 1 ? field("project", "Project", project) : null,
          field("resourceGroup", "Resource group", group),
          field("timeoutSeconds", "Time limit (s)", timeout, "batch sessions only")),
        field("dependsOn", "Start after", after, "It waits until these sessions have ended with exit code 0 (and is cancelled if one does not)."),
        field("env", "Environment", env)),
      problems,
      h("div", { class: "actions" }, submit, h("a", { class: "button", href: "#/sessions" }, "Cancel")),
    );
    replace(root, h("h1", {}, "New session"), form);

    const read = () => {
      const type = form.querySelector("input[name=type]:checked")?.value ?? "interactive";
      let commandWords = [];
      let commandProblem = null;
      try {
        commandWords = splitWords(command.value);
      } catch (error) {
        if (!(error instanceof Problem)) throw error;
        commandProblem = error.message;
      }
      const size = clusterSize.value === "" ? null : Number(clusterSize.value);
      const value = {
        image: image.value.trim(),
        type,
        cpu: cpu.value,
        memory: memory.value,
        gpu: gpu.value,
        clusterSize: size,
        clusterMode: size > 1 ? clusterMode.value : null,
        command: commandWords.length ? commandWords : null,
        env: envOf(env.value),
        name: name.value.trim() || null,
        resourceGroup: group.value || null,
        project: projects.length > 1 ? project.value : null,
        dependsOn: after.value.trim() ? after.value.trim().split(/[\s,]+/) : null,
        timeoutSeconds: type !== "batch" || timeout.value === "" ? null : Number(timeout.value),
        mounts: mountRows.filter((r) => r.use.checked).map((r) => ({
          folder: r.folder.name,
          path: r.path.value.trim() || null,
          readOnly: r.readOnly.checked,
        })),
        clientCommandId: commandId,
      };
      return { value, commandProblem };
    };

    const check = () => {
      const { value, commandProblem } = read();
      const registered = images.find((i) => i.name === value.image) ?? null;
      const found = checkSession(value, rules, registered);
      if (commandProblem) found.push({ field: "command", message: commandProblem });
      words.textContent = value.command ? `runs: ${JSON.stringify(value.command)}` : "empty: the image's own command";
      timeout.disabled = value.type !== "batch";
      clusterMode.disabled = !(value.clusterSize > 1);
      for (const slot of form.querySelectorAll("[data-field]")) {
        const mine = found.filter((p) => p.field === slot.dataset.field);
        const text = slot.querySelector(".field-problem");
        if (text) text.textContent = touched ? mine.map((p) => p.message).join("; ") : "";
        slot.classList.toggle("has-problem", touched && mine.length > 0);
        if (slot.classList.contains("field-only-problem")) slot.hidden = !(touched && mine.length > 0);
      }
      return { value, found };
    };
    form.addEventListener("input", () => { touched = true; check(); });
    form.addEventListener("change", () => { touched = true; check(); });
    check();

    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      touched = true;
      const { value, found } = check();
      replace(problems);
      if (found.length) {
        replace(problems, errorBox({ message: "Fix the fields marked above; nothing was sent." }, "Not sent"));
        form.querySelector(".has-problem input, .has-problem select, .has-problem textarea")?.focus();
        return;
      }
      submit.disabled = true;
      submit.textContent = "Starting…";
      try {
        const { createSession } = await gql(CREATE, { input: value });
        navigate(`/sessions/${createSession.sessionId}`);
      } catch (error) {
        // Refused: that command id has its answer; the next try is a new command. A lost
        // answer keeps the id, so trying again cannot start a second session.
        if (error instanceof GraphQLFailure && error.code !== "unavailable") commandId = newCommandId();
        replace(problems, errorBox(error, "The gateway refused the session"));
      } finally {
        submit.disabled = false;
        submit.textContent = "Start session";
      }
    });
  },
});
