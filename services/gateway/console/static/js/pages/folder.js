// One folder's files: browse directories, upload, download, make a directory, delete.

import { gql } from "../api.js";
import { bytes, h, replace, when } from "../dom.js";
import { errorBox } from "../errors.js";
import { definePage, navigate } from "../router.js";
import * as storage from "../storage.js";

const FOLDER = `query Folder($id: String!) {
  vfolder(id: $id) { id name status permission bytesUsed files quotaBytes ownerKind mountedBy }
}`;

const PERMISSIONS = { ro: "read", rw: "read and write", rwd: "read, write and delete" };
const join = (dir, name) => (dir ? `${dir}/${name}` : name);
const href = (id, path) => `#/folders/${id}${path ? `?path=${encodeURIComponent(path)}` : ""}`;

function crumbs(folder, path) {
  const parts = path ? path.split("/") : [];
  const links = [h("a", { href: "#/folders" }, "Folders"), " / ", h("a", { href: href(folder.id, "") }, folder.name)];
  parts.forEach((part, i) => links.push(" / ", h("a", { href: href(folder.id, parts.slice(0, i + 1).join("/")) }, part)));
  return h("div", { class: "crumbs" }, links);
}

definePage({
  path: "/folders/:id",
  title: "Folder",
  async render({ root, params, query, scope }) {
    const path = (query.get("path") ?? "").replace(/^\/+|\/+$/g, "");
    const { vfolder: folder } = await gql(FOLDER, { id: params.id });
    if (scope.left) return;
    if (folder === null) {
      replace(root, h("h1", {}, "No such folder"), h("p", {}, h("a", { href: "#/folders" }, "Back to folders")));
      return;
    }
    const canWrite = folder.permission === "rw" || folder.permission === "rwd";
    const canDelete = folder.permission === "rwd";
    const problems = h("div", { class: "problems" });
    const uploads = h("ul", { class: "plain uploads", id: "uploads" });
    const body = h("tbody");
    const reload = () => navigate(href(folder.id, path).slice(1));

    const fileInput = h("input", { type: "file", multiple: true, id: "upload-files", hidden: true });
    fileInput.addEventListener("change", async () => {
      for (const file of [...fileInput.files]) {
        const bar = h("progress", { max: file.size || 1, value: 0 });
        const line = h("li", { dataset: { upload: file.name } }, `${file.name} `, bar, h("span", { class: "hint" }, ` ${bytes(file.size)}`));
        uploads.append(line);
        try {
          await storage.upload(folder.id, join(path, file.name), file, (sent) => { bar.value = sent; });
          bar.value = file.size || 1;
          line.append(h("span", { class: "ok" }, " uploaded"));
        } catch (error) {
          line.append(errorBox(error, `${file.name} was not uploaded`));
        }
      }
      fileInput.value = "";
      if (!scope.left) await listInto(body);
    });

    const mkdir = async () => {
      const name = prompt("Name of the new directory");
      if (!name) return;
      try {
        await storage.makeDirectory(folder.id, join(path, name.trim()));
        await listInto(body);
      } catch (error) {
        replace(problems, errorBox(error, "The directory was not made"));
      }
    };

    const download = async (entryPath) => {
      try {
        const link = h("a", { href: await storage.downloadUrl(folder.id, entryPath), download: "", hidden: true });
        document.body.append(link);
        link.click();
        link.remove();
      } catch (error) {
        replace(problems, errorBox(error, "The download could not start"));
      }
    };

    const removeEntry = async (entry) => {
      if (!confirm(`Delete ${entry.name}${entry.type === "directory" ? " and everything in it" : ""}?`)) return;
      try {
        await storage.remove(folder.id, join(path, entry.name));
        await listInto(body);
      } catch (error) {
        replace(problems, errorBox(error, `${entry.name} was not deleted`));
      }
    };

    const listInto = async (tbody) => {
      replace(problems);
      try {
        const { entries, complete } = await storage.list(folder.id, path);
        if (scope.left) return;
        entries.sort((a, b) => (a.type === "directory") !== (b.type === "directory") ? (a.type === "directory" ? -1 : 1) : a.name.localeCompare(b.name));
        replace(tbody, entries.length === 0 ? h("tr", {}, h("td", { colspan: 4, class: "empty" }, "Empty.")) : entries.map((e) => h(
          "tr",
          { dataset: { entry: e.name } },
          h("td", {}, e.type === "directory" ? h("a", { href: href(folder.id, join(path, e.name)) }, `${e.name}/`) : e.name),
          h("td", {}, e.type === "directory" ? "" : bytes(e.size)),
          h("td", {}, e.mtime ? when(e.mtime) : ""),
          h("td", { class: "row-actions" },
            e.type !== "directory" && h("button", { type: "button", class: "link", onclick: () => download(join(path, e.name)) }, "Download"),
            canDelete && h("button", { type: "button", class: "link danger", onclick: () => removeEntry(e) }, "Delete")),
        )));
        if (!complete) tbody.append(h("tr", {}, h("td", { colspan: 4, class: "hint" }, "Only the first entries are shown.")));
      } catch (error) {
        replace(problems, errorBox(error, "The folder could not be listed"));
      }
    };

    replace(
      root,
      h("div", { class: "page-head" },
        h("div", {}, crumbs(folder, path), h("h1", {}, path ? path.split("/").pop() : folder.name)),
        h("div", { class: "actions" },
          canWrite && h("button", { type: "button", class: "primary", id: "upload", onclick: () => fileInput.click() }, "Upload files"),
          canWrite && h("button", { type: "button", id: "mkdir", onclick: mkdir }, "New directory"),
          h("button", { type: "button", onclick: reload }, "Refresh"),
          fileInput)),
      h("p", { class: "summary" }, `${bytes(folder.bytesUsed)} in ${folder.files} files`, folder.quotaBytes !== null ? ` (quota ${bytes(folder.quotaBytes)})` : "",
        ` · you may ${PERMISSIONS[folder.permission] ?? "not open it"}`, folder.mountedBy.length ? ` · mounted by ${folder.mountedBy.length} live session(s)` : ""),
      problems,
      uploads,
      h("table", { class: "table", id: "entries" }, h("thead", {}, h("tr", {}, ["Name", "Size", "Modified", ""].map((t) => h("th", {}, t)))), body),
    );
    await listInto(body);
  },
});
