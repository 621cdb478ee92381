// The hash router: every page registers itself with definePage(); the shell renders the one
// the address names. A page's render() gets a scope that ends when the page is left, so a
// subscription or a timer it started is stopped with it (scope.onLeave).

const pages = [];

/**
 * Register a page. path: "/sessions/:id" (":name" segments become params).
 * public: shown without signing in (only the sign-in page). roles: who may open it (null:
 * everyone signed in). render({root, params, query, scope, viewer}) fills root.
 */
export function definePage({ path, title, render, public: isPublic = false, roles = null }) {
  const names = [];
  const pattern = new RegExp(
    `^${path.replace(/:([a-zA-Z]+)/g, (_, name) => { names.push(name); return "([^/]+)"; })}$`,
  );
  pages.push({ path, title, render, isPublic, roles, pattern, names });
}

export function navigate(path) {
  if (location.hash === `#${path}`) window.dispatchEvent(new HashChangeEvent("hashchange"));
  else location.hash = path;
}

/** The page and its params for the current address (or null). */
export function resolve(hash = location.hash) {
  const [path, search = ""] = (hash.replace(/^#/, "") || "/").split("?");
  for (const page of pages) {
    const match = page.pattern.exec(path);
    if (match) {
      const params = Object.fromEntries(page.names.map((n, i) => [n, decodeURIComponent(match[i + 1])]));
      return { page, params, query: new URLSearchParams(search), path };
    }
  }
  return null;
}

export class Scope {
  constructor() {
    this.left = false;
    this.cleanups = [];
  }

  /** Run fn when the page is left (stop a subscription, a timer, a socket). */
  onLeave(fn) {
    if (this.left) fn();
    else this.cleanups.push(fn);
  }

  leave() {
    this.left = true;
    for (const fn of this.cleanups.splice(0).reverse()) {
      try {
        fn();
      } catch (error) {
        console.error("leaving a page:", error);
      }
    }
  }
}
