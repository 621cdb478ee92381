// Operate › People: the users, projects, keypairs, resource policies and resource groups the
// signed-in operator may read (the admin queries), narrowed by domain and by text; admins also
// add people, projects and keypairs here (op/people-forms.js). There is no subscription for
// tenancy objects: the page asks when it opens, on "Refresh" and after each change.

import { gql, gqlPartial } from "../api.js";
import { bytes, h, limitText, limitsWords, replace } from "../dom.js";
import { errorBox } from "../errors.js";
import { addNavItem } from "../nav.js";
import { OPERATORS } from "../op/format.js";
import { issueKeypairButton, peopleForms, revokeKeypairButton } from "../op/people-forms.js";
import { definePage } from "../router.js";

const LIMITS = "{ cpu memoryBytes gpu }";
const PEOPLE = `query People($domain: String) {
  domains(first: 500) { name description active }
  users(domain: $domain, first: 500) { id email role domain projects policy defaultAccessKey active }
}`;
const PROJECTS = `query Projects($domain: String) {
  projects(domain: $domain, first: 500) { id domain name description policy active totalResourceSlots ${LIMITS} }
}`;
const POLICIES = `query Policies {
  resourcePolicies(first: 200) {
    id kind name
    keypair { totalResourceSlots ${LIMITS} maxConcurrentSessions maxPendingSessions maxContainersPerSession maxSessionLifetimeS idleTimeoutS maxPriority }
    storage { maxVfolderCount maxQuotaScopeSizeBytes }
  }
  resourceGroups(first: 100) { name queuePolicy agentSelection headOfLine fragmentationGuard deviceFill preemption active }
}`;
const KEYPAIRS = "query Keypairs($user: ID!) { keypairs(userId: $user, first: 100) { accessKey policy rateLimit isDefault active } }";

const yesNo = (active) => (active ? "active" : h("span", { class: "tag" }, "inactive"));

function table(id, headings, rows) {
  return h("table", { class: "table compact", id },
    h("thead", {}, h("tr", {}, headings.map((t) => h("th", {}, t)))), h("tbody", {}, rows));
}

function userRows(users, projectNames, admin) {
  return users.map((u) => {
    const show = async () => {
      replace(list, "…");
      try {
        const { keypairs } = await gql(KEYPAIRS, { user: u.id });
        replace(list, keypairs.length === 0 ? h("span", { class: "hint" }, "none") : h("ul", { class: "plain" }, keypairs.map((k) => h("li", {},
          h("span", { class: "mono" }, k.accessKey), ` · ${k.policy}`, k.isDefault && h("span", { class: "tag" }, "default"),
          !k.active && h("span", { class: "tag" }, "inactive"), k.rateLimit && ` · ${k.rateLimit}/min`,
          admin && k.active && [" · ", revokeKeypairButton(k.accessKey, show, admin.problems)]))));
      } catch (error) {
        replace(list, errorBox(error, "No keypairs"));
      }
    };
    const list = h("span", {}, h("button", { type: "button", class: "link", onclick: show }, "show keypairs"));
    const keys = h("td", { class: "op-keys" }, list);
    return h("tr", { dataset: { user: u.id } },
      h("td", {}, u.email ?? h("span", { class: "hint" }, "(hidden)"), h("div", { class: "sub mono" }, u.id)),
      h("td", {}, u.role), h("td", {}, u.domain),
      h("td", {}, u.projects.map((p) => projectNames.get(p) ?? p).join(", ")),
      h("td", {}, u.policy), h("td", {}, yesNo(u.active)), keys,
      admin && h("td", { class: "op-user-actions" }, u.active && issueKeypairButton(u, admin.secretBox, admin.problems)));
  });
}

definePage({
  path: "/operate/people",
  title: "People and policies",
  roles: OPERATORS,
  async render({ root, scope, query, viewer }) {
    const domain = query.get("domain") || null;
    const search = h("input", { type: "search", placeholder: "filter rows (text)", id: "op-people-search", spellcheck: "false" });
    const domainPick = h("select", { id: "op-people-domain", onchange: () => { location.hash = `#/operate/people${domainPick.value ? `?domain=${encodeURIComponent(domainPick.value)}` : ""}`; } });
    const problems = h("div", { class: "problems" });
    const sections = h("div", { id: "op-people" });
    const isAdmin = viewer?.role === "admin" || viewer?.role === "superadmin";
    const secretBox = h("div", { id: "op-secret" });
    const result = h("div", { id: "op-people-result" });
    const forms = h("div", {});
    replace(root,
      h("div", { class: "page-head" }, h("h1", {}, "People and policies"),
        h("div", { class: "actions" }, h("button", { type: "button", id: "op-people-refresh", onclick: () => load() }, "Refresh"))),
      h("p", { class: "hint" }, "What your role may read. Nothing here is live: the gateway has no subscription for these, so the page asks again on Refresh."),
      h("div", { class: "inline-form op-people-filters" }, h("label", {}, "Domain"), domainPick, search),
      problems, secretBox, forms, result, sections);
    const filter = () => {
      const text = search.value.trim().toLowerCase();
      for (const row of sections.querySelectorAll("tbody tr")) row.hidden = text !== "" && !row.textContent.toLowerCase().includes(text);
    };
    search.addEventListener("input", filter);

    const load = async () => {
      const [people, projects, policies] = await Promise.all([
        gqlPartial(PEOPLE, { domain }), gqlPartial(PROJECTS, { domain }), gqlPartial(POLICIES),
      ]);
      if (scope.left) return;
      const errors = [...people.errors, ...projects.errors, ...policies.errors];
      replace(problems, errors.length > 0 && errorBox({ errors }, "Part of this page could not be read"));
      const domains = people.data?.domains ?? [];
      replace(domainPick, h("option", { value: "" }, "every domain you may read"),
        domains.map((d) => h("option", { value: d.name, selected: d.name === domain }, d.name)));
      const projectList = projects.data?.projects ?? [];
      const projectNames = new Map(projectList.map((p) => [p.id, `${p.name}`]));
      const users = people.data?.users ?? [];
      const policyList = policies.data?.resourcePolicies ?? [];
      const groups = policies.data?.resourceGroups ?? [];
      const admin = isAdmin ? { secretBox, problems } : null;
      replace(forms, isAdmin && peopleForms({ domains, projects: projectList, users, domain, role: viewer.role, secretBox, result, reload: load }));
      replace(sections,
        h("section", { class: "card" }, h("h2", {}, `Users (${users.length})`),
          table("op-users", ["User", "Role", "Domain", "Projects", "Policy", "State", "Keypairs", admin && "Change"].filter(Boolean), userRows(users, projectNames, admin))),
        h("section", { class: "card" }, h("h2", {}, `Projects (${projectList.length})`),
          table("op-projects", ["Project", "Domain", "Policy", "Limit", "State"], projectList.map((p) => h("tr", { dataset: { project: p.id } },
            h("td", {}, p.name, h("div", { class: "sub" }, p.description)), h("td", {}, p.domain), h("td", {}, p.policy),
            h("td", {}, limitsWords(p.totalResourceSlots)), h("td", {}, yesNo(p.active)))))),
        h("section", { class: "card" }, h("h2", {}, `Resource policies (${policyList.length})`),
          table("op-policies", ["Policy", "Kind", "Limits"], policyList.map((p) => h("tr", { dataset: { policy: p.id } },
            h("td", {}, p.name), h("td", {}, p.kind),
            h("td", {}, p.keypair
              ? `resources: ${limitsWords(p.keypair.totalResourceSlots)} · sessions at once: ${limitText(p.keypair.maxConcurrentSessions)} · waiting: ${limitText(p.keypair.maxPendingSessions)} · kernels a session: ${p.keypair.maxContainersPerSession} · lifetime: ${limitText(p.keypair.maxSessionLifetimeS, " s")} · idle timeout: ${limitText(p.keypair.idleTimeoutS, " s")} · priority up to ${p.keypair.maxPriority}`
              : p.storage ? `folders: ${limitText(p.storage.maxVfolderCount)} · size: ${p.storage.maxQuotaScopeSizeBytes ? bytes(p.storage.maxQuotaScopeSizeBytes) : "no limit"}` : ""))))),
        h("section", { class: "card" }, h("h2", {}, `Resource groups (${groups.length})`),
          table("op-groups", ["Group", "Queue", "Placement", "Head of line", "Fragmentation guard", "Shares", "Preemption", "State"], groups.map((g) => h("tr", { dataset: { group: g.name } },
            h("td", {}, g.name), h("td", {}, g.queuePolicy), h("td", {}, g.agentSelection), h("td", {}, g.headOfLine),
            h("td", {}, g.fragmentationGuard ? "on" : "off"), h("td", {}, g.deviceFill), h("td", {}, g.preemption ? "on" : "off"), h("td", {}, yesNo(g.active)))))));
      filter();
    };
    await load();
  },
});

addNavItem({ href: "#/operate/people", label: "People", section: "Operate", roles: OPERATORS, order: 50 });
