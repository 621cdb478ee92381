// "My quota and usage": what each of the person's scopes holds now, what its waiting sessions
// ask for and what it may hold (myQuota: held, waiting and limit, three numbers never mixed),
// the limits of their keypair's policy, and the usage table when the gateway has one.

import { gqlPartial } from "../api.js";
import { bytes, h, limitText, limitsWords, replace } from "../dom.js";
import { errorBox } from "../errors.js";
import { addNavItem } from "../nav.js";
import { definePage } from "../router.js";
import { showUsage } from "../usage.js";

const QUOTA = `query MyQuota {
  myQuota {
    scope scopeId name sessions maxSessions pending maxPending holding waiting
    slots { slot used held waiting limit }
  }
  keypairs { accessKey policy isDefault active rateLimit }
  resourcePolicies {
    kind name
    keypair {
      totalResourceSlots { cpu memoryBytes gpu } maxConcurrentSessions maxPendingSessions
      maxContainersPerSession maxSessionLifetimeS idleTimeoutS idleUtilizationThresholdPct maxPriority
    }
    storage { maxVfolderCount maxQuotaScopeSizeBytes }
  }
}`;

const SCOPES = { keypair: "Keypair", user: "You", project: "Project", domain: "Domain" };

function amount(slot, value) {
  if (value === "unlimited") return "unlimited";
  return slot === "memory" ? bytes(value) : value;
}

// The meter shows what is held against the limit; what waits is said apart, never added in.
function meter(slot) {
  const limited = slot.limit !== "unlimited" && Number(slot.limit) > 0;
  const share = limited ? Math.min(1, Number(slot.held) / Number(slot.limit)) : 0;
  const waits = Number(slot.waiting) > 0 ? `, ${amount(slot.slot, slot.waiting)} waiting` : "";
  return h("div", { class: "meter-line", dataset: { slot: slot.slot } },
    h("span", { class: "meter-label" }, slot.slot),
    limited ? h("meter", { min: 0, max: 1, value: share, high: 0.85, optimum: 0 }) : h("span", { class: "meter-none" }),
    h("span", { class: "held" }, `${amount(slot.slot, slot.held)} held${waits} · limit ${amount(slot.slot, slot.limit)}`));
}

function policyCard(policy, keypair) {
  const k = policy.keypair;
  const rows = [
    ["Resources in use at once", limitsWords(k.totalResourceSlots)],
    ["Sessions at once", limitText(k.maxConcurrentSessions)],
    ["Sessions waiting", limitText(k.maxPendingSessions)],
    ["Kernels per session", String(k.maxContainersPerSession)],
    ["Session lifetime", limitText(k.maxSessionLifetimeS, " s")],
    ["Idle timeout", limitText(k.idleTimeoutS, " s")],
    ["Highest priority", String(k.maxPriority)],
    ["Requests a minute", limitText(keypair.rateLimit)],
  ];
  return h("section", { class: "card" },
    h("h2", {}, `Keypair ${keypair.accessKey}`, keypair.isDefault ? h("span", { class: "tag" }, "default") : null, keypair.active ? null : h("span", { class: "tag" }, "inactive")),
    h("p", { class: "hint" }, `Policy ${policy.name}`),
    h("dl", { class: "details" }, rows.map(([a, b]) => [h("dt", {}, a), h("dd", {}, b)])));
}

definePage({
  path: "/quota",
  title: "Quota and usage",
  async render({ root, scope }) {
    const { data, errors } = await gqlPartial(QUOTA);
    if (scope.left) return;
    const quotas = data?.myQuota ?? [];
    const policies = data?.resourcePolicies ?? [];
    const usageBox = h("div", { id: "usage" });
    replace(
      root,
      h("h1", {}, "Quota and usage"),
      errors.length > 0 && errorBox({ errors }, "Part of this page could not be read"),
      h("section", { class: "card" }, h("h2", {}, "What you may hold and hold now"),
        h("table", { class: "table", id: "quota" },
          h("thead", {}, h("tr", {}, ["Scope", "Sessions running", "Sessions waiting", "Resources held · waiting · limit"].map((t) => h("th", {}, t)))),
          h("tbody", {}, quotas.map((q) => h("tr", { dataset: { scope: q.scope } },
            h("td", {}, h("strong", {}, SCOPES[q.scope] ?? q.scope), q.name ? h("div", { class: "sub" }, q.name) : null),
            h("td", {}, `${q.holding} (${q.sessions} admitted of ${limitText(q.maxSessions)})`),
            h("td", {}, `${q.waiting} (${q.pending} for admission of ${limitText(q.maxPending)})`),
            h("td", { class: "meters" }, q.slots.map(meter))))))),
      h("div", { class: "columns" }, (data?.keypairs ?? []).map((keypair) => {
        const policy = policies.find((p) => p.kind === "keypair" && p.name === keypair.policy && p.keypair);
        return policy ? policyCard(policy, keypair) : null;
      })),
      h("section", { class: "card" }, h("h2", {}, "Usage"), usageBox),
    );
    try {
      await showUsage(usageBox);
    } catch (error) {
      if (!scope.left) replace(usageBox, errorBox(error, "Usage could not be read"));
    }
  },
});

addNavItem({ href: "#/quota", label: "Quota", order: 30 });
