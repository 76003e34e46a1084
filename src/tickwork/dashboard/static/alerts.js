/* tickwork dashboard: the Alerts page (firing and resolved alerts with their deliveries) and
   the alert card on a job's page. Loaded before app.js, whose helpers (el, api, render,
   badge, fmt, enc) it uses when a page is shown. */
"use strict";

function deliveryText(d) {
  const tries = `${d.attempts} ${d.attempts === 1 ? "try" : "tries"}`;
  const error = d.last_error ? `: ${d.last_error}` : "";
  return `${d.event} via ${d.kind} #${d.channel}: ${d.state}, ${tries}${error}`;
}

function alertRows(items, withJob) {
  return items.map((a) => el("tr", { class: "alert-row" },
    withJob ? el("td", {}, el("a", { href: `#/jobs/${enc(a.job_id)}`, text: a.job_name })) : null,
    el("td", { text: a.condition.replaceAll("_", " ") }),
    el("td", {}, badge(a.state)),
    el("td", { text: a.detail }),
    el("td", { text: fmt(a.fired_at) }),
    el("td", { text: a.resolved_at ? fmt(a.resolved_at) : "—" }),
    el("td", {}, a.notified ? el("ul", { class: "deliveries" }, ...a.deliveries.map((d) => el("li", { class: `delivery ${d.state}`, text: deliveryText(d) })))
      : el("span", { class: "muted", text: "within the cooldown: not sent" }))));
}

function alertTable(items, withJob) {
  const heads = [...(withJob ? ["Job"] : []), "Condition", "State", "Detail", "Fired", "Resolved", "Deliveries"];
  return el("table", { class: "alerts" }, el("thead", {}, el("tr", {}, heads.map((t) => el("th", { text: t })))),
    el("tbody", {}, ...alertRows(items, withJob)));
}

async function alertsPage() {
  const state = new URLSearchParams(location.hash.split("?")[1] || "").get("state") || "";
  const page = await api("GET", `/api/v1/alerts?limit=100${state ? `&state=${enc(state)}` : ""}`);
  const filter = (label, value) => el("a", { href: value ? `#/alerts?state=${value}` : "#/alerts", class: value === state ? "active" : "", text: label });
  render(el("h1", { text: "Alerts" }),
    el("p", { class: "filters" }, filter("All", ""), " · ", filter("Firing", "firing"), " · ", filter("Resolved", "resolved")),
    el("div", { class: "card" }, page.items.length ? alertTable(page.items, true)
      : el("p", { class: "muted", text: "No alerts. Jobs set who is told in their alerts field (see docs/operations.md)." })));
}

async function jobAlertsCard(job) {
  const page = await api("GET", `/api/v1/alerts?job=${enc(job.id)}&limit=20`);
  const firing = page.items.filter((a) => a.state === "firing");
  const summary = firing.length ? `Firing: ${firing.map((a) => a.condition.replaceAll("_", " ")).join(", ")}`
    : job.alerts ? "No alert firing." : "This job has no alerts of its own (defaults in the settings may apply).";
  return el("div", { class: "card", id: "job-alerts" }, el("h2", { text: "Alerts" }),
    el("p", { class: firing.length ? "alert-firing" : "muted", text: summary }),
    page.items.length ? alertTable(page.items, false) : null);
}
