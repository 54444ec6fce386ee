// caddyhook console. Every value from the server (payloads, headers,
// reasons, hook names) goes into the page as text (textContent, text
// nodes); nothing is ever parsed as HTML and nothing from an event
// becomes a link.
"use strict";

const meta = (name) => document.querySelector(`meta[name="${name}"]`).getAttribute("content");
const API = meta("hooks-api"); // "../" on the admin endpoint, "api/" on a site
const CSRF = meta("hooks-csrf");
const $ = (id) => document.getElementById(id);

const state = {
  path: "", filter: {}, next: "", selected: "", source: null, paused: false, hasSpool: false,
  // in a cluster: this node's name, and whether the view covers every node
  hasCluster: false, node: "", scope: "cluster", nodeNames: new Set(), deadCount: 0, reloadedAt: 0,
};

// el makes an element with text content only.
function el(tag, cls, ...kids) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(k == null ? "" : String(k)));
  return e;
}

function qs(extra) {
  const p = new URLSearchParams();
  if (state.path) p.set("path", state.path);
  for (const [k, v] of Object.entries(extra || {})) if (v !== "" && v != null) p.set(k, v);
  const s = p.toString();
  return s ? "?" + s : "";
}

async function api(method, route, extra, body) {
  const opt = { method, credentials: "same-origin", headers: {} };
  if (method !== "GET") {
    if (CSRF) opt.headers["X-Hooks-Csrf"] = CSRF;
    opt.headers["Content-Type"] = "application/json";
    opt.body = body === undefined ? "{}" : JSON.stringify(body);
  }
  const resp = await fetch(API + route + qs(extra), opt);
  const text = await resp.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (_) { data = null; }
  if (!resp.ok) throw new Error((data && data.error) || `${resp.status} ${resp.statusText}`);
  return data;
}

function showError(err) { $("error").textContent = err ? String(err.message || err) : ""; }

// evq is the query of an event route: the view's scope and extra.
function evq(extra) {
  const q = Object.assign({}, extra || {});
  if (state.hasCluster && state.scope === "cluster") q.scope = "cluster";
  return q;
}

// showNodes says which nodes the view covers ("2 of 3 nodes", and which
// did not answer, and why, in its title).
function showNodes(n) {
  const span = $("nodes");
  if (!n || !state.hasCluster || state.scope !== "cluster") { span.textContent = ""; span.className = "nodes mono"; span.title = ""; return; }
  const missing = n.missing || [];
  span.textContent = `${n.answered.length} of ${n.asked} nodes`;
  span.className = "nodes mono" + (missing.length ? " partial" : "");
  span.title = missing.length ? missing.map((m) => `${m.node} ${m.why}`).join("\n") : "every node answered";
  span.dataset.missing = missing.map((m) => m.node).join(" ");
  for (const name of n.answered) noteNode(name);
  for (const m of missing) noteNode(m.node);
}

function noteNode(name) {
  if (!name || state.nodeNames.has(name)) return;
  state.nodeNames.add(name);
  const o = el("option", "");
  o.value = name;
  $("node-names").append(o);
}

function fmtTime(t) {
  const d = new Date(t);
  return isNaN(d) ? "" : d.toLocaleTimeString([], { hour12: false });
}

// statusCell is the status answered; an accepted event whose dispatch
// failed, died or was dropped is not drawn as a success.
function statusCell(status, st) {
  let cls = "s" + String(status).charAt(0);
  if (st === "dead" || st === "failed" || st === "dropped") cls = "sdead";
  else if (st === "retrying") cls = "sretry";
  const td = el("td", cls, status);
  if (cls === "sdead" || cls === "sretry") td.title = `answered ${status}; its dispatch is ${st}`;
  return td;
}

// ---- handlers ----
async function loadHandlers() {
  const hs = await api("GET", "", {});
  const sel = $("handler");
  sel.replaceChildren();
  for (const h of hs) {
    const o = el("option", "", h.server ? `${h.path} (${h.server})` : h.path);
    o.value = h.path;
    sel.append(o);
  }
  if (!state.path && hs.length) state.path = hs[0].path;
  sel.value = state.path;
  const h = hs.find((x) => x.path === state.path);
  state.hasCluster = !!(h && h.cluster);
  state.node = h && h.cluster ? h.cluster.node : "";
  $("scope-label").hidden = !state.hasCluster;
  if (state.node) noteNode(state.node);
}

// ---- events list ----
// failedStates are the dispatch states whose row shows the error: why
// it is retried, or what killed it.
const failedStates = new Set(["retrying", "dead", "failed", "dropped"]);

function entryRow(en) {
  if (en.node) noteNode(en.node);
  if (en.type === "rejections") {
    const tr = el("tr", "rows",
      el("td", "", fmtTime(en.time)), el("td", "mono", en.node || ""), el("td", "", en.hook || ""), statusCell(en.status),
      el("td", "", "×" + en.count), el("td", "", en.client), el("td", "", ""), el("td", "", en.reason));
    tr.dataset.rows = (en.node || "") + "/" + en.cursor;
    tr.title = `${en.count} rejections from ${en.client} in the minute of ${fmtTime(en.minute)}`;
    return tr;
  }
  if (en.type === "operator") {
    const tr = el("tr", "operator",
      el("td", "", fmtTime(en.time)), el("td", "mono", en.node || ""), el("td", "", ""), el("td", "", ""),
      el("td", "", en.action), el("td", "", en.operator), el("td", "", ""), el("td", "", `${en.target}: ${en.reason || ""}`));
    tr.dataset.id = en.id;
    tr.dataset.operator = en.action;
    tr.title = `${en.operator}: ${en.action} ${en.target}`;
    tr.addEventListener("click", () => select(en.id));
    return tr;
  }
  const why = en.reason || (failedStates.has(en.state) ? en.error : "") || en.run_id || "";
  const tr = el("tr", "",
    el("td", "", fmtTime(en.time)), el("td", "mono", en.node || ""), el("td", "", en.hook), statusCell(en.status, en.state),
    el("td", "", en.state), el("td", "", en.client), el("td", "", en.latency_ms.toFixed(1)), el("td", "mono", why));
  tr.dataset.id = en.id;
  tr.dataset.state = en.state;
  if (en.id === state.selected) tr.classList.add("selected");
  tr.addEventListener("click", () => select(en.id));
  return tr;
}

async function loadEvents(append) {
  const f = Object.assign({}, state.filter);
  if (append && state.next) f.before = state.next;
  const page = await api("GET", "events", evq(f));
  if (page.nodes) showNodes(page.nodes);
  const tb = $("events");
  if (!append) tb.replaceChildren();
  for (const en of page.entries) tb.append(entryRow(en));
  state.next = page.next || "";
  $("more").hidden = !state.next;
}

function matches(en) {
  const f = state.filter;
  if (f.hook && en.hook !== f.hook) return false;
  if (f.node && en.node !== f.node) return false;
  if (f.reason && !(en.reason || "").toLowerCase().includes(f.reason.toLowerCase())) return false;
  const s = f.status || "";
  if (s === "accepted" && en.type !== "event") return false;
  if (s === "rejected" && en.type !== "rejections") return false;
  if (/^[1-5]xx$/.test(s) && String(en.status).charAt(0) !== s.charAt(0)) return false;
  return true;
}

function upsert(en) {
  if (!matches(en)) return;
  const tb = $("events");
  const sel = en.type !== "rejections" ? `tr[data-id="${CSS.escape(en.id)}"]` : `tr[data-rows="${CSS.escape((en.node || "") + "/" + en.cursor)}"]`;
  const old = tb.querySelector(sel);
  const tr = entryRow(en);
  if (old) old.replaceWith(tr); else tb.prepend(tr);
  while (tb.children.length > 500) tb.lastChild.remove();
  if (en.type === "event" && en.id === state.selected) select(en.id);
}

function startStream() {
  if (state.source) state.source.close();
  const f = Object.assign({}, state.filter);
  const src = new EventSource(API + "events/stream" + qs(evq(f)));
  state.source = src;
  src.addEventListener("open", () => { $("live").className = "live on"; });
  src.addEventListener("error", () => { $("live").className = "live off"; });
  src.addEventListener("event", (m) => upsert(JSON.parse(m.data)));
  src.addEventListener("rejections", (m) => upsert(JSON.parse(m.data)));
  src.addEventListener("lost", () => loadEvents(false).catch(showError));
  src.addEventListener("nodes", (m) => showNodes(JSON.parse(m.data)));
  src.addEventListener("skipped", (m) => {
    // a flood: the tail carries at most so many a second from each node;
    // the list is read again now and then, so that states catch up
    const s = JSON.parse(m.data);
    $("live").title = `live tail: ${s.count} changes of ${s.node} not shown (at most ${s.max_per_second} a second from each node)`;
    const now = Date.now();
    if (now - state.reloadedAt > 5000) { state.reloadedAt = now; loadEvents(false).catch(showError); }
  });
}

// ---- detail ----
function metaRow(dl, k, v) { dl.append(el("dt", "", k), el("dd", "", v == null ? "" : v)); }

async function select(id) {
  state.selected = id;
  for (const tr of $("events").querySelectorAll("tr.selected")) tr.classList.remove("selected");
  const tr = $("events").querySelector(`tr[data-id="${CSS.escape(id)}"]`);
  if (tr) tr.classList.add("selected");
  let ev;
  try { ev = await api("GET", "events/" + encodeURIComponent(id), evq({})); } catch (e) { showError(e); return; }
  $("d-empty").hidden = true;
  $("detail").hidden = false;
  $("d-id").textContent = ev.id;
  const dl = $("d-meta");
  dl.replaceChildren();
  metaRow(dl, "time", new Date(ev.time).toISOString());
  if (ev.node) metaRow(dl, "node", ev.node);
  if (ev.type === "operator") {
    metaRow(dl, "operator", ev.operator);
    metaRow(dl, "action", `${ev.action} ${ev.target}`);
    metaRow(dl, "result", ev.reason);
  }
  metaRow(dl, "hook", ev.hook);
  metaRow(dl, "route", ev.route + (ev.mapping ? ` (mapping ${ev.mapping})` : ""));
  metaRow(dl, "status", ev.status + (ev.reason ? " " + ev.reason : ""));
  if (ev.state) metaRow(dl, "dispatch", ev.state + (failedStates.has(ev.state) && ev.error ? ": " + ev.error : ""));
  metaRow(dl, "client", ev.client);
  metaRow(dl, "auth", ev.auth);
  metaRow(dl, "time at edge", ev.latency_ms.toFixed(2) + " ms");
  if (ev.idempotency_key) metaRow(dl, "idempotency key", ev.idempotency_key);
  if (ev.replay_of) metaRow(dl, "replay of", ev.replay_of);
  const dt = $("d-dispatch");
  dt.replaceChildren();
  for (const d of ev.dispatch) {
    dt.append(el("tr", "", el("td", "mono", d.id), el("td", "", d.kind || ""), el("td", "", d.state),
      el("td", "", d.gateway_status || ""), el("td", "", d.attempts), el("td", "mono", d.run_id || ""),
      el("td", "", d.error || "")));
  }
  const ht = $("d-headers");
  ht.replaceChildren();
  for (const h of ev.headers || []) {
    ht.append(el("tr", "", el("td", "mono", h.name), el("td", h.shown ? "mono" : "muted", h.shown ? h.value : "(value not recorded)")));
  }
  $("d-body").textContent = ev.body != null ? ev.body : "";
  $("d-bodynote").textContent = ev.body != null ? (ev.body_note || `${ev.body_bytes} bytes`) : "(bodies are not kept: events { bodies on })";
  const rb = $("replay");
  const elsewhere = ev.node && state.node && ev.node !== state.node;
  rb.disabled = !ev.replayable || elsewhere;
  rb.title = elsewhere ? `the event is in the log of ${ev.node}: replay it from that node's console`
    : ev.replayable ? "dispatch it again with a new idempotency key" : (ev.replay_note || "not replayable");
}

async function replay() {
  const id = state.selected;
  if (!id) return;
  $("replay-result").textContent = "…";
  try {
    const r = await api("POST", "events/" + encodeURIComponent(id) + "/replay", {});
    $("replay-result").textContent = `replayed as ${r.id}: ${r.status}${r.reason ? " " + r.reason : ""}`;
    $("replay-result").dataset.newId = r.id;
  } catch (e) {
    $("replay-result").textContent = String(e.message || e);
  }
}

// ---- status, spool, lockouts ----
// statusSeq numbers loadStatus calls: an answer overtaken by a later call
// (a periodic refresh that started before a pause) is not rendered.
let statusSeq = 0;
async function loadStatus() {
  const seq = ++statusSeq;
  const [st] = await api("GET", "", { path: state.path });
  if (seq !== statusSeq) return;
  $("t-lockouts").textContent = st.active_lockouts;
  showCluster(st.cluster);
  const sp = st.spool;
  state.hasSpool = !!sp;
  $("q-none").hidden = !!sp;
  $("q-ops").hidden = !sp;
  if (!sp) { $("t-depth").textContent = "–"; $("t-dead").textContent = "–"; $("t-paused").textContent = ""; return; }
  $("q-dir").textContent = sp.dir || "";
  $("t-depth").textContent = sp.depth;
  $("t-dead").textContent = sp.dead_letters;
  state.paused = sp.paused;
  $("t-paused").textContent = sp.paused ? "paused" : "";
  // this node's pause; whether delivery runs is the delivery health's to say
  $("q-state").textContent = sp.error
    ? `queue unreadable (${sp.error}); delivery ${sp.paused ? "paused" : "not paused"} here`
    : `${sp.depth} queued, ${sp.in_flight} in flight here, ${sp.dead_letters} dead; delivery ${sp.paused ? "paused" : "not paused"} here`;
  $("q-state").dataset.paused = String(sp.paused);
  $("pause").disabled = sp.paused;
  $("resume").disabled = !sp.paused;
  const [dead, health] = await Promise.all([
    api("GET", "spool/dead", {}),
    api("GET", "spool/delivery", {}).catch((e) => ({ error: String(e.message || e) })),
  ]);
  if (seq !== statusSeq) return;
  showDelivery(health);
  state.deadCount = dead.length;
  const tb = $("dead");
  tb.replaceChildren();
  for (const d of dead) {
    const retry = el("button", "", "retry"); retry.type = "button"; retry.dataset.retry = d.id;
    retry.addEventListener("click", () => deadOp("retry", [d.id]));
    const drop = el("button", "", "drop"); drop.type = "button"; drop.dataset.drop = d.id;
    drop.addEventListener("click", () => confirmThen(`Drop the dead letter ${d.id}? It cannot be retried afterwards.`,
      "drop 1 dead letter", () => deadOp("drop", [d.id])));
    const tr = el("tr", "", el("td", "mono", d.id), el("td", "", d.kind), el("td", "", d.attempts), el("td", "", d.reason), el("td", "", retry, " ", drop));
    tr.dataset.dead = d.id;
    tb.append(tr);
  }
}

// fmtAgo says how long ago t was ("" for never).
function fmtAgo(t) {
  const d = new Date(t);
  if (!t || isNaN(d) || d.getFullYear() < 2000) return "";
  const s = Math.max(0, Math.round((Date.now() - d) / 1000));
  return s < 120 ? `${s}s ago` : s < 7200 ? `${Math.round(s / 60)}m ago` : fmtTime(t);
}

// showDelivery renders the delivery health: whether delivery runs (only
// while some node makes progress), and each delivery node.
function showDelivery(h) {
  const sum = $("q-summary");
  const tb = $("q-nodes");
  tb.replaceChildren();
  if (!h || h.error) {
    sum.textContent = `delivery health unknown: ${h ? h.error : ""}`;
    sum.className = "summary stalled";
    sum.dataset.state = "unknown";
    return;
  }
  sum.textContent = h.summary.text;
  sum.className = "summary " + h.summary.state;
  sum.dataset.state = h.summary.state;
  for (const n of h.nodes) {
    const stateCell = el("td", "st-" + n.state.replace(/ /g, "-"), n.state);
    if (n.note) stateCell.title = n.note;
    const err = n.last_error ? `${n.last_error} (${fmtAgo(n.last_error_at)})` : "";
    const tr = el("tr", "", el("td", "mono", n.node || "this node"), stateCell, el("td", "", n.answered ? n.in_flight : "?"),
      el("td", "", fmtAgo(n.last_success)), el("td", "", err), el("td", "", n.rate.toFixed(1) + "/s"));
    tr.dataset.node = n.node;
    tr.dataset.state = n.state;
    tb.append(tr);
  }
}

// confirmThen asks in the page (never a browser dialog) before a
// destructive action: text says what and how many; label is the button.
function confirmThen(text, label, action) {
  const box = $("confirm");
  $("confirm-text").textContent = text;
  const yes = $("confirm-yes");
  yes.textContent = label;
  box.hidden = false;
  const done = () => { box.hidden = true; yes.onclick = null; $("confirm-no").onclick = null; };
  yes.onclick = () => { done(); action(); };
  $("confirm-no").onclick = done;
  yes.focus();
}

// showCluster says, under the queue, whether the cluster engine is
// reachable and how much redundancy it has left: "degraded" names the
// streams with fewer current replicas than configured, and those whose
// leader does not answer, so that an operator acts before one more
// failure costs the quorum.
function showCluster(cl) {
  const p = $("q-cluster");
  p.hidden = !cl;
  if (!cl) return;
  const streams = cl.streams || [];
  const short = streams.filter((s) => s.current < s.replicas)
    .map((s) => `${s.name} ${s.current} of ${s.replicas} replicas current` + (s.lagging && s.lagging.length ? ` (${s.lagging.join(", ")} behind)` : ""));
  const stalled = (cl.stalled || []).map((n) => `${n}: leader does not answer`);
  let text = `cluster ${cl.name}: ${cl.up ? "up" : "down"}`;
  if (cl.degraded) text += "; degraded: " + short.concat(stalled).join("; ");
  else if (streams.length) text += `; ${streams.length} streams, every replica current`;
  p.textContent = text;
  p.dataset.degraded = String(!!cl.degraded);
  p.className = cl.degraded || !cl.up ? "warn" : "muted";
}

async function deadOp(op, ids) {
  try {
    await api("POST", "spool/dead/" + op, {}, ids ? { ids } : { all: true });
    await loadStatus();
  } catch (e) { showError(e); }
}

async function pause(on) {
  try { await api("POST", on ? "spool/pause" : "spool/resume", {}); await loadStatus(); } catch (e) { showError(e); }
}

async function loadLockouts() {
  const locks = await api("GET", "lockouts", { limit: 200 });
  const tb = $("lockouts");
  tb.replaceChildren();
  for (const l of locks) {
    const b = el("button", "", "lift"); b.type = "button"; b.dataset.lift = l.address;
    b.addEventListener("click", async () => {
      try { await api("DELETE", "lockouts/" + encodeURIComponent(l.address), {}); await loadLockouts(); } catch (e) { showError(e); }
    });
    tb.append(el("tr", "", el("td", "mono", l.address), el("td", "", new Date(l.until).toISOString()), el("td", "", b)));
  }
  $("l-none").hidden = locks.length > 0;
}

// ---- rates ----
function drawChart(canvas, series, max) {
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth, h = canvas.clientHeight;
  canvas.width = Math.max(1, Math.round(w * dpr));
  canvas.height = Math.max(1, Math.round(h * dpr));
  const g = canvas.getContext("2d");
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, w, h);
  const top = Math.max(max, 1e-9) * 1.1;
  g.strokeStyle = "#eaeef2"; g.lineWidth = 1;
  g.fillStyle = "#656d76"; g.font = "10px system-ui, sans-serif";
  for (let i = 0; i <= 2; i++) {
    const y = h - 12 - (h - 20) * i / 2;
    g.beginPath(); g.moveTo(30, y); g.lineTo(w, y); g.stroke();
    g.fillText((top * i / 2).toPrecision(2), 0, y + 3);
  }
  g.fillText("-60m", 30, h - 1); g.fillText("now", w - 20, h - 1);
  for (const s of series) {
    g.strokeStyle = s.color; g.lineWidth = 1.5; g.beginPath();
    s.values.forEach((v, i) => {
      const x = 30 + (w - 30) * i / (s.values.length - 1);
      const y = h - 12 - (h - 20) * (v / top);
      if (i) g.lineTo(x, y); else g.moveTo(x, y);
    });
    g.stroke();
  }
}

const css = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();

async function loadRates() {
  const r = await api("GET", "events/rates", evq({}));
  if (r.nodes) showNodes(r.nodes);
  const last = (a) => { for (let i = a.length - 1; i >= a.length - 6 && i >= 0; i--) if (a[i]) return a[i]; return 0; };
  // the current step is still filling: show the previous one
  const n = r.accepted.length - 2;
  $("t-accepted").textContent = r.accepted[n].toFixed(1);
  $("t-rejected").textContent = r.rejected[n].toFixed(1);
  $("t-locked").textContent = r.locked[n].toFixed(1);
  $("t-latency").textContent = last(r.latency_avg_ms).toFixed(1);
  const maxRate = Math.max(...r.accepted, ...r.rejected, ...r.locked);
  drawChart($("chart-rates"), [
    { values: r.accepted, color: css("--acc") }, { values: r.rejected, color: css("--rej") }, { values: r.locked, color: css("--lock") },
  ], maxRate);
  drawChart($("chart-latency"), [
    { values: r.latency_avg_ms, color: css("--avg") }, { values: r.latency_max_ms, color: css("--max") },
  ], Math.max(...r.latency_max_ms));
}

// ---- wiring ----
async function refresh() {
  try {
    await Promise.all([loadStatus(), loadLockouts(), loadRates()]);
    showError(null);
  } catch (e) { showError(e); }
}

async function switchHandler() {
  state.selected = "";
  $("detail").hidden = true;
  $("d-empty").hidden = false;
  $("d-id").textContent = "";
  try {
    await loadEvents(false);
  } catch (e) { showError(e); }
  startStream();
  await refresh();
}

async function main() {
  $("filters").addEventListener("submit", (ev) => {
    ev.preventDefault();
    state.filter = { hook: $("f-hook").value.trim(), status: $("f-status").value, reason: $("f-reason").value.trim(), node: $("f-node").value.trim() };
    switchHandler();
  });
  $("handler").addEventListener("change", async () => {
    state.path = $("handler").value;
    try { await loadHandlers(); } catch (e) { showError(e); }
    switchHandler();
  });
  $("scope").addEventListener("change", () => { state.scope = $("scope").value; showNodes(null); switchHandler(); });
  $("more").addEventListener("click", () => loadEvents(true).catch(showError));
  $("replay").addEventListener("click", replay);
  $("pause").addEventListener("click", () => pause(true));
  $("resume").addEventListener("click", () => pause(false));
  $("retry-all").addEventListener("click", () => deadOp("retry", null));
  $("drop-all").addEventListener("click", () => {
    const n = state.deadCount;
    confirmThen(`Drop all ${n} dead letter${n === 1 ? "" : "s"}? They cannot be retried afterwards.`,
      `drop all ${n}`, () => deadOp("drop", null));
  });
  try {
    await loadHandlers();
  } catch (e) { showError(e); return; }
  await switchHandler();
  setInterval(refresh, 3000);
  document.body.dataset.ready = "1";
}

main();
