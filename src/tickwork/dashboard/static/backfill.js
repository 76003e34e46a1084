/* tickwork dashboard: the Backfill card on a job's page. A range (from, to, in the browser's
   time zone) and an overlap choice are previewed first (POST .../backfill with dry_run: the
   fire times, how many are new, the overlap that applies); Confirm then creates them. Any
   change to the form drops the preview, so what is confirmed is what was shown. Loaded before
   app.js, whose helpers (el, api, notice, fmt, enc) it uses when a page is shown. */
"use strict";

const BACKFILL_SHOWN = 20; // fire times listed in full; beyond, the first and the last ones
const OVERLAPS = ["allow_all", "skip", "buffer_one", "buffer_all", "cancel_previous"];

// "2030-01-01T09:00" typed in the browser's zone, as an RFC 3339 instant in UTC
function localInstant(value) {
  const at = new Date(value);
  return Number.isNaN(at.getTime()) ? null : at.toISOString();
}

function backfillCard(job, onCreated) {
  const from = el("input", { id: "bf-from", type: "datetime-local", step: 1, required: true });
  const to = el("input", { id: "bf-to", type: "datetime-local", step: 1, required: true });
  const overlap = el("select", { id: "bf-overlap" },
    el("option", { value: "", text: `the job's own (${job.overlap})` }),
    ...OVERLAPS.map((o) => el("option", { value: o, text: o })));
  const result = el("div", { id: "bf-preview" });
  const msg = el("div", { id: "bf-msg" });
  let shown = null; // the request the preview on screen answers

  const request = () => {
    const body = { from: localInstant(from.value), to: localInstant(to.value) };
    if (!body.from || !body.to) return null;
    if (overlap.value) body.overlap = overlap.value;
    return body;
  };
  const confirmButton = el("button", { type: "button", id: "bf-confirm", class: "primary", text: "Confirm", hidden: true,
    onclick: async (e) => {
      if (!shown) return;
      e.target.disabled = true;
      try {
        const done = await api("POST", `/api/v1/jobs/${enc(job.id)}/backfill`, shown);
        msg.replaceChildren(notice(`Backfill: created ${done.created} runs${done.existing.length ? `, ${done.existing.length} had a run already` : ""}`, true));
        reset();
        onCreated();
      } catch (err) { msg.replaceChildren(notice(err.message)); } finally { e.target.disabled = false; }
    } });
  const previewButton = el("button", { type: "button", id: "bf-preview-button", text: "Preview",
    onclick: async (e) => {
      const body = request();
      if (!body) { msg.replaceChildren(notice("Give a start and an end")); return; }
      e.target.disabled = true;
      try {
        const preview = await api("POST", `/api/v1/jobs/${enc(job.id)}/backfill`, { ...body, dry_run: true });
        msg.replaceChildren();
        show(preview);
        shown = preview.new ? body : null;
        confirmButton.hidden = !shown;
        confirmButton.textContent = `Confirm: create ${preview.new} runs`;
      } catch (err) { reset(); msg.replaceChildren(notice(err.message)); } finally { e.target.disabled = false; }
    } });

  function reset() {
    shown = null;
    confirmButton.hidden = true;
    result.replaceChildren();
  }
  function show(p) {
    const have = new Set(p.existing);
    const times = p.fire_times.length <= BACKFILL_SHOWN ? p.fire_times
      : [...p.fire_times.slice(0, BACKFILL_SHOWN - 5), null, ...p.fire_times.slice(-5)];
    result.replaceChildren(...[
      el("p", { id: "bf-count", text: `${p.count} fire times: ${p.new} new, ${p.existing.length} with a run already (left as they are)` }),
      el("p", { class: "muted", text: `Overlap: ${p.overlap_note}` }),
      p.overlap_warning ? el("p", { class: "warning", id: "bf-warning", text: `Warning: ${p.overlap_warning}` }) : null,
      el("ol", { class: "times", id: "bf-times" }, ...times.map((t) => t === null
        ? el("li", { class: "muted", text: `… ${p.fire_times.length - BACKFILL_SHOWN} more …` })
        : el("li", { class: have.has(t) ? "muted" : "", text: `${fmt(t)} — ${have.has(t) ? "exists" : "new"}` })))].filter(Boolean));
  }
  for (const input of [from, to, overlap]) input.addEventListener("change", reset);

  return el("div", { class: "card", id: "job-backfill" }, el("h2", { text: "Backfill" }),
    el("p", { class: "muted", text: "Runs for the past fire times in a range, all due now. A fire time that has a run keeps it." }),
    el("div", { class: "row" },
      el("label", {}, "From ", from), el("label", {}, "To (not included) ", to), el("label", {}, "Overlap ", overlap),
      previewButton, confirmButton),
    msg, result);
}
