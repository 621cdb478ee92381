// "My folders": the virtual folders the person may see, and a new one.

import { gql } from "../api.js";
import { bytes, h, replace, timeEl } from "../dom.js";
import { errorBox } from "../errors.js";
import { addNavItem } from "../nav.js";
import { definePage, navigate } from "../router.js";
import { loadRules } from "../rules.js";

const FOLDERS = `query MyFolders {
  vfolders(first: 500) {
    totalCount
    edges { node { id name ownerKind status permission bytesUsed files quotaBytes createdAt usageMode } }
  }
}`;
const CREATE = `mutation CreateFolder($input: CreateVFolderInput!) {
  createVFolder(input: $input) { status message folder { id name } }
}`;

const PERMISSIONS = { ro: "read", rw: "read, write", rwd: "read, write, delete" };

function usage(folder) {
  const used = bytes(folder.bytesUsed);
  return folder.quotaBytes === null ? used : `${used} of ${bytes(folder.quotaBytes)}`;
}

definePage({
  path: "/folders",
  title: "My folders",
  async render({ root, scope }) {
    const [{ vfolders }, rules] = await Promise.all([gql(FOLDERS), loadRules()]);
    if (scope.left) return;
    const folders = vfolders.edges.map((e) => e.node);
    const problems = h("div", { class: "problems" });
    const nameInput = h("input", { name: "name", id: "new-folder-name", required: true, autocomplete: "off", spellcheck: "false", placeholder: "e.g. datasets" });
    const create = h("form", {
      class: "inline-form",
      id: "new-folder",
      onsubmit: async (event) => {
        event.preventDefault();
        replace(problems);
        const name = nameInput.value.trim();
        if (!new RegExp(rules.folderName.pattern).test(name) || name === "." || name === "..") {
          replace(problems, errorBox({ message: "A folder name is 1 to 64 of A-Z, a-z, 0-9, '.', '_' and '-'." }, "Not sent"));
          return;
        }
        try {
          const { createVFolder } = await gql(CREATE, { input: { name } });
          navigate(createVFolder.folder ? `/folders/${createVFolder.folder.id}` : "/folders");
        } catch (error) {
          replace(problems, errorBox(error, "The folder was not created"));
        }
      },
    }, h("label", { for: "new-folder-name" }, "New folder"), nameInput, h("button", { type: "submit", class: "primary" }, "Create"));
    replace(
      root,
      h("div", { class: "page-head" }, h("h1", {}, "My folders"), create),
      problems,
      h("p", { class: "hint" }, "Folders keep data across sessions: mount them when you start a session. Names starting with a dot are mounted into every session."),
      h("table", { class: "table", id: "folders" },
        h("thead", {}, h("tr", {}, ["Folder", "Owner", "You may", "Used", "Files", "Status", "Created"].map((t) => h("th", {}, t)))),
        h("tbody", {}, folders.length === 0
          ? h("tr", {}, h("td", { colspan: 7, class: "empty" }, "No folders yet."))
          : folders.map((f) => h("tr", { dataset: { folder: f.name } },
            h("td", {}, f.permission && f.status === "ready" ? h("a", { href: `#/folders/${f.id}` }, f.name) : f.name),
            h("td", {}, f.ownerKind === "project" ? "project" : "user"),
            h("td", {}, f.permission ? PERMISSIONS[f.permission] ?? f.permission : h("span", { class: "hint" }, "invited")),
            h("td", {}, usage(f)),
            h("td", {}, String(f.files)),
            h("td", {}, f.status),
            h("td", {}, timeEl(f.createdAt)))))),
    );
  },
});

addNavItem({ href: "#/folders", label: "Folders", order: 20 });
