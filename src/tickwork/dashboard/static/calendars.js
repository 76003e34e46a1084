/* tickwork dashboard: the calendars pages (list, create, import, edit, delete). Loaded before
   app.js, whose helpers (el, api, render, notice, fmt, enc) it uses when a page is shown. */
"use strict";

function calendarLines(doc) {
  const dates = (doc.dates || []).map((d) => (typeof d === "string" ? d : `${d.from}..${d.to}`));
  const yearly = (doc.yearly || []).map((y) => (typeof y === "string" ? y : y.on));
  return { dates: dates.join("\n"), yearly: yearly.join("\n"), weekly: (doc.weekly || []).join("\n") };
}

function calendarDocument(name, description, dates, yearly, weekly) {
  const lines = (text) => text.split("\n").map((l) => l.trim()).filter(Boolean);
  return {
    name, description,
    dates: lines(dates).map((l) => (l.includes("..") ? { from: l.split("..")[0].trim(), to: l.split("..")[1].trim() } : l)),
    yearly: lines(yearly), weekly: lines(weekly),
  };
}

function calendarForm(existing, onSaved) {
  const f = {};
  const text = (key, attrs) => (f[key] = el("input", { id: `c-${key}`, name: key, ...attrs }));
  const area = (key, value, placeholder) => { f[key] = el("textarea", { id: `c-${key}`, name: key, rows: 4, placeholder }); f[key].value = value; return f[key]; };
  const field = (key, label, control) => el("div", { class: "field" }, el("label", { for: `c-${key}`, text: label }), control, el("div", { class: "error", id: `ce-${key}` }));
  const lines = calendarLines(existing || {});
  text("name", { value: existing?.name || "", required: true, maxlength: 64, autocomplete: "off", readonly: existing ? true : undefined });
  text("description", { value: existing?.description || "", maxlength: 500 });
  const error = el("div");
  const submit = el("button", { class: "primary", type: "submit", text: existing ? "Save calendar" : "Create calendar" });
  return el("form", { class: "card calendar-form", novalidate: true, onsubmit: async (e) => {
    e.preventDefault();
    error.replaceChildren();
    document.querySelectorAll("[id^=ce-]").forEach((x) => { x.textContent = ""; });
    const doc = calendarDocument(f.name.value.trim(), f.description.value, f.dates.value, f.yearly.value, f.weekly.value);
    submit.disabled = true;
    try {
      const saved = existing ? await api("PUT", `/api/v1/calendars/${enc(existing.name)}`, doc) : await api("POST", "/api/v1/calendars", doc);
      onSaved(saved);
    } catch (err) {
      for (const problem of err.problem?.errors || []) {
        const slot = document.getElementById(`ce-${problem.field.split(/[.[]/)[0]}`);
        if (slot) slot.textContent = `${problem.field}: ${problem.message}`;
      }
      error.replaceChildren(notice(err.message));
    } finally { submit.disabled = false; }
  } },
  el("h2", { text: existing ? "Definition" : "New calendar" }),
  el("div", { class: "row" }, field("name", "Name", f.name), field("description", "Description", f.description)),
  field("dates", "Dates, one a line (2030-12-25, or a range 2030-08-01..2030-08-15)", area("dates", lines.dates, "2030-12-25")),
  field("yearly", "Every year, one a line (MM-DD)", area("yearly", lines.yearly, "12-25")),
  field("weekly", "Weekly windows, one a line", area("weekly", lines.weekly, "Sat-Sun\nFri 18:00 - Mon 06:00")),
  error, submit);
}

async function calendarsPage() {
  const rows = el("tbody", { id: "calendars" });
  const msg = el("div");
  const file = el("input", { type: "file", id: "c-ics", accept: ".ics,text/calendar" });
  const importName = el("input", { id: "c-import-name", placeholder: "name", maxlength: 64 });
  const importForm = el("form", { class: "card", onsubmit: async (e) => {
    e.preventDefault();
    if (!file.files.length) { msg.replaceChildren(notice("Choose an .ics file first")); return; }
    try {
      const ics = await file.files[0].text();
      const name = importName.value.trim() || file.files[0].name.replace(/\.ics$/i, "");
      const saved = await api("POST", "/api/v1/calendars/import", { name, ics });
      msg.replaceChildren(notice(`Imported ${saved.name}${saved.warnings.length ? `; left out: ${saved.warnings.join("; ")}` : ""}`, true));
      load();
    } catch (err) { msg.replaceChildren(notice(err.message)); }
  } }, el("h2", { text: "Import an .ics file" }), el("div", { class: "row" }, file, importName, el("button", { type: "submit", text: "Import" })));
  async function load() {
    const page = await api("GET", "/api/v1/calendars");
    rows.replaceChildren(...page.items.map((c) => el("tr", { class: "clickable", onclick: () => { location.hash = `#/calendars/${enc(c.name)}`; } },
      el("td", {}, el("a", { href: `#/calendars/${enc(c.name)}`, text: c.name })), el("td", { text: c.description || "" }),
      el("td", { text: (c.dates || []).length }), el("td", { text: (c.yearly || []).length }), el("td", { text: (c.weekly || []).join(", ") }),
      el("td", { text: fmt(c.updated_at) }))));
    if (!page.items.length) rows.append(el("tr", {}, el("td", { colspan: 6, class: "muted", text: "No calendars yet." })));
  }
  render(el("h1", { text: "Calendars" }), msg,
    el("p", { class: "muted", text: "A job's schedule can exclude calendars (\"exclude\": [\"holidays\"]) or be restricted to them (\"only\"). Dates are judged in the schedule's time zone." }),
    el("div", { class: "card" }, el("table", {}, el("thead", {}, el("tr", {}, ["Name", "Description", "Dates", "Yearly", "Weekly", "Updated"].map((t) => el("th", { text: t })))), rows)),
    el("div", { class: "grid" }, calendarForm(null, (saved) => { location.hash = `#/calendars/${enc(saved.name)}`; }), importForm));
  await load();
}

async function calendarPage(name) {
  const cal = await api("GET", `/api/v1/calendars/${enc(name)}`);
  const msg = el("div");
  const remove = el("button", { type: "button", class: "danger", text: "Delete", onclick: async () => {
    if (!confirm(`Delete calendar ${cal.name}?`)) return;
    try { await api("DELETE", `/api/v1/calendars/${enc(cal.name)}`); location.hash = "#/calendars"; } catch (err) { msg.replaceChildren(notice(err.message)); }
  } });
  render(el("h1", {}, el("span", { id: "calendar-name", text: cal.name }), remove), msg,
    el("div", { class: "grid" },
      calendarForm(cal, (saved) => { msg.replaceChildren(notice(`Saved (version ${saved.version}): re-planned ${saved.replanned_jobs} job(s), removed ${saved.removed_runs} waiting run(s)`, true)); }),
      el("div", { class: "card" }, el("h2", { text: "Jobs that name it" }),
        cal.jobs.length ? el("ul", {}, cal.jobs.map((j) => el("li", {}, el("a", { href: `#/jobs/${enc(j)}`, text: j })))) : el("p", { class: "muted", text: "None." }))));
}
