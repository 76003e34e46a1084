/* tickwork dashboard: the Runs page (every run, filtered by state, job, queue and time, paged)
   and a run's own page (the run and each of its attempts, the failed ones included). Loaded
   before app.js; its helpers (el, api, fmt, badge, attemptView, ...) are read when a page is
   drawn. */
"use strict";

const RUN_STATES = ["scheduled", "queued", "running", "retrying", "succeeded", "dead", "crashed",
  "missed", "skipped_overlap", "cancelled"];

function runHref(jobId, scheduledAt) {
  return `#/jobs/${encodeURIComponent(jobId)}/runs/${encodeURIComponent(scheduledAt)}`;
}

// datetime-local value (the browser's time zone) -> RFC 3339 UTC, or "" when empty
function instantOf(input) {
  return input.value ? new Date(input.value).toISOString() : "";
}

async function runsPage(preselected) {
  const states = el("fieldset", { class: "states", id: "run-states" }, el("legend", { text: "State" }),
    RUN_STATES.map((s) => el("label", {},
      el("input", { type: "checkbox", name: "state", value: s, checked: s === preselected }), badge(s))));
  const job = el("input", { type: "search", id: "run-job", placeholder: "Job name or id", "aria-label": "Job" });
  const queue = el("input", { type: "text", id: "run-queue", placeholder: "Queue", "aria-label": "Queue", size: 10 });
  const since = el("input", { type: "datetime-local", id: "run-since", step: 1, "aria-label": "Scheduled from" });
  const until = el("input", { type: "datetime-local", id: "run-until", step: 1, "aria-label": "Scheduled before" });
  const order = el("select", { id: "run-order", "aria-label": "Order" },
    el("option", { value: "newest", text: "Newest first" }), el("option", { value: "oldest", text: "Oldest first" }));
  const rows = el("tbody");
  const msg = el("div");
  const more = el("button", { type: "button", text: "More", hidden: true });
  let cursor = null, seq = 0;
  async function load(append) {
    const mine = ++seq;
    const q = new URLSearchParams({ limit: "50", order: order.value });
    for (const box of states.querySelectorAll("input:checked")) q.append("state", box.value);
    if (job.value.trim()) q.set("job", job.value.trim());
    if (queue.value.trim()) q.set("queue", queue.value.trim());
    if (instantOf(since)) q.set("since", instantOf(since));
    if (instantOf(until)) q.set("until", instantOf(until));
    if (append && cursor) q.set("cursor", cursor);
    let page;
    try {
      page = await api("GET", `/api/v1/runs?${q}`);
    } catch (err) {
      if (mine !== seq) return;
      msg.replaceChildren(notice(err.status === 404 ? `No job named ${job.value.trim()}.` : err.message));
      rows.replaceChildren();
      more.hidden = true;
      return;
    }
    if (mine !== seq) return;
    msg.replaceChildren();
    const items = page.items.map((r) => el("tr", { class: "clickable run", "data-state": r.state, onclick: () => { location.hash = runHref(r.job_id, r.scheduled_at); } },
      el("td", {}, el("a", { href: runHref(r.job_id, r.scheduled_at), text: r.job_name || `${r.job_id} (deleted)` })),
      el("td", { text: fmt(r.scheduled_at) }), el("td", {}, badge(r.state)),
      el("td", { text: `${r.attempt}/${r.max_attempts}` }), el("td", { text: r.queue }), el("td", { text: r.trigger }),
      el("td", { text: r.finished_at ? fmt(r.finished_at) : "" }), el("td", { class: "muted", text: r.last_error || "" })));
    if (append) rows.append(...items); else rows.replaceChildren(...items);
    if (!rows.children.length) rows.append(el("tr", {}, el("td", { colspan: 8, class: "muted", text: "No runs match." })));
    cursor = page.next_cursor;
    more.hidden = !cursor;
  }
  let pending;
  const reload = () => { clearTimeout(pending); pending = setTimeout(() => load(false), 200); };
  for (const input of [job, queue]) input.addEventListener("input", reload);
  for (const input of [since, until, order]) input.addEventListener("change", reload);
  states.addEventListener("change", reload);
  more.addEventListener("click", () => load(true));
  render(el("h1", { text: "Runs" }),
    el("div", { class: "card filters" }, states,
      el("div", { class: "toolbar" }, job, queue,
        el("label", { class: "muted" }, "from ", since), el("label", { class: "muted" }, "before ", until), order)),
    msg,
    el("div", { class: "card" }, el("table", { id: "runs-table" }, el("thead", {}, el("tr", {},
      ["Job", "Scheduled", "State", "Attempt", "Queue", "Trigger", "Finished", "Last error"].map((t) => el("th", { text: t })))), rows), more));
  await load(false);
}

async function runPage(jobRef, scheduledAt) {
  const detail = await api("GET", `/api/v1/jobs/${enc(jobRef)}/runs/${enc(scheduledAt)}`);
  const r = detail.run;
  const failed = detail.attempts.filter((a) => a.outcome && a.outcome !== "succeeded").length;
  const facts = [["Job", el("a", { href: `#/jobs/${enc(r.job_id)}`, text: r.job_name || r.job_id })],
    ["Scheduled", `${fmt(r.scheduled_at)} (${r.scheduled_at})`], ["Due", fmt(r.due_at)],
    ["Attempt", `${r.attempt} of at most ${r.max_attempts}${failed ? ` (${failed} failed)` : ""}`],
    ["Queue", `${r.queue} (priority ${r.priority})`], ["Trigger", r.trigger],
    ["Idempotency key", r.idempotency_key], ["Worker", r.worker || "—"], ["Finished", fmt(r.finished_at)],
    ["Last error", r.last_error || "—"]];
  render(el("h1", {}, el("span", { id: "run-title", text: `Run of ${r.job_name || r.job_id}` }), badge(r.state)),
    el("div", { class: "card" }, el("dl", { class: "kv" }, facts.map(([k, v]) => [el("dt", { text: k }), el("dd", {}, v)]))),
    el("div", { class: "card", id: "run-attempts" }, el("h2", { text: `Attempts (${detail.attempts.length})` }),
      detail.attempts.length ? detail.attempts.map(attemptView) : el("p", { class: "muted", text: "No attempts yet." })));
}
