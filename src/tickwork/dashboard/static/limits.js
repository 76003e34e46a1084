/* tickwork dashboard: the Limits page. Each queue's limits across every worker (max running,
   rate and burst) with its usage, and the named limits jobs share through their limit_key
   (docs/limits.md). Loaded before app.js, whose helpers (el, api, render, notice, enc) it
   uses when the page is shown. Setting a limit needs an admin token; the API says so. */
"use strict";

function limitText(q) {
  const parts = [];
  if (q.max_running !== null && q.max_running !== undefined) parts.push(`${q.running} of ${q.max_running} running`);
  if (q.rate) parts.push(`${q.rate} burst ${q.burst} (${q.tokens.toFixed(1)} left)`);
  return parts.join(", ") || "none";
}

function numberOrNull(input) {
  const text = input.value.trim();
  return text === "" ? null : Number(text);
}

function limitField(label, attrs) {
  const input = el("input", { ...attrs, "aria-label": label, size: 8 });
  return [input, el("label", { class: "inline" }, `${label} `, input)];
}

function queueLimitRow(q, refresh, say) {
  const [maxRunning, maxLabel] = limitField("Max running", { type: "number", min: 1, value: q.max_running ?? "", name: `max-${q.name}` });
  const [rate, rateLabel] = limitField("Rate", { type: "text", placeholder: "50/s", value: q.rate ?? "", name: `rate-${q.name}` });
  const [burst, burstLabel] = limitField("Burst", { type: "number", min: 1, value: q.rate ? q.burst : "", name: `burst-${q.name}` });
  const form = el("form", { class: "limits", onsubmit: async (e) => {
    e.preventDefault();
    const body = { max_running: numberOrNull(maxRunning), rate: rate.value.trim() || null, burst: numberOrNull(burst) };
    try {
      await api("PUT", `/api/v1/queues/${enc(q.name)}/limits`, body);
      say(notice(`Limits of queue ${q.name} saved.`, true));
      refresh();
    } catch (err) { say(notice(err.message)); }
  } }, maxLabel, rateLabel, burstLabel, el("button", { type: "submit", text: "Save" }));
  return el("tr", {}, el("td", { text: q.name }), el("td", { class: "usage", text: limitText(q) }), el("td", {}, form));
}

function keyLimitRow(k, refresh, say) {
  return el("tr", {}, el("td", { text: k.key }), el("td", { text: `${k.rate} burst ${k.burst} (${k.tokens.toFixed(1)} left)` }),
    el("td", {}, el("button", { type: "button", text: "Delete", onclick: async () => {
      try { await api("DELETE", `/api/v1/limits/${enc(k.key)}`); refresh(); } catch (err) { say(notice(err.message)); }
    } })));
}

async function limitsPage() {
  const message = el("div");
  const say = (node) => message.replaceChildren(node);
  const queues = el("tbody");
  const keys = el("tbody");
  const [keyName, keyLabel] = limitField("Key", { type: "text", name: "key", placeholder: "github-api", required: true });
  const [keyRate, keyRateLabel] = limitField("Rate", { type: "text", name: "key-rate", placeholder: "100/min", required: true });
  const [keyBurst, keyBurstLabel] = limitField("Burst", { type: "number", name: "key-burst", min: 1 });
  const addKey = el("form", { class: "limits", onsubmit: async (e) => {
    e.preventDefault();
    try {
      await api("PUT", `/api/v1/limits/${enc(keyName.value.trim())}`, { rate: keyRate.value.trim(), burst: numberOrNull(keyBurst) });
      say(notice(`Limit ${keyName.value.trim()} saved.`, true));
      refresh();
    } catch (err) { say(notice(err.message)); }
  } }, keyLabel, keyRateLabel, keyBurstLabel, el("button", { type: "submit", text: "Set limit" }));
  async function refresh() {
    const [qs, ks] = await Promise.all([api("GET", "/api/v1/queues"), api("GET", "/api/v1/limits")]);
    queues.replaceChildren(...qs.items.map((q) => queueLimitRow(q, refresh, say)));
    if (!qs.items.length) queues.append(el("tr", {}, el("td", { colspan: 3, class: "muted", text: "No queues yet." })));
    keys.replaceChildren(...ks.items.map((k) => keyLimitRow(k, refresh, say)));
    if (!ks.items.length) keys.append(el("tr", {}, el("td", { colspan: 3, class: "muted", text: "No named limits." })));
  }
  render(el("h1", { text: "Limits" }), message,
    el("p", { class: "muted", text: "Limits hold across every worker. A run a limit holds back waits, uncharged; leave a field empty for no limit. Rates are N/s, N/min or N/h." }),
    el("div", { class: "card" }, el("h2", { text: "Queues" }), el("table", { class: "queue-limits" },
      el("thead", {}, el("tr", {}, ["Queue", "Usage", "Limits"].map((t) => el("th", { text: t })))), queues)),
    el("div", { class: "card" }, el("h2", { text: "Named limits (a job's limit_key)" }), el("table", { class: "key-limits" },
      el("thead", {}, el("tr", {}, ["Key", "Rate", ""].map((t) => el("th", { text: t })))), keys), addKey));
  await refresh();
}
