// Operate › Images (superadmins): the registries images come from, and the images registered
// from them. A registry is added, changed (url, user, password) or removed here, and rescanned
// with its progress shown live (rescanProgress) while the mutation runs, then what the rescan
// found. Each image shows its registry, digest, size, pull policy (changed in place) and how
// many nodes hold it (nodeImages). A password is sent once and never shown again: the
// gateway answers only whether one is set. Nothing else is live: the page asks again after
// each change and on Refresh.

import { gql, gqlPartial } from "../api.js";
import { bytes, h, replace } from "../dom.js";
import { errorBox } from "../errors.js";
import * as live from "../live.js";
import { addNavItem } from "../nav.js";
import { progressBar } from "../progress.js";
import { definePage } from "../router.js";

const ADMINS = ["superadmin"];
// No service ports: a nested list counts fifty to an image in the gateway's cost limit.
const PAGE = `query Images {
  registries { id name url kind username hasSecret projects verifyTls hasCa removed }
  images(first: 1000) { name registry digest architecture sizeBytes pullPolicy }
  nodeImages { name nodes resourceGroups }
  projects(first: 1000) { id domain name }
}`;
const ADD = `mutation AddRegistry($name: String!, $url: String!, $username: String!, $password: String!,
  $projects: [String!], $verifyTls: Boolean!, $caPem: String!) {
  addRegistry(name: $name, url: $url, username: $username, password: $password, projects: $projects,
    verifyTls: $verifyTls, caPem: $caPem) { status message }
}`;
const MODIFY = `mutation ModifyRegistry($name: String!, $url: String, $username: String, $password: String) {
  modifyRegistry(name: $name, url: $url, username: $username, password: $password) { status message }
}`;
const REMOVE = `mutation RemoveRegistry($name: String!) {
  removeRegistry(name: $name, reason: "removed from the console") { status message }
}`;
const RESCAN = `mutation Rescan($name: String!, $repositories: [String!]) {
  rescanRegistry(name: $name, repositories: $repositories) { registry registered updated unchanged skipped { reference reason } }
}`;
const PROGRESS = `subscription RescanProgress($name: String!) {
  rescanProgress(name: $name) { repositoriesDone repositoriesTotal tagsDone tagsTotal }
}`;
const SET_POLICY = `mutation PullPolicy($name: String!, $policy: String) {
  setImagePullPolicy(name: $name, policy: $policy) { status message }
}`;
const POLICIES = [["", "the group's"], ["if-not-present", "if not present"], ["always", "always"], ["digest", "by digest"]];

const words = (text) => text.split(/[\s,]+/).filter(Boolean);

/** "sha256:0123456789ab" of a long digest (the whole one in the title). */
function shortDigest(digest) {
  if (!digest) return h("span", { class: "hint" }, "—");
  const [algorithm, hex = ""] = digest.split(":");
  return h("span", { class: "mono", title: digest }, `${algorithm}:${hex.slice(0, 12)}`);
}

function table(id, headings, rows, empty) {
  return h("table", { class: "table compact", id },
    h("thead", {}, h("tr", {}, headings.map((t) => h("th", {}, t)))),
    h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", { class: "empty", colspan: headings.length }, empty))));
}

/** The result of one form: its button is disabled while it runs, a refusal shown in `result`. */
function form(id, title, fields, submitLabel, act, result) {
  const element = h("form", { class: "inline-form", id, novalidate: true }, h("strong", {}, title), fields,
    h("button", { type: "submit", class: "primary" }, submitLabel));
  element.addEventListener("submit", async (event) => {
    event.preventDefault();
    const button = element.querySelector("button[type=submit]");
    button.disabled = true;
    replace(result);
    try {
      await act();
    } catch (error) {
      replace(result, errorBox(error, `${title}: refused`));
    } finally {
      button.disabled = false;
    }
  });
  return element;
}

function rescanBar(progress) {
  const { repositoriesDone: rd, repositoriesTotal: rt, tagsDone: td, tagsTotal: tt } = progress;
  const share = tt > 0 ? td / tt : rt > 0 ? rd / rt : 0;
  const text = rt === 0 ? "listing the repositories…" : `${rd} of ${rt} repositories · ${td} of ${tt} tags`;
  return progressBar(share, text, { id: "op-rescan-progress" });
}

function rescanResult(r) {
  const list = (refs) => h("ul", { class: "plain mono" }, refs.map((ref) => h("li", {}, ref)));
  return h("div", { class: "notice", id: "op-rescan-result", role: "status" },
    h("strong", {}, `Rescan of ${r.registry}: ${r.registered.length} registered, ${r.updated.length} updated, ${r.unchanged} unchanged, ${r.skipped.length} skipped`),
    r.registered.length > 0 && [h("h3", {}, "Registered"), list(r.registered)],
    r.updated.length > 0 && [h("h3", {}, "Updated"), list(r.updated)],
    r.skipped.length > 0 && [h("h3", {}, "Skipped"), table("op-rescan-skipped", ["Tag", "Why"],
      r.skipped.map((s) => h("tr", {}, h("td", { class: "mono" }, s.reference), h("td", {}, s.reason))), "")]);
}

definePage({
  path: "/operate/images",
  title: "Images and registries",
  roles: ADMINS,
  async render({ root, scope }) {
    const problems = h("div", { class: "problems" });
    const result = h("div", { id: "op-images-result" });
    const rescanBox = h("div", { id: "op-rescan" });
    const forms = h("div", {});
    const sections = h("div", { id: "op-images-page" });
    replace(root,
      h("div", { class: "page-head" }, h("h1", {}, "Images and registries"),
        h("div", { class: "actions" }, h("button", { type: "button", id: "op-images-refresh", onclick: () => load() }, "Refresh"))),
      h("p", { class: "hint" }, "Registries the nodes pull images from, and the images a rescan found in them. A password or token is sealed when it is sent and never shown again."),
      problems, result, rescanBox, forms, sections);
    const said = (message) => replace(result, h("p", { class: "ok", role: "status" }, message));
    let rescanning = false;

    const rescan = async (name, repositories = null) => {
      if (rescanning) return;
      rescanning = true;
      for (const b of root.querySelectorAll(".op-rescan-button")) b.disabled = true;
      replace(result);
      replace(rescanBox, h("div", { class: "card" }, h("strong", {}, `Rescanning ${name}…`), rescanBar({ repositoriesDone: 0, repositoriesTotal: 0, tagsDone: 0, tagsTotal: 0 })));
      const bar = () => rescanBox.querySelector("#op-rescan-progress");
      const stop = live.subscribe(PROGRESS, { name }, {
        next: (data) => bar()?.replaceWith(rescanBar(data.rescanProgress)),
        error: () => {}, // the mutation's answer says what happened; progress is a courtesy
      });
      scope.onLeave(stop);
      try {
        const { rescanRegistry } = await gql(RESCAN, { name, repositories });
        if (scope.left) return;
        replace(rescanBox, rescanResult(rescanRegistry));
        await load();
      } catch (error) {
        if (!scope.left) replace(rescanBox, errorBox(error, `Rescan of ${name}: refused`));
      } finally {
        stop();
        rescanning = false;
        for (const b of root.querySelectorAll(".op-rescan-button")) b.disabled = false;
      }
    };

    const remove = async (name) => {
      if (!confirm(`Remove registry ${name}? No rescan or pull uses it again; its images stay registered.`)) return;
      try {
        said((await gql(REMOVE, { name })).removeRegistry.message);
        await load();
      } catch (error) {
        replace(result, errorBox(error, `Remove ${name}: refused`));
      }
    };

    const setPolicy = async (name, select) => {
      select.disabled = true;
      try {
        said((await gql(SET_POLICY, { name, policy: select.value || null })).setImagePullPolicy.message);
        await load();
      } catch (error) {
        replace(result, errorBox(error, `Pull policy of ${name}: refused`));
        select.disabled = false;
      }
    };

    const registryRows = (registries, projectNames) => registries.map((r) => h("tr", { dataset: { registry: r.name }, class: r.removed ? "ended" : null },
      h("td", {}, r.name, h("div", { class: "sub" }, r.kind)),
      h("td", { class: "mono" }, r.url, !r.verifyTls && h("div", { class: "sub" }, "TLS not verified"), r.hasCa && h("div", { class: "sub" }, "own CA")),
      h("td", {}, r.username || h("span", { class: "hint" }, "anonymous")),
      h("td", { class: "op-secret-state" }, r.hasSecret ? "set" : h("span", { class: "hint" }, "none")),
      h("td", {}, r.projects.length ? r.projects.map((p) => projectNames.get(p) ?? p).join(", ") : h("span", { class: "hint" }, "every project")),
      h("td", {}, r.removed ? h("span", { class: "tag" }, "removed") : "active"),
      h("td", { class: "op-registry-actions" }, !r.removed && h("div", { class: "row-actions" },
        h("button", { type: "button", class: "op-rescan-button", disabled: rescanning, onclick: () => rescan(r.name) }, "Rescan"),
        h("button", { type: "button", class: "link danger op-remove-registry", onclick: () => remove(r.name) }, "remove")))));

    const imageRows = (images, held) => images.map((i) => {
      const policy = h("select", { class: "op-pull-policy", "aria-label": `pull policy of ${i.name}` },
        POLICIES.map(([value, label]) => h("option", { value, selected: value === (i.pullPolicy ?? "") }, label)));
      policy.addEventListener("change", () => setPolicy(i.name, policy));
      const nodes = held.get(i.name);
      return h("tr", { dataset: { image: i.name } },
        h("td", { class: "mono op-image-name" }, i.name),
        h("td", {}, i.registry ?? h("span", { class: "hint" }, "by hand")),
        h("td", {}, shortDigest(i.digest)),
        h("td", {}, i.architecture || h("span", { class: "hint" }, "—")),
        h("td", { class: "num" }, i.sizeBytes ? bytes(i.sizeBytes) : h("span", { class: "hint" }, "—")),
        h("td", {}, policy),
        h("td", { class: "num op-image-nodes" }, nodes ? h("span", { title: `groups: ${nodes.resourceGroups.join(", ")}` }, `${nodes.nodes}`) : h("span", { class: "hint" }, "0")));
    });

    const load = async () => {
      const { data, errors } = await gqlPartial(PAGE);
      if (scope.left) return;
      replace(problems, errors.length > 0 && errorBox({ errors }, "Part of this page could not be read"));
      const registries = data?.registries ?? [];
      const images = data?.images ?? [];
      const held = new Map((data?.nodeImages ?? []).map((n) => [n.name, n]));
      const projectNames = new Map((data?.projects ?? []).map((p) => [p.id, `${p.domain}/${p.name}`]));
      replace(forms, registryForms(registries.filter((r) => !r.removed), { said, result, reload: load, rescan }));
      replace(sections,
        h("section", { class: "card" }, h("h2", {}, `Registries (${registries.length})`),
          table("op-registries", ["Registry", "URL", "User", "Password", "Projects", "State", ""], registryRows(registries, projectNames), "No registry yet: add one above.")),
        h("section", { class: "card" }, h("h2", {}, `Images (${images.length})`),
          table("op-images", ["Image", "Registry", "Digest", "Architecture", "Size", "Pull policy", "Nodes"], imageRows(images, held), "No image yet: rescan a registry.")));
    };
    await load();
  },
});

/** Add a registry; change one's url, user or password; rescan some of its repositories. */
function registryForms(registries, { said, result, reload, rescan }) {
  const input = (id, attributes = {}) => h("input", { type: "text", id, name: id, autocomplete: "off", spellcheck: "false", ...attributes });
  const name = input("op-registry-name", { placeholder: "name", required: true });
  const url = input("op-registry-url", { placeholder: "https://host[:port]", required: true });
  const username = input("op-registry-username", { placeholder: "user (optional)", title: "blank: anonymous" });
  const password = input("op-registry-password", { type: "password", placeholder: "password or token", autocomplete: "new-password" });
  const projects = input("op-registry-projects", { placeholder: "projects (blank: all)", title: "DOMAIN/NAME or project ids, separated by spaces or commas; blank: every project" });
  const verify = h("input", { type: "checkbox", id: "op-registry-verify", checked: true });
  const ca = h("textarea", { id: "op-registry-ca", rows: 1, placeholder: "CA PEM (optional)", title: "a CA certificate of the lab's own, PEM", spellcheck: "false" });
  const add = form("op-add-registry", "Add a registry", [name, url, username, password, projects,
    h("label", { class: "choice" }, verify, " verify TLS"), ca], "Add", async () => {
    const answer = await gql(ADD, {
      name: name.value.trim(), url: url.value.trim(), username: username.value.trim(), password: password.value,
      projects: words(projects.value), verifyTls: verify.checked, caPem: ca.value.trim(),
    });
    password.value = ""; // sent once: the page keeps no copy
    said(answer.addRegistry.message);
    for (const field of [name, url, username, projects, ca]) field.value = "";
    await reload();
  }, result);

  const pick = h("select", { id: "op-change-registry-name" }, registries.map((r) => h("option", { value: r.name }, r.name)));
  const newUrl = input("op-change-registry-url", { placeholder: "url" });
  const newUser = input("op-change-registry-username", { placeholder: "user" });
  const newPassword = input("op-change-registry-password", { type: "password", placeholder: "new password", title: "blank: the password stays as it is", autocomplete: "new-password" });
  const clear = h("input", { type: "checkbox", id: "op-change-registry-clear" });
  const fill = () => {
    const chosen = registries.find((r) => r.name === pick.value);
    newUrl.value = chosen?.url ?? "";
    newUser.value = chosen?.username ?? "";
  };
  pick.addEventListener("change", fill);
  fill();
  const change = form("op-change-registry", "Change a registry", [pick, newUrl, newUser, newPassword,
    h("label", { class: "choice" }, clear, " no password")], "Change", async () => {
    const chosen = registries.find((r) => r.name === pick.value);
    const asked = {
      name: pick.value,
      url: newUrl.value.trim() === chosen?.url ? null : newUrl.value.trim(),
      username: newUser.value.trim() === chosen?.username ? null : newUser.value.trim(),
      password: clear.checked ? "" : newPassword.value || null, // "" removes it; null keeps it
    };
    newPassword.value = "";
    clear.checked = false;
    said((await gql(MODIFY, asked)).modifyRegistry.message);
    await reload();
  }, result);

  const scanPick = h("select", { id: "op-rescan-name" }, registries.map((r) => h("option", { value: r.name }, r.name)));
  const repositories = input("op-rescan-repositories", { placeholder: "repositories (blank: all)" });
  const scan = form("op-rescan-form", "Rescan", [scanPick, repositories], "Rescan", async () => {
    const only = words(repositories.value);
    await rescan(scanPick.value, only.length ? only : null);
  }, result);
  scan.querySelector("button[type=submit]").classList.add("op-rescan-button");

  return h("section", { class: "card", id: "op-registry-forms" }, h("h2", {}, "Registries"),
    add, registries.length > 0 && [change, scan]);
}

addNavItem({ href: "#/operate/images", label: "Images", section: "Operate", roles: ADMINS, order: 60 });
