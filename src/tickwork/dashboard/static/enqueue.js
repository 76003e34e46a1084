/* tickwork dashboard: the Enqueue page (a one-off job without a name: POST /api/v1/enqueue)
   and the retention card of the overview (GET /api/v1/retention). Loaded before app.js, whose
   helpers (el, api, render, notice, fmt, enc, duration) it uses when a page is shown. */
"use strict";

const ENQUEUE_KINDS = ["http", "slack", "email", "shell", "python", "publish"];

// The enqueue request the form describes; a problem is thrown as { field, message }.
function enqueueRequest(f) {
  let payload;
  try { payload = JSON.parse(f.payload.value || "{}"); } catch (err) { throw { field: "payload", message: `not valid JSON: ${err.message}` }; }
  const request = { kind: f.kind.value, payload };
  if (f.at.value) {
    const at = new Date(f.at.value);  // a datetime-local value: the browser's time zone
    if (Number.isNaN(at.getTime())) throw { field: "at", message: "not a date and time" };
    request.at = at.toISOString();
  }
  if (f.queue.value.trim()) request.queue = f.queue.value.trim();
  if (f.max_attempts.value) request.retry = { max_attempts: Number(f.max_attempts.value) };
  if (f.dedupe_key.value) request.dedupe_key = f.dedupe_key.value;
  if (f.dedupe_window.value.trim()) request.dedupe_window_seconds = f.dedupe_window.value.trim();
  return request;
}

async function enqueuePage() {
  const f = {};
  const input = (key, attrs) => (f[key] = el("input", { id: `q-${key}`, name: key, ...attrs }));
  const field = (key, label, control) => el("div", { class: "field" }, el("label", { for: `q-${key}`, text: label }), control, el("div", { class: "error", id: `qe-${key}` }));
  f.kind = el("select", { id: "q-kind", name: "kind" }, ENQUEUE_KINDS.map((k) => el("option", { value: k, text: k })));
  f.payload = el("textarea", { id: "q-payload", name: "payload", rows: 6, placeholder: '{"method": "POST", "url": "https://example.org/hook"}' });
  input("at", { type: "datetime-local", step: 1 });
  input("queue", { placeholder: "default", maxlength: 64, autocomplete: "off" });
  input("max_attempts", { type: "number", min: 1, max: 100, placeholder: "3" });
  input("dedupe_key", { maxlength: 200, autocomplete: "off", placeholder: "receipt-42" });
  input("dedupe_window", { placeholder: "1h", autocomplete: "off" });
  const result = el("div", { id: "enqueue-result" });
  const submit = el("button", { class: "primary", type: "submit", text: "Enqueue" });
  const form = el("form", { class: "card", novalidate: true, onsubmit: async (e) => {
    e.preventDefault();
    result.replaceChildren();
    document.querySelectorAll("[id^=qe-]").forEach((x) => { x.textContent = ""; });
    submit.disabled = true;
    try {
      const done = await api("POST", "/api/v1/enqueue", enqueueRequest(f));
      const job = done.job;
      const link = el("a", { id: "enqueued-job", href: `#/jobs/${enc(job.id)}`, text: job.name });
      result.replaceChildren(el("div", { class: "notice ok", role: "status" },
        done.created ? "Enqueued " : "The dedupe key is held: nothing enqueued; it is held by ", link,
        `, runs ${fmt(job.next_run_at)}`));
    } catch (err) {
      const problems = err.field ? [err] : err.problem?.errors || [];
      for (const problem of problems) {
        const slot = document.getElementById(`qe-${problem.field.split(/[.[]/)[0].replace("dedupe_window_seconds", "dedupe_window").replace("retry", "max_attempts")}`);
        if (slot) slot.textContent = `${problem.field}: ${problem.message}`;
      }
      result.replaceChildren(notice(err.message || `${err.field}: ${err.message}`));
    } finally { submit.disabled = false; }
  } },
  el("h2", { text: "A one-off job, no name needed" }),
  el("div", { class: "row" }, field("kind", "Kind", f.kind), field("queue", "Queue", f.queue), field("max_attempts", "Max attempts", f.max_attempts)),
  field("payload", "Payload (JSON)", f.payload),
  field("at", `Runs at (${TZ}; empty: now)`, f.at),
  el("div", { class: "row" }, field("dedupe_key", "Dedupe key (optional)", f.dedupe_key), field("dedupe_window", "Held for (e.g. 10m, 1h)", f.dedupe_window)),
  submit);
  render(el("h1", { text: "Enqueue" }),
    el("p", { class: "muted", text: "The job gets a name of its own (kind-<uuid7>) and runs once. With a dedupe key, enqueueing again while the key is held returns the job holding it instead of creating another." }),
    result, form, await retentionCard());
}

// How long finished one-off jobs, deleted jobs, run history and the audit trail are kept.
async function retentionCard() {
  const r = await api("GET", "/api/v1/retention");
  return el("div", { class: "card", id: "retention" }, el("h2", { text: "Retention" }),
    el("p", {}, "Finished one-off jobs and deleted jobs are purged ", el("strong", { id: "retention-jobs", text: duration(r.finished_job_retention_seconds) }),
      " after they ended; run history is kept ", el("strong", { id: "retention-history", text: `${r.history_retention_days}d` }),
      ", the audit trail ", el("strong", { id: "retention-audit", text: `${r.audit_retention_days}d` }), "."));
}
