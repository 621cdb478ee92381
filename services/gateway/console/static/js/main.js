// The console's shell: the top bar (navigation, who is signed in, the live connection), the
// page outlet, and the rule that every page but sign-in needs a signed-in person.

import * as api from "./api.js";
import * as auth from "./auth.js";
import { h, replace } from "./dom.js";
import { errorBox } from "./errors.js";
import * as live from "./live.js";
import { navItemsFor } from "./nav.js";
import { Scope, navigate, resolve } from "./router.js";
import "./pages/index.js";

const HOME = "/sessions";
const nav = document.getElementById("nav");
const who = document.getElementById("who");
const outlet = document.getElementById("page");
let scope = new Scope();
let rendering = 0;

function drawNav(viewer, path) {
  if (viewer === null) {
    replace(nav);
    return;
  }
  const items = navItemsFor(viewer.role);
  const sections = [...new Set(items.map((i) => i.section))];
  replace(
    nav,
    sections.map((section) => h(
      "ul",
      { class: "nav-section", "aria-label": section },
      items.filter((i) => i.section === section).map((i) => h(
        "li",
        {},
        h("a", {
          href: i.href,
          "aria-current": path === i.match || path.startsWith(`${i.match}/`) ? "page" : null,
        }, i.label),
      )),
    )),
  );
}

function drawWho(viewer) {
  const credentials = auth.current();
  if (viewer === null || credentials === null) {
    replace(who);
    return;
  }
  const name = credentials.kind === "token" ? credentials.email : credentials.accessKey;
  replace(
    who,
    h("span", { class: "live-state", id: "live-state", title: "live updates" }),
    h("span", { class: "who-name", title: `user ${viewer.userId}` }, name),
    h("span", { class: "role" }, viewer.role),
    h("button", {
      type: "button",
      class: "link",
      id: "sign-out",
      onclick: () => auth.signOut(), // the listener below takes the page to sign-in
    }, "Sign out"),
  );
  showLive(live.currentState());
}

function showLive(state) {
  const dot = document.getElementById("live-state");
  if (!dot) return;
  dot.dataset.state = state;
  dot.textContent = { live: "live", connecting: "connecting…", offline: "" }[state] ?? "";
}

async function render() {
  scope.leave();
  scope = new Scope();
  const mine = scope;
  const turn = ++rendering;
  const found = resolve();
  if (found === null) {
    navigate(HOME);
    return;
  }
  const { page, params, query, path } = found;
  if (!page.isPublic && auth.current() === null) {
    navigate(`/sign-in?next=${encodeURIComponent(location.hash.replace(/^#/, ""))}`);
    return;
  }
  let viewer = null;
  if (auth.current() !== null) {
    try {
      viewer = await api.viewer();
    } catch (error) {
      if (turn !== rendering) return;
      if (auth.current() === null) {
        navigate("/sign-in");
        return;
      }
      drawNav(null, path);
      replace(outlet, errorBox(error, "The gateway could not say who you are"));
      return;
    }
  }
  if (turn !== rendering) return;
  drawNav(viewer, path);
  drawWho(viewer);
  document.title = `${page.title} · Jetyard`;
  const root = h("div", { class: "page", "data-page": page.path });
  replace(outlet, root);
  if (page.roles !== null && (viewer === null || !page.roles.includes(viewer.role))) {
    replace(root, h("h1", {}, page.title), h("p", {}, `This page is for ${page.roles.join(" and ")} roles.`));
    return;
  }
  try {
    await page.render({ root, params, query, scope: mine, viewer });
  } catch (error) {
    if (!mine.left) replace(root, h("h1", {}, page.title), errorBox(error, "This page could not be shown"));
  }
}

live.state.addEventListener("change", (event) => showLive(event.detail));
auth.changes.addEventListener("change", () => {
  if (auth.current() === null) {
    drawNav(null, "");
    drawWho(null);
    if (!resolve()?.page.isPublic) navigate("/sign-in");
  }
});
window.addEventListener("hashchange", render);
render();
