// Operate › People, the changing half: add a person to a project by its name (with a password
// made here, shown once), add a person to another project, change a person's role or deactivate
// them, add a project, issue or revoke a keypair (a new secret shown once); for a superadmin,
// add a keypair policy and a resource group (for a project, by name). Each form sends admin
// mutations; the page then reads again.

import { gql } from "../api.js";
import { h, replace } from "../dom.js";
import { errorBox } from "../errors.js";

const CREATE_USER = `mutation CreateUser($email: String!, $password: String!, $domain: String!, $role: String!, $projects: [ID!]) {
  createUser(email: $email, password: $password, domain: $domain, role: $role, projects: $projects) { status message id }
}`;
const JOIN = `mutation Join($user: ID!, $project: ID!) {
  addUserToProject(userId: $user, projectId: $project) { status message }
}`;
const CREATE_PROJECT = `mutation CreateProject($domain: String!, $name: String!, $description: String!) {
  createProject(domain: $domain, name: $name, description: $description) { status message id }
}`;
const MODIFY_USER = "mutation Modify($id: ID!, $role: String) { modifyUser(id: $id, role: $role) { status message } }";
const DEACTIVATE_USER = "mutation Deactivate($id: ID!) { deactivateUser(id: $id, reason: \"from the console\") { status message } }";
const CREATE_POLICY = `mutation Policy($name: String!, $keypair: KeypairPolicyInput!) {
  createResourcePolicy(kind: "keypair", name: $name, keypair: $keypair) { status message }
}`;
const MODIFY_POLICY = `mutation ChangePolicy($name: String!, $keypair: KeypairPolicyInput!) {
  modifyResourcePolicy(kind: "keypair", name: $name, keypair: $keypair) { status message }
}`;
const MODIFY_GROUP = `mutation ChangeGroup($name: String!, $description: String, $wait: Boolean, $pids: Int) {
  modifyResourceGroup(name: $name, description: $description, waitForLargerNodes: $wait, pidsLimit: $pids) { status message }
}`;
const CREATE_GROUP = `mutation Group($name: String!, $description: String!) {
  createResourceGroup(name: $name, description: $description) { status message }
}`;
const ASSOCIATE = `mutation Associate($name: String!, $project: ID!) {
  associateResourceGroup(name: $name, scope: "project", scopeId: $project) { status message }
}`;
const ISSUE_KEYPAIR = "mutation Issue($user: ID!) { createKeypair(userId: $user) { accessKey secretKey outcome { status message } } }";

const ROLES = ["user", "admin", "monitor"];

/** 16 URL-safe characters from the browser's CSPRNG. */
export function newPassword() {
  const bytes = crypto.getRandomValues(new Uint8Array(12));
  return btoa(String.fromCharCode(...bytes)).replaceAll("+", "-").replaceAll("/", "_");
}

/** A box that shows a secret once: it is in no query, and is gone when dismissed or left. */
export function showOnce(box, title, pairs) {
  replace(box, h("div", { class: "notice", role: "status" },
    h("strong", {}, title),
    h("dl", { class: "op-secret" }, pairs.map(([label, value]) => [
      h("dt", {}, label), h("dd", { class: "mono", dataset: { secret: label } }, value)])),
    h("p", { class: "hint" }, "Shown this once: copy it now and hand it over. Jetyard keeps no readable copy."),
    h("button", { type: "button", id: "op-secret-done", onclick: () => replace(box) }, "Done")));
}

function select(id, options, chosen) {
  return h("select", { id, name: id }, options.map(([value, label]) => h("option", { value, selected: value === chosen }, label)));
}

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

/**
 * The forms, for the domains, projects and users the page read; `secretBox` shows one-time
 * secrets and `result` what a form did (both outlive a reload), `reload` reads the page again.
 */
export function peopleForms({ domains, projects, users, domain, role: myRole, secretBox, result, reload }) {
  const domainNames = domains.map((d) => d.name);
  const home = domain ?? (domainNames.includes("default") ? "default" : domainNames[0] ?? "default");
  const projectsOf = (name) => projects.filter((p) => p.domain === name && p.active);
  const projectPick = (id, where) => select(id, projectsOf(where).map((p) => [p.name, p.name]),
    projectsOf(where).some((p) => p.name === "default") ? "default" : null);

  const email = h("input", { type: "email", id: "op-new-email", placeholder: "ada@example.org", required: true, autocomplete: "off" });
  const userDomain = select("op-new-domain", domainNames.map((d) => [d, d]), home);
  let userProject = projectPick("op-new-project", home);
  userDomain.addEventListener("change", () => {
    const fresh = projectPick("op-new-project", userDomain.value);
    userProject.replaceWith(fresh);
    userProject = fresh;
  });
  const role = select("op-new-role", ROLES.map((r) => [r, r]), "user");
  const password = h("input", { type: "text", id: "op-new-password", placeholder: "blank: make one", autocomplete: "off" });
  const addUser = form("op-add-user", "Add a person", [
    h("label", { for: "op-new-email" }, "Email"), email,
    h("label", { for: "op-new-domain" }, "Domain"), userDomain,
    h("label", { for: "op-new-project" }, "Project"), userProject,
    h("label", { for: "op-new-role" }, "Role"), role,
    h("label", { for: "op-new-password" }, "Password"), password,
  ], "Add", async () => {
    const secret = password.value || newPassword();
    const project = userProject.value;
    const answer = await gql(CREATE_USER, {
      email: email.value.trim(), password: secret, domain: userDomain.value, role: role.value,
      projects: project ? [project] : [],
    });
    showOnce(secretBox, `${email.value.trim()} can sign in now (${answer.createUser.message})`, [
      ["email", email.value.trim()], ["password", secret], ["project", project || "none"]]);
    email.value = "";
    password.value = "";
    await reload();
  }, result);

  const who = select("op-join-user", users.filter((u) => u.active).map((u) => [u.id, u.email ?? u.id]), null);
  const joinProject = select("op-join-project", projects.filter((p) => p.active).map((p) => [p.id, `${p.name} (${p.domain})`]), null);
  const join = form("op-join", "Add to a project", [who, joinProject], "Add", async () => {
    const answer = await gql(JOIN, { user: who.value, project: joinProject.value });
    replace(result, h("p", { class: "ok", role: "status" }, answer.addUserToProject.message));
    await reload();
  }, result);

  const projectName = h("input", { type: "text", id: "op-project-name", placeholder: "name", required: true });
  const projectDomain = select("op-project-domain", domainNames.map((d) => [d, d]), home);
  const projectDescription = h("input", { type: "text", id: "op-project-description", placeholder: "description" });
  const addProject = form("op-add-project", "Add a project", [projectDomain, projectName, projectDescription], "Add", async () => {
    const answer = await gql(CREATE_PROJECT, { domain: projectDomain.value, name: projectName.value.trim(), description: projectDescription.value });
    replace(result, h("p", { class: "ok", role: "status" }, answer.createProject.message));
    projectName.value = "";
    await reload();
  }, result);

  const said = (message) => replace(result, h("p", { class: "ok", role: "status" }, message));
  const people = users.filter((u) => u.active).map((u) => [u.id, u.email ?? u.id]);
  const changed = select("op-change-user", people, null);
  const newRole = select("op-change-role", ROLES.map((r) => [r, r]), "user");
  const change = form("op-change", "Change a person", [changed, newRole,
    h("button", { type: "button", id: "op-deactivate", onclick: async () => {
      if (!confirm("Deactivate this person? They can no longer sign in or start sessions.")) return;
      try {
        said((await gql(DEACTIVATE_USER, { id: changed.value })).deactivateUser.message);
        await reload();
      } catch (error) {
        replace(result, errorBox(error, "Deactivate: refused"));
      }
    } }, "Deactivate")], "Set role", async () => {
    said((await gql(MODIFY_USER, { id: changed.value, role: newRole.value })).modifyUser.message);
    await reload();
  }, result);

  const forms = [addUser, join, change, addProject];
  if (myRole === "superadmin") forms.push(...clusterForms(projects, said, result, reload));
  return h("section", { class: "card", id: "op-people-forms" }, h("h2", {}, "Bring people in"), forms);
}

/** What only a superadmin makes and changes: keypair resource policies and resource groups. */
function clusterForms(projects, said, result, reload) {
  const policyName = h("input", { type: "text", id: "op-policy-name", placeholder: "name", required: true });
  const sessions = h("input", { type: "number", id: "op-policy-sessions", placeholder: "sessions at once", min: "1" });
  const cpu = h("input", { type: "text", id: "op-policy-cpu", placeholder: "CPU, e.g. 4" });
  const memory = h("input", { type: "text", id: "op-policy-memory", placeholder: "memory, e.g. 16g" });
  const gpu = h("input", { type: "text", id: "op-policy-gpu", placeholder: "GPU, e.g. 1" });
  const changePolicy = h("input", { type: "checkbox", id: "op-policy-change" });
  const changeLabel = h("label", { for: "op-policy-change" }, "replace the policy of this name (blank: no limit)");
  const addPolicy = form("op-add-policy", "Add or change a keypair policy", [policyName, sessions, cpu, memory, gpu, changePolicy, changeLabel], "Save", async () => {
    const slots = { cpu: cpu.value || null, memory: memory.value || null, gpu: gpu.value || null };
    const keypair = { totalResourceSlots: slots, maxConcurrentSessions: sessions.value ? Number(sessions.value) : null };
    const name = policyName.value.trim();
    said(changePolicy.checked
      ? (await gql(MODIFY_POLICY, { name, keypair })).modifyResourcePolicy.message
      : (await gql(CREATE_POLICY, { name, keypair })).createResourcePolicy.message);
    await reload();
  }, result);

  const groupName = h("input", { type: "text", id: "op-group-name", placeholder: "name", required: true });
  const groupDescription = h("input", { type: "text", id: "op-group-description", placeholder: "description" });
  const groupProject = select("op-group-project", [["", "(no project yet)"], ...projects.filter((p) => p.active).map((p) => [`${p.domain}/${p.name}`, `${p.name} (${p.domain})`])], "");
  const addGroup = form("op-add-group", "Add a resource group", [groupName, groupDescription, h("label", { for: "op-group-project" }, "for project"), groupProject], "Add", async () => {
    const name = groupName.value.trim();
    const made = (await gql(CREATE_GROUP, { name, description: groupDescription.value })).createResourceGroup.message;
    const joined = groupProject.value ? (await gql(ASSOCIATE, { name, project: groupProject.value })).associateResourceGroup.message : "";
    said([made, joined].filter(Boolean).join("; "));
    await reload();
  }, result);
  const changeName = h("input", { type: "text", id: "op-change-group-name", placeholder: "group name", required: true });
  const changeDescription = h("input", { type: "text", id: "op-change-group-description", placeholder: "new description (blank: as is)" });
  const pids = h("input", { type: "number", id: "op-change-group-pids", placeholder: "process limit per kernel", min: "16" });
  const wait = select("op-change-group-wait", [["", "too-large requests: as is"], ["false", "refuse too-large requests"], ["true", "let too-large requests wait"]], "");
  const changeGroup = form("op-change-group", "Change a resource group", [changeName, changeDescription, pids, wait], "Change", async () => {
    const asked = {
      name: changeName.value.trim(),
      description: changeDescription.value || null,
      pids: pids.value ? Number(pids.value) : null,
      wait: wait.value === "" ? null : wait.value === "true",
    };
    said((await gql(MODIFY_GROUP, asked)).modifyResourceGroup.message);
    await reload();
  }, result);
  return [addPolicy, addGroup, changeGroup];
}

/** The button in a user's row that issues them a keypair and shows its secret once. */
export function issueKeypairButton(user, secretBox, problems) {
  return h("button", {
    type: "button",
    class: "link op-issue-keypair",
    onclick: async () => {
      try {
        const { createKeypair: issued } = await gql(ISSUE_KEYPAIR, { user: user.id });
        showOnce(secretBox, `A keypair for ${user.email ?? user.id}`, [
          ["access key", issued.accessKey], ["secret key", issued.secretKey]]);
      } catch (error) {
        replace(problems, errorBox(error, "No keypair was issued"));
      }
    },
  }, "issue keypair");
}

/** The button beside a keypair that revokes it (its user can no longer sign with it). */
export function revokeKeypairButton(accessKey, after, problems) {
  return h("button", {
    type: "button",
    class: "link op-revoke-keypair",
    onclick: async () => {
      if (!confirm(`Revoke keypair ${accessKey}? Requests signed with it are refused from now on.`)) return;
      try {
        await gql("mutation Revoke($k: ID!) { deactivateKeypair(accessKey: $k, reason: \"revoked from the console\") { status } }", { k: accessKey });
        await after();
      } catch (error) {
        replace(problems, errorBox(error, "The keypair was not revoked"));
      }
    },
  }, "revoke");
}
