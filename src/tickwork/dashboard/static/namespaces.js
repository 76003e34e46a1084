/* tickwork dashboard: namespaces. The header shows the signed-in token's namespace; a token
   that sees every namespace gets a filter there (kept for this tab in sessionStorage and sent
   as ?namespace= with every API call but the session's and the namespace list's), and the
   Namespaces page lists each one's usage against its quotas, with a form to set them. Loaded
   before app.js, whose helpers (el, api, render, notice, enc) it uses when a page is shown. */
"use strict";

const NS_KEY = "tickwork.namespace";
let nsFixed = null; // the token's own namespace, or null when it sees every one

function nsChosen() {
  return nsFixed === null ? sessionStorage.getItem(NS_KEY) || "" : "";
}

// The path with ?namespace= added: every call but the session's and the namespaces list.
function nsPath(path) {
  const ns = nsChosen();
  if (!ns || path.startsWith("/api/v1/session") || path.startsWith("/api/v1/namespaces")) return path;
  return `${path}${path.includes("?") ? "&" : "?"}namespace=${encodeURIComponent(ns)}`;
}

async function nsHeader(me) {
  const holder = document.getElementById("ns");
  nsFixed = me.namespace || null;
  if (!me.authenticated) { holder.replaceChildren(); return; }
  if (nsFixed !== null) { holder.replaceChildren(el("span", { class: "muted", text: `namespace ${nsFixed}` })); return; }
  const list = await api("GET", "/api/v1/namespaces").catch(() => ({ items: [] }));
  const select = el("select", { id: "ns-filter", "aria-label": "Namespace" },
    el("option", { value: "", text: "all namespaces" }),
    ...list.items.map((n) => el("option", { value: n.name, text: n.name })));
  select.value = nsChosen();
  select.addEventListener("change", () => {
    if (select.value) sessionStorage.setItem(NS_KEY, select.value); else sessionStorage.removeItem(NS_KEY);
    route();
  });
  holder.replaceChildren(select);
}

const QUOTAS = [["max_jobs", "Jobs"], ["max_runs_per_hour", "Runs per hour"], ["max_payload_bytes", "Payload bytes"]];
const usedOf = (used, limit) => (limit === null ? `${used}` : `${used} / ${limit}`);

function quotaForm(n) {
  const inputs = QUOTAS.map(([key, label]) => [key, el("input", { type: "number", min: "0", name: key, value: n[key] ?? "", placeholder: "no limit", "aria-label": `${label} of ${n.name}` })]);
  const msg = el("span", { class: "muted" });
  return el("form", { class: "quota-form", onsubmit: async (event) => {
    event.preventDefault();
    const body = Object.fromEntries(inputs.map(([key, input]) => [key, input.value === "" ? null : Number(input.value)]));
    try { await api("PATCH", `/api/v1/namespaces/${enc(n.name)}`, body); msg.textContent = "saved"; await namespacesPage(); } catch (err) { msg.replaceChildren(notice(err.message)); }
  } }, ...inputs.map(([, input]) => input), el("button", { type: "submit", text: "Set" }), msg);
}

async function namespacesPage() {
  const list = await api("GET", "/api/v1/namespaces");
  const rows = list.items.map((n) => el("tr", {},
    el("td", { text: n.name }), el("td", { text: usedOf(n.jobs, n.max_jobs) }),
    el("td", { text: usedOf(n.runs_this_hour, n.max_runs_per_hour) }),
    el("td", { text: n.max_payload_bytes ?? "—" }),
    el("td", {}, nsFixed === null ? quotaForm(n) : el("span", { class: "muted", text: "set by an admin of every namespace" }))));
  render(el("h1", { text: "Namespaces" }),
    el("div", { class: "card" }, el("table", {},
      el("thead", {}, el("tr", {}, ["Namespace", "Jobs", "Runs this hour", "Max payload", "Quotas"].map((t) => el("th", { text: t })))),
      el("tbody", {}, ...rows))));
}
