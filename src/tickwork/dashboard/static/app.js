/* tickwork dashboard: plain JavaScript over the REST API (/api/v1). No innerHTML with data:
   every user-supplied string goes through textContent. State-changing requests carry the
   X-CSRF-Token header (double submit of the tw_csrf cookie). */
"use strict";

const TZ = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
// Where the app is mounted: the page is <root>/dashboard/, so the API is <root>/api/v1/. Paths
// below are written from the root ("/api/v1/jobs") and fetched relative to it, so the dashboard
// works at / and under a prefix (an app mounted at /scheduler in a larger one).
const ROOT = new URL("..", location.href).pathname;
const view = document.getElementById("view");
let timers = [];

// -- helpers ----------------------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = tag === "svg" || attrs?.svg ? document.createElementNS("http://www.w3.org/2000/svg", tag) : document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "svg" || value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "text") node.textContent = String(value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}
const svg = (tag, attrs, ...children) => el(tag, { ...attrs, svg: true }, ...children);

function cookie(name) {
  for (const part of document.cookie.split(";")) {
    const [key, ...rest] = part.trim().split("=");
    if (key === name) return decodeURIComponent(rest.join("="));
  }
  return "";
}

class ApiError extends Error {
  constructor(status, problem) {
    super(problem?.detail || `HTTP ${status}`);
    this.status = status;
    this.problem = problem || {};
  }
}

async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  if (method !== "GET") headers["X-CSRF-Token"] = cookie("tw_csrf");
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(ROOT + path.replace(/^\//, ""), {
    method, headers, credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (response.status === 204) return null;
  const data = await response.json().catch(() => null);
  if (!response.ok) {
    if (response.status === 401 && !path.startsWith("/api/v1/session")) showLogin();
    throw new ApiError(response.status, data);
  }
  return data;
}

const enc = encodeURIComponent;
function fmt(iso) {
  if (!iso) return "—";
  return new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium", timeZone: TZ }).format(new Date(iso));
}
function ago(iso) {
  if (!iso) return "";
  const s = Math.round((Date.now() - new Date(iso).getTime()) / 1000);
  const abs = Math.abs(s);
  const text = abs < 90 ? `${abs}s` : abs < 5400 ? `${Math.round(abs / 60)}m` : `${Math.round(abs / 3600)}h`;
  return s >= 0 ? `${text} ago` : `in ${text}`;
}
const badge = (text) => el("span", { class: `badge ${text}`, text });
// 3600 -> "1h", 90 -> "1m30s", 86400 + 7200 -> "1d2h", 1.5 -> "1.5s"
function duration(seconds) {
  let rest = Number(seconds);
  if (!Number.isFinite(rest)) return String(seconds);
  if (rest === 0) return "0s";
  let text = "";
  for (const [size, unit] of [[86400, "d"], [3600, "h"], [60, "m"]]) {
    const n = Math.floor(rest / size);
    if (n) { text += `${n}${unit}`; rest -= n * size; }
  }
  rest = Math.round(rest * 1e6) / 1e6;
  return rest ? `${text}${rest}s` : text;
}
function scheduleText(s) {
  const zone = s.timezone && s.timezone !== "UTC" ? ` (${s.timezone})` : "";
  const cals = [s.exclude?.length ? `, except ${s.exclude.join(", ")}` : "", s.only?.length ? `, only ${s.only.join(", ")}` : ""].join("");
  if (s.cron) return `cron ${s.cron}${zone}${cals}`;
  if (s.every !== undefined) return `every ${duration(s.every)}${s.offset ? ` (offset ${duration(s.offset)})` : ""}${cals}`;
  if (s.at) return `once at ${fmt(s.at)}${cals}`;
  if (s.weekly || s.monthly) return `${s.weekly ? "weekly" : "monthly"} ${JSON.stringify(s.weekly || s.monthly)}${zone}${cals}`;
  return "";
}
// A previewed fire time: one a calendar drops is struck through, with the reason.
function fireItem(f) {
  if (!f.excluded_by) return el("li", { text: fmt(f.at) });
  return el("li", { class: "excluded", title: f.reason }, el("s", { text: fmt(f.at) }), el("span", { class: "muted", text: ` ${f.reason}` }));
}
// A paused job has no next run, whatever its stored next_run_at says.
function nextRunText(paused, next) {
  if (paused) return "paused";
  return next ? `${fmt(next)} (${ago(next)})` : "—";
}
function notice(text, ok) { return el("div", { class: ok ? "notice ok" : "notice", role: "status", text }); }
function every(ms, fn) { timers.push(setInterval(fn, ms)); }
function render(...nodes) { view.replaceChildren(...nodes); }

// -- sign in ----------------------------------------------------------------------------------

function showLogin() {
  timers.forEach(clearInterval); timers = [];
  const input = el("input", { type: "password", name: "token", id: "token", placeholder: "tw_…", autocomplete: "off", required: true });
  const error = el("div", { class: "error" });
  const form = el("form", { class: "card login", onsubmit: async (e) => {
    e.preventDefault();
    try {
      await api("POST", "/api/v1/session", { token: input.value.trim() });
      await whoami();
      route();
    } catch (err) { error.textContent = err.message; }
  } },
  el("h2", { text: "Sign in" }),
  el("p", { class: "muted", text: "Paste an API token (create one with: tickwork tokens create --name me --scope write). It is kept in an HttpOnly cookie for this browser session." }),
  el("div", { class: "field" }, el("label", { for: "token", text: "API token" }), input), error,
  el("button", { class: "primary", type: "submit", text: "Sign in" }));
  render(form);
  input.focus();
}

async function whoami() {
  const me = await api("GET", "/api/v1/session");
  const who = document.getElementById("who");
  const out = document.getElementById("signout");
  who.textContent = me.open ? "open access (no token)" : me.authenticated ? `${me.token_name} (${me.scope})` : "";
  out.hidden = !(me.authenticated && !me.open);
  return me;
}

// -- overview ---------------------------------------------------------------------------------

function plot(points, value, kind, unit) {
  const w = 560, h = 160, left = 44, bottom = 18, top = 8;
  const values = points.map(value);
  const max = Math.max(1e-9, ...values.filter((v) => v !== null));
  const x = (i) => left + (i * (w - left - 4)) / Math.max(1, points.length);
  const y = (v) => top + (h - top - bottom) * (1 - v / max);
  const g = svg("svg", { class: "plot", viewBox: `0 0 ${w} ${h}`, preserveAspectRatio: "none", role: "img" });
  g.append(svg("line", { class: "axis", x1: left, y1: h - bottom, x2: w, y2: h - bottom }));
  g.append(svg("text", { x: 2, y: top + 8, text: `${+max.toPrecision(3)}${unit}` }));
  g.append(svg("text", { x: 2, y: h - bottom, text: `0${unit}` }));
  g.append(svg("text", { x: left, y: h - 4, text: "−60 min" }));
  g.append(svg("text", { x: w - 30, y: h - 4, text: "now" }));
  if (kind === "bar") {
    const bw = Math.max(1, (w - left - 4) / Math.max(1, points.length) - 1);
    values.forEach((v, i) => { if (v) g.append(svg("rect", { class: "bar", x: x(i), y: y(v), width: bw, height: h - bottom - y(v) }, svg("title", { text: `${v}${unit}` }))); });
  } else {
    const d = values.map((v, i) => (v === null ? null : `${x(i)},${y(v)}`)).filter(Boolean);
    if (d.length) g.append(svg("polyline", { class: "line", points: d.join(" ") }));
    values.forEach((v, i) => { if (v !== null) g.append(svg("circle", { class: "dot", cx: x(i), cy: y(v), r: 2.5 }, svg("title", { text: `${v.toFixed(3)}${unit}` }))); });
  }
  return g;
}

async function overview() {
  const counts = el("div", { class: "counts" });
  const charts = el("div", { class: "grid" });
  const queues = el("tbody");
  const retention = el("div");
  retentionCard().then((card) => retention.replaceChildren(card)).catch(() => {});
  render(el("h1", { text: "Overview" }),
    el("div", { class: "card" }, el("h2", { text: "Runs by state" }), counts),
    charts,
    el("div", { class: "card" }, el("h2", { text: "Queues" }), el("table", {},
      el("thead", {}, el("tr", {}, ["Queue", "State", "Due now", "Waiting", "Running", "Limits", ""].map((t) => el("th", { text: t })))), queues)),
    retention);
  async function refresh() {
    const [stats, qs] = await Promise.all([api("GET", "/api/v1/stats"), api("GET", "/api/v1/queues")]);
    const states = ["scheduled", "running", "retrying", "succeeded", "dead", "crashed", "missed", "skipped_overlap", "cancelled"];
    counts.replaceChildren(
      el("div", { class: "count" }, el("div", { class: "n", text: stats.jobs }), el("div", { class: "l", text: `jobs (${stats.jobs_paused} paused)` })),
      ...states.map((s) => el("a", { class: "count", href: `#/runs/${s}` }, el("div", { class: "n", text: stats.occurrences_by_state[s] || 0 }), el("div", { class: "l" }, badge(s)))));
    const pts = stats.per_minute;
    charts.replaceChildren(
      el("div", { class: "card" }, el("h2", { text: "Throughput: attempts finished per minute" }), plot(pts, (p) => p.finished, "bar", "")),
      el("div", { class: "card" }, el("h2", { text: "Start lateness per minute (average, seconds)" }), plot(pts, (p) => p.lateness_avg_seconds, "line", "s")));
    queues.replaceChildren(...qs.items.map((q) => el("tr", {},
      el("td", { text: q.name }), el("td", {}, badge(q.paused ? "paused" : "active")),
      el("td", { text: q.due }), el("td", { text: q.waiting }), el("td", { text: q.running }),
      el("td", {}, el("a", { href: "#/limits", text: limitText(q) })),
      el("td", {}, el("button", { type: "button", text: q.paused ? "Resume" : "Pause", onclick: async (e) => {
        e.target.disabled = true;
        try { await api("POST", `/api/v1/queues/${enc(q.name)}/${q.paused ? "resume" : "pause"}`); } catch (err) { alert(err.message); }
        refresh();
      } })))));
    if (!qs.items.length) queues.append(el("tr", {}, el("td", { colspan: 7, class: "muted", text: "No queues yet." })));
  }
  await refresh();
  every(5000, () => refresh().catch(() => {}));
}

// -- jobs list --------------------------------------------------------------------------------

async function jobsList() {
  const name = el("input", { type: "search", placeholder: "Search names", "aria-label": "Search names" });
  const tag = el("input", { type: "text", placeholder: "Tag", "aria-label": "Tag", size: 10 });
  const kind = el("select", { "aria-label": "Kind" }, el("option", { value: "", text: "Any kind" }), ["http", "python", "shell", "slack", "email", "publish"].map((k) => el("option", { value: k, text: k })));
  const state = el("select", { "aria-label": "State" }, el("option", { value: "", text: "Active and paused" }), el("option", { value: "false", text: "Active" }), el("option", { value: "true", text: "Paused" }));
  const rows = el("tbody");
  const more = el("button", { type: "button", text: "More", hidden: true });
  let cursor = null;
  async function load(append) {
    const q = new URLSearchParams({ limit: "50" });
    if (name.value.trim()) q.set("name", name.value.trim());
    if (tag.value.trim()) q.set("tag", tag.value.trim());
    if (kind.value) q.set("kind", kind.value);
    if (state.value) q.set("paused", state.value);
    if (append && cursor) q.set("cursor", cursor);
    const page = await api("GET", `/api/v1/jobs?${q}`);
    const items = page.items.map((j) => el("tr", { class: "clickable", onclick: () => { location.hash = `#/jobs/${enc(j.id)}`; } },
      el("td", {}, el("a", { href: `#/jobs/${enc(j.id)}`, text: j.name })), el("td", { text: j.kind }),
      el("td", { text: scheduleText(j.schedule) }), el("td", { text: j.queue }),
      el("td", { class: "next-run", title: j.paused ? "" : j.next_run_at || "", text: nextRunText(j.paused, j.next_run_at) }),
      el("td", {}, badge(j.paused ? "paused" : "active")), el("td", { class: "muted", text: j.tags.join(", ") })));
    if (append) rows.append(...items); else rows.replaceChildren(...items);
    if (!rows.children.length) rows.append(el("tr", {}, el("td", { colspan: 7, class: "muted", text: "No jobs match." })));
    cursor = page.next_cursor;
    more.hidden = !cursor;
  }
  let pending;
  const reload = () => { clearTimeout(pending); pending = setTimeout(() => load(false).catch(() => {}), 200); };
  for (const input of [name, tag]) input.addEventListener("input", reload);
  for (const input of [kind, state]) input.addEventListener("change", reload);
  more.addEventListener("click", () => load(true));
  render(el("h1", {}, "Jobs", el("a", { href: "#/new" }, el("button", { class: "primary", type: "button", text: "New job" }))),
    el("div", { class: "toolbar" }, name, tag, kind, state),
    el("div", { class: "card" }, el("table", { id: "jobs" }, el("thead", {}, el("tr", {}, ["Name", "Kind", "Schedule", "Queue", "Next run", "State", "Tags"].map((t) => el("th", { text: t })))), rows), more));
  await load(false);
}

// -- job page ---------------------------------------------------------------------------------

async function jobPage(ref) {
  const job = await api("GET", `/api/v1/jobs/${enc(ref)}`);
  const msg = el("div");
  const status = el("dl", { class: "kv" });
  const times = el("ol", { class: "times" });
  const description = el("p", { class: "muted" });
  const rows = el("tbody", { id: "runs" });
  const history = el("tbody");
  const action = (label, path, cls) => el("button", { type: "button", class: cls, text: label, onclick: async (e) => {
    e.target.disabled = true;
    try {
      await api("POST", `/api/v1/jobs/${enc(job.id)}/${path}`);
      msg.replaceChildren(notice(`${label}: done`, true));
      if (path !== "trigger") return jobPage(job.id);
      refresh();
    } catch (err) { msg.replaceChildren(notice(err.message)); } finally { e.target.disabled = false; }
  } });
  const remove = el("button", { type: "button", class: "danger", text: "Delete", onclick: async () => {
    if (!confirm(`Delete job ${job.name}? Its history stays.`)) return;
    try { await api("DELETE", `/api/v1/jobs/${enc(job.id)}`); location.hash = "#/jobs"; } catch (err) { msg.replaceChildren(notice(err.message)); }
  } });
  render(
    el("h1", {}, el("span", { id: "job-name", text: job.name }), badge(job.paused ? "paused" : "active"),
      job.paused ? action("Resume", "resume") : action("Pause", "pause"), action("Trigger now", "trigger", "primary"),
      el("a", { href: `#/jobs/${enc(job.id)}/edit` }, el("button", { type: "button", text: "Edit" })), remove),
    msg,
    el("div", { class: "grid" },
      el("div", { class: "card" }, el("h2", { text: "Definition" }), el("dl", { class: "kv" },
        [["Kind", job.kind], ["Schedule", scheduleText(job.schedule)], ["Queue", `${job.queue} (priority ${job.priority})`],
        ["Retries", `${job.retry.max_attempts} attempts, backoff ${job.retry.backoff_base_seconds}s…${job.retry.backoff_max_seconds}s`],
        ["Timeout", `${job.timeout_seconds}s`], ["Overlap", job.overlap], ["Tags", job.tags.join(", ") || "—"],
        ["Created", `${fmt(job.created_at)} by ${job.created_by || "—"}`], ["Changed", `${fmt(job.updated_at)} by ${job.updated_by || "—"}`]].map(([k, v]) => [el("dt", { text: k }), el("dd", { text: v })])),
        el("pre", { text: JSON.stringify(job.payload, null, 2) })),
      el("div", { class: "card" }, el("h2", { text: "Status" }), status),
      el("div", { class: "card" }, el("h2", { text: `Next fire times (${TZ})` }), description, times)),
    el("div", { class: "card" }, el("h2", { text: "Run history" }), el("table", {},
      el("thead", {}, el("tr", {}, ["Scheduled", "State", "Attempt", "Trigger", "Worker", "Finished", "Last error", ""].map((t) => el("th", { text: t })))), rows)),
    el("div", { class: "card" }, el("h2", { text: "History" }), el("table", { id: "job-history" },
      el("thead", {}, el("tr", {}, ["When", "Who", "What", "Details"].map((t) => el("th", { text: t })))), history)));
  view.append(await jobAlertsCard(job));
  view.append(backfillCard(job, () => refresh()));
  const preview = await api("GET", `/api/v1/jobs/${enc(job.id)}/preview?count=5`);
  description.textContent = preview.description;
  if (job.paused) times.replaceChildren(el("li", { class: "muted", text: "Paused: nothing fires until it is resumed." }));
  else times.replaceChildren(...(preview.fires || preview.times.map((at) => ({ at }))).map(fireItem));
  if (!times.children.length) times.append(el("li", { class: "muted", text: "No more fire times." }));
  const open = new Set();
  async function refresh() {
    const [st, runs] = await Promise.all([api("GET", `/api/v1/jobs/${enc(job.id)}/status`), api("GET", `/api/v1/runs?job=${enc(job.id)}&limit=25`)]);
    const pct = st.success_rate === null ? "—" : `${Math.round(st.success_rate * 100)}% of the last ${st.finished}`;
    const secs = (v) => (v === null ? "—" : `${v.toFixed(3)}s`);
    status.replaceChildren(...[["Last run", st.last_run ? `${fmt(st.last_run.scheduled_at)} — ${st.last_run.state}` : "never"],
      ["Next run", nextRunText(job.paused, st.next_run_at)], ["Success rate", pct],
      ["Start lateness", `avg ${secs(st.lateness_avg_seconds)}, p95 ${secs(st.lateness_p95_seconds)}`],
      ["Waiting / running", `${st.waiting} / ${st.running}`]].map(([k, v]) => [el("dt", { text: k }), el("dd", { text: v })]).flat());
    rows.replaceChildren(...runs.items.flatMap((r) => {
      const key = r.scheduled_at;
      const row = el("tr", { class: "clickable run", "data-state": r.state, onclick: () => { if (open.has(key)) open.delete(key); else open.add(key); refresh(); } },
        el("td", {}, el("a", { href: runHref(job.id, r.scheduled_at), onclick: (e) => e.stopPropagation(), text: fmt(r.scheduled_at) })),
        el("td", {}, badge(r.state)), el("td", { text: `${r.attempt}/${r.max_attempts}` }),
        el("td", { text: r.trigger }), el("td", { text: r.worker || "" }), el("td", { text: r.finished_at ? fmt(r.finished_at) : "" }),
        el("td", { class: "muted", text: r.last_error || "" }), el("td", {}, runControl(r, msg, refresh)));
      if (!open.has(key)) return [row];
      const cell = el("td", { colspan: 8 }, el("span", { class: "muted", text: "Loading attempts…" }));
      api("GET", `/api/v1/jobs/${enc(job.id)}/runs/${enc(key)}`).then((d) => cell.replaceChildren(...(d.attempts.length ? d.attempts.map(attemptView) : [el("span", { class: "muted", text: "No attempts yet." })])));
      return [row, el("tr", { class: "attempts" }, cell)];
    }));
    if (!runs.items.length) rows.append(el("tr", {}, el("td", { colspan: 8, class: "muted", text: "No runs yet." })));
    const audit = await api("GET", `/api/v1/jobs/${enc(job.id)}/audit?limit=500`);
    history.replaceChildren(...audit.items.slice(-50).reverse().map((e) => el("tr", { class: "audit", "data-action": e.action },
      el("td", { text: fmt(e.at) }), el("td", { text: e.actor || "—" }),
      el("td", { text: e.scheduled_at ? `${e.action} run ${fmt(e.scheduled_at)}` : e.action }),
      el("td", { class: "muted", text: auditDetails(e) }))));
  }
  await refresh();
  every(3000, () => refresh().catch(() => {}));
}

function auditDetails(e) {
  if (!e.details) return "";
  if (e.action === "update") return Object.entries(e.details).map(([k, v]) => `${k}: ${JSON.stringify(v.before)} → ${JSON.stringify(v.after)}`).join("; ");
  return Object.entries(e.details).map(([k, v]) => `${k}: ${typeof v === "string" ? v : JSON.stringify(v)}`).join(", ");
}

function attemptView(a) {
  return el("div", { class: "attempt" },
    el("div", {}, el("strong", { text: `Attempt ${a.number} ` }), a.outcome ? badge(a.outcome) : badge("running"),
      el("span", { class: "muted", text: ` on ${a.worker}, started ${fmt(a.started_at || a.claimed_at)}${a.duration_seconds !== null ? `, took ${a.duration_seconds.toFixed(3)}s` : ""}` })),
    a.output ? [el("div", { class: "muted", text: "Output" }), el("pre", { class: "output", text: a.output })] : null,
    a.error ? [el("div", { class: "muted", text: "Error" }), el("pre", { class: "error-text", text: a.error })] : null);
}

// -- create and edit --------------------------------------------------------------------------

const PAYLOADS = {
  http: { url: "https://example.org/hook", method: "POST", body: { hello: "world" } },
  python: { callable: "tickwork.cli.demo:tick", args: ["hello"] },
  shell: { command: ["/bin/echo", "hello"] },
  publish: { broker: "events", exchange: "jobs", routing_key: "billing.run", body: { hello: "world" } },
};

async function jobForm(ref) {
  const job = ref ? await api("GET", `/api/v1/jobs/${enc(ref)}`) : null;
  const s = job?.schedule || { cron: "*/5 * * * *", timezone: TZ };
  const type = s.weekly || s.monthly ? "json" : s.at ? "at" : s.every !== undefined ? "every" : "cron";
  const f = {};
  const input = (key, attrs) => (f[key] = el("input", { id: `f-${key}`, name: key, ...attrs }));
  const field = (key, label, control) => el("div", { class: "field" }, el("label", { for: `f-${key}`, text: label }), control, el("div", { class: "error", id: `e-${key}` }));
  const localAt = s.at ? new Date(new Date(s.at).getTime() - new Date(s.at).getTimezoneOffset() * 60000).toISOString().slice(0, 16) : "";
  f.type = el("select", { id: "f-type", name: "type" }, ["cron", "every", "at", "json"].map((t) => el("option", { value: t, text: { cron: "Cron expression", every: "Fixed interval", at: "Once, at a time", json: "Weekly or monthly rule (JSON)" }[t], selected: t === type })));
  f.rule = el("textarea", { id: "f-rule", name: "rule", spellcheck: "false", rows: 4 });
  f.rule.value = JSON.stringify(s.weekly ? { weekly: s.weekly } : s.monthly ? { monthly: s.monthly } : { monthly: { business_day: 1, at: "09:00" } }, null, 2);
  f.kind = el("select", { id: "f-kind", name: "kind" }, ["http", "python", "shell", "publish"].map((k) => el("option", { value: k, text: k, selected: (job?.kind || "http") === k })));
  f.overlap = el("select", { id: "f-overlap", name: "overlap" }, ["skip", "buffer_one", "buffer_all", "cancel_previous", "allow_all"].map((o) => el("option", { value: o, text: o, selected: (job?.overlap || "skip") === o })));
  f.payload = el("textarea", { id: "f-payload", name: "payload", spellcheck: "false" });
  f.payload.value = JSON.stringify(job?.payload || PAYLOADS.http, null, 2);
  const whenInput = {
    cron: input("cron", { value: s.cron || "*/5 * * * *", placeholder: "*/5 * * * *" }),
    every: input("every", { value: s.every !== undefined ? duration(s.every) : "10s", placeholder: "10s, 15m, 1h30m" }),
    at: input("at", { type: "datetime-local", step: 1, value: localAt }),
  };
  input("timezone", { value: s.timezone || TZ, list: "zones" });
  const zones = el("datalist", { id: "zones" }, [...new Set([TZ, "UTC", ...(Intl.supportedValuesOf ? Intl.supportedValuesOf("timeZone") : [])])].map((z) => el("option", { value: z })));
  const fields = {
    cron: field("cron", "Cron (5 fields, 6 with seconds first, 7 with a year last)", whenInput.cron),
    every: field("every", "Every", whenInput.every),
    at: field("at", `At (your time zone: ${TZ})`, whenInput.at),
    timezone: field("timezone", "Time zone", f.timezone),
    rule: field("rule", "Rule: {\"weekly\": {...}} or {\"monthly\": {...}} (docs/schedules.md)", f.rule),
    exclude: field("exclude", "Exclude calendars (comma-separated names)", input("exclude", { value: (s.exclude || []).join(", "), placeholder: "holidays" })),
  };
  const describe = el("p", { class: "muted", id: "preview-description" });
  const times = el("ol", { class: "times", id: "preview-times" });
  const formError = el("div");
  function baseSchedule() {
    const t = f.type.value;
    if (t === "cron") return { cron: f.cron.value.trim(), timezone: f.timezone.value.trim() || "UTC" };
    if (t === "every") return { every: /^\d+(\.\d+)?$/.test(f.every.value.trim()) ? Number(f.every.value) : f.every.value.trim() };
    if (t === "json") {
      let rule = {};
      try { rule = JSON.parse(f.rule.value); } catch { rule = {}; }
      return { ...rule, timezone: f.timezone.value.trim() || "UTC" };
    }
    return { at: f.at.value ? new Date(f.at.value).toISOString() : "" };
  }
  function schedule() {
    const s = baseSchedule();
    const names = f.exclude.value.split(",").map((n) => n.trim()).filter(Boolean);
    if (names.length) { s.exclude = names; if (!s.timezone) s.timezone = "UTC"; }
    return s;
  }
  function showType() {
    for (const k of ["cron", "every", "at"]) fields[k].hidden = f.type.value !== k;
    fields.rule.hidden = f.type.value !== "json";
    fields.timezone.hidden = f.type.value !== "cron" && f.type.value !== "json";
  }
  let pending, seq = 0;
  function preview() {
    clearTimeout(pending);
    pending = setTimeout(async () => {
      const mine = ++seq;
      document.querySelectorAll(".error").forEach((e) => { if (e.id.startsWith("e-")) e.textContent = ""; });
      try {
        const p = await api("POST", "/api/v1/preview", { schedule: schedule(), count: 5 });
        if (mine !== seq) return;
        describe.textContent = p.description;
        times.replaceChildren(...p.fires.map((x) => (x.excluded_by ? fireItem(x) : el("li", {}, fmt(x.at), el("span", { class: "muted", text: `  (${x.at})` })))));
        if (!p.times.length) times.append(el("li", { class: "muted", text: "No fire times." }));
      } catch (err) {
        if (mine !== seq) return;
        describe.textContent = "";
        times.replaceChildren();
        showErrors(err);
      }
    }, 250);
  }
  function showErrors(err) {
    const errors = err.problem?.errors || [];
    if (!errors.length) { formError.replaceChildren(notice(err.message)); return; }
    for (const e of errors) {
      const key = e.field.replace(/^schedule\./, "").split(/[.[]/)[0] || "";
      const slot = document.getElementById(`e-${["weekly", "monthly"].includes(key) ? "rule" : key}`) || document.getElementById(`e-${e.field.split(".")[0]}`);
      if (slot) slot.textContent = e.message; else formError.replaceChildren(notice(`${e.field ? `${e.field}: ` : ""}${e.message}`));
    }
  }
  f.kind.addEventListener("change", () => { f.payload.value = JSON.stringify(PAYLOADS[f.kind.value], null, 2); });
  f.type.addEventListener("change", () => { showType(); preview(); });
  for (const k of ["cron", "every", "at", "timezone", "rule", "exclude"]) f[k].addEventListener("input", preview);
  input("name", { value: job?.name || "", required: true, maxlength: 200, autocomplete: "off" });
  input("queue", { value: job?.queue || "default" });
  input("priority", { type: "number", value: job?.priority ?? 0, min: -1000, max: 1000 });
  input("max_attempts", { type: "number", value: job?.retry.max_attempts ?? 3, min: 1, max: 100 });
  input("timeout_seconds", { type: "number", value: job?.timeout_seconds ?? 30, min: 1, step: "any" });
  input("tags", { value: (job?.tags || []).join(", "), placeholder: "reports, team:finance" });
  const submit = el("button", { class: "primary", type: "submit", text: job ? "Save changes" : "Create job" });
  const form = el("form", { class: "job", novalidate: true, onsubmit: async (e) => {
    e.preventDefault();
    formError.replaceChildren();
    document.querySelectorAll(".error").forEach((x) => { x.textContent = ""; });
    let payload;
    try { payload = JSON.parse(f.payload.value); } catch (err) { document.getElementById("e-payload").textContent = `not valid JSON: ${err.message}`; return; }
    const doc = {
      name: f.name.value, kind: f.kind.value, schedule: schedule(), payload, queue: f.queue.value.trim(),
      priority: Number(f.priority.value), overlap: f.overlap.value, timeout_seconds: Number(f.timeout_seconds.value),
      retry: { ...(job?.retry || {}), max_attempts: Number(f.max_attempts.value) },
      tags: f.tags.value.split(",").map((t) => t.trim()).filter(Boolean),
    };
    submit.disabled = true;
    try {
      const saved = job ? await api("PATCH", `/api/v1/jobs/${enc(job.id)}`, doc) : await api("POST", "/api/v1/jobs", doc);
      location.hash = `#/jobs/${enc(saved.id)}`;
    } catch (err) { showErrors(err); } finally { submit.disabled = false; }
  } },
  el("div", { class: "card" },
    field("name", "Name", f.name),
    el("div", { class: "row" }, field("type", "Schedule", f.type), field("kind", "Kind", f.kind)),
    fields.cron, fields.every, fields.at, fields.rule, fields.timezone, fields.exclude, zones,
    field("payload", "Payload (JSON)", f.payload),
    el("div", { class: "row" }, field("queue", "Queue", f.queue), field("priority", "Priority", f.priority), field("overlap", "Overlap", f.overlap)),
    el("div", { class: "row" }, field("max_attempts", "Max attempts", f.max_attempts), field("timeout_seconds", "Timeout (s)", f.timeout_seconds)),
    field("tags", "Tags (comma-separated)", f.tags),
    formError, submit),
  el("div", { class: "card" }, el("h2", { text: "Next fire times" }), el("p", { class: "muted", text: `Shown in your time zone: ${TZ}` }), describe, times));
  render(el("h1", { text: job ? `Edit ${job.name}` : "New job" }), form);
  showType();
  preview();
}

// -- routing ----------------------------------------------------------------------------------

async function route() {
  timers.forEach(clearInterval); timers = [];
  const hash = location.hash.replace(/^#/, "") || "/";
  const parts = hash.split("/").filter(Boolean).map(decodeURIComponent);
  document.querySelectorAll("[data-nav]").forEach((a) => a.classList.toggle("active", a.dataset.nav === (parts[0] || "overview")));
  try {
    if (!parts.length) await overview();
    else if (parts[0] === "jobs" && parts.length === 1) await jobsList();
    else if (parts[0] === "new") await jobForm(null);
    else if (parts[0] === "enqueue") await enqueuePage();
    else if (parts[0] === "jobs" && parts[2] === "edit") await jobForm(parts[1]);
    else if (parts[0] === "jobs" && parts[2] === "runs") await runPage(parts[1], parts[3]);
    else if (parts[0] === "jobs") await jobPage(parts[1]);
    else if (parts[0] === "runs") await runsPage(parts[1]);
    else if (parts[0] === "calendars" && parts.length === 1) await calendarsPage();
    else if (parts[0] === "calendars") await calendarPage(parts[1]);
    else if (parts[0].startsWith("alerts")) await alertsPage();
    else if (parts[0] === "limits") await limitsPage();
    else render(el("h1", { text: "Not found" }));
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return;
    render(notice(err.message));
  }
}

document.getElementById("tz").textContent = TZ;
document.getElementById("signout").addEventListener("click", async () => {
  await api("DELETE", "/api/v1/session").catch(() => {});
  await whoami();
  showLogin();
});
window.addEventListener("hashchange", route);
whoami().then((me) => (me.authenticated ? route() : showLogin())).catch((err) => render(notice(err.message)));
