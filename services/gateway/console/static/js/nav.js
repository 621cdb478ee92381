// The navigation bar's entries. A page file adds its own with addNavItem(); the shell shows
// those the signed-in role may use, grouped by section ("Research", then "Operate").

const items = [];
export const SECTIONS = ["Research", "Operate"];

/**
 * href: "#/sessions"; match: the path prefix that marks it current (default: href's path);
 * roles: null for everyone signed in, or a list such as ["superadmin", "admin"].
 */
export function addNavItem({ href, label, section = "Research", roles = null, order = 100, match }) {
  items.push({ href, label, section, roles, order, match: match ?? href.replace(/^#/, "") });
}

export function navItemsFor(role) {
  return items
    .filter((item) => item.roles === null || item.roles.includes(role))
    .sort((a, b) => SECTIONS.indexOf(a.section) - SECTIONS.indexOf(b.section) || a.order - b.order);
}
