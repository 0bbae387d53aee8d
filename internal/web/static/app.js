// weir dashboard: a single-page application over weir's Flink-shaped REST
// API. Plain JavaScript, no framework, no build step. Pages are hash routes;
// each page has mount (builds its skeleton once) and refresh (fetches and
// redraws its data), and refresh runs again at the interval chosen in the
// top bar (off, 1 s, 3 s, 10 s; kept in localStorage), or else the one
// GET /config reports (3 s by default), without reloading the page.
"use strict";

const SVGNS = "http://www.w3.org/2000/svg";
const TOKEN_KEY = "weir.token";
const REFRESH_KEY = "weir.refresh"; // localStorage: the chosen refresh interval in ms, "0" for off
const REFRESH_CHOICES = [0, 1000, 3000, 10000];
const MAX_KEPT_CHECKPOINTS = 200; // per job, for the charts

const app = {
  refreshMs: 3000,  // the interval in use; 0: no automatic refresh
  serverRefreshMs: 3000, // GET /config's refresh-interval, used when none was chosen
  token: sessionStorage.getItem(TOKEN_KEY) || "",
  page: null,       // the current page: {refresh()}
  generation: 0,    // bumped at every route change; stale answers are dropped
  timer: null,
  refreshing: false, // a refresh is in flight
  again: false,      // a tick was asked for during it
  rates: new Map(), // job id -> {now, vertices: Map(id -> metrics)} of the previous poll
  seen: new Map(),  // job id -> Map(checkpoint id -> statistics) seen while the page was open
  ops: new Map(),   // job id -> the operation in progress or last finished
};

// --- DOM helpers ---------------------------------------------------------------

// el builds an element: attrs sets attributes (class, text, on* listeners,
// others verbatim; null and false skip), children are nodes or strings.
function el(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

function svg(tag, attrs, ...children) {
  return build(document.createElementNS(SVGNS, tag), attrs, children);
}

function build(node, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function $(id) { return document.getElementById(id); }

// fill makes the children of the element (or element id) equal to children,
// changing only what differs (morph): a refresh then neither flickers nor
// loses the user's text selection, hover or a click in progress. Filled
// content carries no event listeners (they could not be compared); pages
// listen on their containers instead.
function fill(id, ...children) {
  const node = typeof id === "string" ? $(id) : id;
  if (!node) return;
  const list = children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false)
    .map((c) => (c instanceof Node ? c : document.createTextNode(String(c))));
  morphChildren(node, list);
}

function morphChildren(parent, children) {
  const old = [...parent.childNodes];
  children.forEach((c, i) => (i < old.length ? morph(old[i], c) : parent.append(c)));
  for (const extra of old.slice(children.length)) extra.remove();
}

function morph(from, to) {
  if (from.nodeType !== to.nodeType || from.nodeName !== to.nodeName || from.nodeType !== Node.ELEMENT_NODE && from.nodeType !== Node.TEXT_NODE) {
    from.replaceWith(to);
    return;
  }
  if (from.nodeType === Node.TEXT_NODE) {
    if (from.data !== to.data) from.data = to.data;
    return;
  }
  for (const a of [...from.attributes]) {
    if (a.name === "open" && from.nodeName === "DETAILS") continue; // the user opened it
    if (!to.hasAttribute(a.name)) from.removeAttribute(a.name);
  }
  for (const a of [...to.attributes]) {
    if (from.getAttribute(a.name) === a.value) continue;
    if (a.name === "style") from.style.cssText = to.style.cssText; // CSSOM: the CSP blocks style attributes
    else from.setAttribute(a.name, a.value);
  }
  morphChildren(from, [...to.childNodes]);
}

// --- formatting ------------------------------------------------------------------

const pad2 = (n) => String(n).padStart(2, "0");

function fmtTime(ms) {
  if (ms === undefined || ms === null || ms < 0) return "—";
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad2(d.getMonth() + 1)}-${pad2(d.getDate())} ${pad2(d.getHours())}:${pad2(d.getMinutes())}:${pad2(d.getSeconds())}`;
}

function fmtClock(ms) {
  const d = new Date(ms);
  return `${pad2(d.getHours())}:${pad2(d.getMinutes())}:${pad2(d.getSeconds())}`;
}

function fmtDuration(ms) {
  if (ms === undefined || ms === null || ms < 0) return "—";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
  const s = Math.floor(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)}m ${pad2(s % 60)}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${pad2(Math.floor(s / 60) % 60)}m`;
  return `${Math.floor(s / 86400)}d ${pad2(Math.floor(s / 3600) % 24)}h`;
}

// bytesCell shows a vertex's exchanged bytes, or a dash when they are not
// counted (the "-complete" flag is false: the local runtime passes records
// between tasks in memory, unserialized).
function bytesCell(n, complete) {
  if (!complete) {
    return el("td", { class: "num muted", text: "–", title: "not counted: records are exchanged in memory, unserialized" });
  }
  return el("td", { class: "num", text: fmtBytes(n) });
}

function fmtBytes(n) {
  if (n === undefined || n === null || n < 0) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return i === 0 ? `${n} B` : `${n.toFixed(n < 10 ? 2 : 1)} ${units[i]}`;
}

function fmtCount(n) {
  if (n === undefined || n === null) return "—";
  return Math.round(n).toLocaleString("en-US");
}

// fmtRate is a per-second figure with an SI suffix: 950, 12.3k, 4.56M.
function fmtRate(n) {
  if (n === undefined || n === null || !isFinite(n)) return "—";
  const abs = Math.abs(n);
  if (abs < 1000) return abs < 10 && abs !== 0 && !Number.isInteger(n) ? n.toFixed(1) : String(Math.round(n));
  for (const [div, suffix] of [[1e9, "G"], [1e6, "M"], [1e3, "k"]]) {
    if (abs >= div) return `${(n / div).toFixed(n / div < 10 ? 2 : 1)}${suffix}`;
  }
  return String(n);
}

function fmtPercent(r) { return `${Math.round((r || 0) * 100)}%`; }

function badge(status, extraClass) {
  return el("span", { class: `badge ${status}${extraClass ? " " + extraClass : ""}`, text: status.replace("_", " ") });
}

// --- API -------------------------------------------------------------------------

class APIError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

// api calls the REST API at a path relative to the page (so that a reverse
// proxy may mount it under a prefix) and returns the decoded JSON.
async function api(path, { method = "GET", body } = {}) {
  const headers = { Accept: "application/json" };
  if (app.token) headers.Authorization = `Bearer ${app.token}`;
  // The server refuses a state-changing request without this header (a
  // cross-site form cannot send it), even when it has no body.
  if (body !== undefined || method !== "GET") headers["Content-Type"] = "application/json";
  let resp;
  try {
    resp = await fetch(path, { method, headers, cache: "no-store", body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (e) {
    throw new APIError(0, `cannot reach the JobManager (${e.message}): is the job still running?`);
  }
  const text = await resp.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = null; }
  }
  if (!resp.ok) {
    const msg = data && Array.isArray(data.errors) ? data.errors.join("; ") : `${resp.status} ${resp.statusText}`;
    throw new APIError(resp.status, msg);
  }
  return data;
}

const enc = encodeURIComponent;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// --- the poll loop -------------------------------------------------------------------

function showBanner(message) {
  const b = $("banner");
  if (!message) { b.hidden = true; b.textContent = ""; return; }
  b.textContent = message;
  b.hidden = false;
}

function setLive(ok, text) {
  const live = $("live");
  live.className = `live ${ok ? "ok" : "error"}`;
  live.textContent = text;
}

function reportError(e) {
  if (e instanceof APIError && e.status === 401) {
    if ($("banner").hidden) $("token").focus(); // once, not at every refresh
    showBanner("The REST API needs a bearer token: enter it in the API token field at the top right.");
  } else {
    showBanner(e.message || String(e));
  }
  setLive(false, "not updating");
}

// tick refreshes the current page and schedules the next refresh. One
// refresh runs at a time: a tick asked for meanwhile (an action's
// refreshNow, a route change) runs as soon as it ends, so that the poll
// loops never multiply.
async function tick(gen) {
  if (gen !== app.generation) return;
  if (app.refreshing) { app.again = true; return; }
  clearTimeout(app.timer);
  if (document.hidden) return; // resumed by visibilitychange
  app.refreshing = true;
  try {
    await app.page.refresh(gen);
    if (gen === app.generation) {
      showBanner("");
      setLive(true, `${app.refreshMs > 0 ? "live" : "updated"} · ${fmtClock(Date.now())}`);
    }
  } catch (e) {
    if (gen === app.generation) reportError(e);
  } finally {
    app.refreshing = false;
    if (app.again) {
      app.again = false;
      tick(app.generation);
    } else if (gen === app.generation && app.refreshMs > 0) {
      app.timer = setTimeout(() => tick(gen), app.refreshMs);
    }
  }
}

// refreshNow redraws the current page at once (after an action).
function refreshNow() { tick(app.generation); }

// stale reports whether the route changed since the page asked for data.
const stale = (gen) => gen !== app.generation;

// --- routing -----------------------------------------------------------------------------

function route(ev) {
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter((p) => p !== "").map(decodeURIComponent);
  app.generation++;
  clearTimeout(app.timer);
  let page;
  if (parts.length === 0) page = overviewPage();
  else if (parts[0] === "jobs" && parts.length === 2) page = jobPage(parts[1], "graph");
  else if (parts[0] === "jobs" && parts.length === 3 && parts[2] === "checkpoints") page = jobPage(parts[1], "checkpoints");
  else if (parts[0] === "jobs" && parts.length === 3 && parts[2] === "exceptions") page = jobPage(parts[1], "exceptions");
  else if (parts[0] === "jobs" && parts.length === 4 && parts[2] === "checkpoints" && /^\d+$/.test(parts[3])) page = jobPage(parts[1], "checkpoint", Number(parts[3]));
  else page = notFoundPage();
  app.page = page;
  $("main").replaceChildren(page.root);
  document.title = `${page.title} · weir`;
  if (ev) $("main").focus({ preventScroll: true }); // screen readers start at the new page
  if (ev) window.scrollTo(0, 0);
  tick(app.generation);
}

function notFoundPage() {
  return {
    title: "Not found",
    root: el("section", { class: "panel" }, el("h1", { text: "No such page" }), el("p", {}, "Go to the ", el("a", { href: "#/", text: "jobs overview" }), ".")),
    refresh: async () => {},
  };
}

// --- the jobs overview -------------------------------------------------------------------

function overviewPage() {
  const root = el("div", {},
    el("h1", { text: "Jobs" }),
    el("div", { class: "cards", id: "cluster" }),
    el("section", { class: "panel", id: "jobmanagers", hidden: true },
      el("h2", {}, "JobManagers", el("span", { class: "muted", id: "ha-summary" })),
      el("div", { class: "table-wrap" }, el("table", { id: "jobmanagers-table" },
        el("thead", {}, el("tr", {},
          el("th", { text: "Role" }), el("th", { text: "Name" }), el("th", { text: "RPC address" }),
          el("th", { text: "REST" }), el("th", { class: "num", text: "Since" }))),
        el("tbody", { id: "jobmanagers-body" })))),
    el("section", { class: "panel" },
      el("h2", {}, "All jobs", el("span", { class: "muted", id: "jobs-count" })),
      el("div", { class: "table-wrap" }, el("table", { id: "jobs-table" },
        el("thead", {}, el("tr", {},
          el("th", { text: "Name" }), el("th", { text: "Job id" }), el("th", { text: "Status" }),
          el("th", { class: "num", text: "Start" }), el("th", { class: "num", text: "End" }), el("th", { class: "num", text: "Duration" }),
          el("th", { class: "num", text: "Tasks" }), el("th", { text: "Tasks by status" }))),
        el("tbody", { id: "jobs-body", onclick: (ev) => {
          const row = ev.target.closest("tr[data-href]");
          if (row && ev.target.tagName !== "A") location.hash = row.dataset.href;
        } })))));
  return {
    title: "Jobs",
    root,
    async refresh(gen) {
      const [overview, jobs] = await Promise.all([api("overview"), api("jobs/overview")]);
      if (stale(gen)) return;
      fill("cluster",
        card("Running jobs", overview["jobs-running"], "", overview["jobs-running"] > 0 ? "ok" : ""),
        card("Finished", overview["jobs-finished"]),
        card("Cancelled", overview["jobs-cancelled"]),
        card("Failed", overview["jobs-failed"], "", overview["jobs-failed"] > 0 ? "bad" : ""),
        card("TaskManagers", overview.taskmanagers),
        card("Slots", `${overview["slots-available"]}/${overview["slots-total"]}`, "available / total"));
      fillJobManagers(overview["high-availability"]);
      $("jobs-count").textContent = `${jobs.jobs.length} job${jobs.jobs.length === 1 ? "" : "s"}`;
      // Running jobs first, then the most recent (as Flink's overview).
      const ended = (j) => ["FINISHED", "CANCELED", "FAILED"].includes(j.state);
      const sorted = [...jobs.jobs].sort((a, b) => (ended(a) - ended(b)) || (b["start-time"] - a["start-time"]));
      const rows = sorted.map((j) => {
        const href = `#/jobs/${enc(j.jid)}`;
        const counts = Object.entries(j.tasks).filter(([k, v]) => k !== "total" && v > 0);
        return el("tr", { class: "link-row", "data-job-id": j.jid, "data-href": href },
          el("td", {}, el("a", { href, text: j.name || j.jid })),
          el("td", { class: "mono", text: j.jid }),
          el("td", {}, badge(j.state)),
          el("td", { class: "num", text: fmtTime(j["start-time"]) }),
          el("td", { class: "num", text: fmtTime(j["end-time"]) }),
          el("td", { class: "num", text: fmtDuration(j.duration) }),
          el("td", { class: "num", text: fmtCount(j.tasks.total) }),
          el("td", {}, counts.map(([k, v]) => el("span", { class: `badge ${k.toUpperCase()}`, text: `${v} ${k}` }, " "))));
      });
      fill("jobs-body", rows.length ? rows : el("tr", {}, el("td", { colspan: 8, class: "empty-note", text: "No jobs yet." })));
    },
  };
}

// fillJobManagers shows the leader and the standbys of a JobManager with
// high availability (GET /overview's "high-availability"); the panel stays
// hidden without it.
function fillJobManagers(ha) {
  $("jobmanagers").hidden = !ha;
  if (!ha) return;
  $("ha-summary").textContent = ` ${ha.type}, cluster ${ha["cluster-id"]}, leadership revision ${ha["leader-revision"]}` +
    (ha["fenced-writes"] > 0 ? `, ${ha["fenced-writes"]} fenced writes` : "") +
    (ha["failed-writes"] > 0 ? `, ${ha["failed-writes"]} failed writes` : "");
  const row = (role, m) => el("tr", { "data-role": role, "data-name": m.name },
    el("td", {}, el("span", { class: `badge ${role === "leader" ? "RUNNING" : "CREATED"}`, text: role })),
    el("td", { class: "mono", text: m.name }),
    el("td", { class: "mono", text: m["rpc-address"] }),
    el("td", {}, m["rest-url"] ? el("a", { href: m["rest-url"], text: m["rest-url"] }) : "–"),
    el("td", { class: "num", text: fmtTime(m.since) }));
  const rows = [];
  if (ha.leader && ha.leader.name) rows.push(row("leader", ha.leader));
  for (const s of ha.standbys || []) rows.push(row("standby", s));
  fill("jobmanagers-body", rows.length ? rows : el("tr", {}, el("td", { colspan: 5, class: "empty-note", text: "No leader elected." })));
}

function card(label, value, sub, cls) {
  return el("div", { class: `card ${cls || ""}` },
    el("div", { class: "label", text: label }),
    el("div", { class: "value", text: value === undefined ? "—" : String(value) }),
    sub ? el("div", { class: "sub", text: sub }) : null);
}

// --- a job: header, tabs, actions -------------------------------------------------------------

function jobPage(jobId, tab, checkpointId) {
  const base = `#/jobs/${enc(jobId)}`;
  const tabs = [["graph", "Overview", base], ["checkpoints", "Checkpoints", `${base}/checkpoints`], ["exceptions", "Exceptions", `${base}/exceptions`]];
  const body = el("div", { id: "job-body" });
  const root = el("div", {},
    el("p", { class: "muted" }, el("a", { href: "#/", text: "Jobs" }), " / ", el("span", { class: "mono", text: jobId })),
    el("div", { class: "job-head" },
      el("div", {}, el("div", { class: "title" }, el("h1", { id: "job-name", text: jobId }), el("span", { id: "job-status" }))),
      el("dl", { class: "kv", id: "job-facts" })),
    actionBar(jobId),
    el("nav", { class: "tabs", "aria-label": "Job" },
      tabs.map(([key, label, href]) => el("a", { href, "aria-current": (key === tab || (key === "checkpoints" && tab === "checkpoint")) ? "page" : null, text: label }))),
    body);
  const sub = { graph: graphView, checkpoints: checkpointsView, checkpoint: checkpointView, exceptions: exceptionsView }[tab](jobId, checkpointId);
  body.append(sub.root);
  return {
    title: `${jobId} ${tab}`,
    root,
    async refresh(gen) {
      const job = await api(`jobs/${enc(jobId)}`);
      if (stale(gen)) return;
      renderJobHead(job);
      await sub.refresh(gen, job);
    },
  };
}

function renderJobHead(job) {
  $("job-name").textContent = job.name || job.jid;
  fill("job-status", badge(job.state));
  const facts = [["Job id", job.jid], ["Start", fmtTime(job["start-time"])], ["Duration", fmtDuration(job.duration)],
    ["End", fmtTime(job["end-time"])], ["Checkpoints", `${job.checkpoints.completed} completed, ${job.checkpoints.failed} failed`],
    ["Vertices", String(job.vertices.length)]];
  fill("job-facts", facts.map(([k, v]) => [el("dt", { text: k }), el("dd", { text: v })]));
  const ended = ["FINISHED", "CANCELED", "FAILED"].includes(job.state);
  const busy = app.ops.get(job.jid)?.state === "running";
  for (const id of ["trigger-checkpoint", "trigger-savepoint"]) $(id).disabled = ended || busy;
  $("cancel-job").disabled = ended || job.state === "CANCELLING";
}

function actionBar(jobId) {
  const dir = el("input", { type: "text", id: "savepoint-dir", placeholder: "the job's savepoint directory", spellcheck: "false" });
  // The job's default savepoint directory, as a hint.
  api(`jobs/${enc(jobId)}/checkpoints/config`).then((c) => { if (c.savepoint_dir) dir.placeholder = c.savepoint_dir; }).catch(() => {});
  const status = el("div", { id: "op-status", class: "op-status", role: "status", "aria-live": "polite", "data-job-id": jobId });
  const bar = el("section", { class: "panel", "aria-label": "Actions" },
    el("div", { class: "actions" },
      el("button", { id: "trigger-checkpoint", class: "primary", type: "button", onclick: () => runOperation(jobId, "checkpoint") }, "Trigger checkpoint"),
      el("span", { class: "sep" }),
      el("label", { for: "savepoint-dir", text: "Savepoint directory" }), dir,
      el("button", { id: "trigger-savepoint", type: "button", onclick: () => runOperation(jobId, "savepoint", dir.value.trim()) }, "Take savepoint"),
      el("span", { class: "sep" }),
      el("button", { id: "cancel-job", class: "danger", type: "button", onclick: () => confirmCancel(jobId) }, "Cancel job")),
    status);
  queueMicrotask(() => renderOp(jobId)); // once the page is in the document
  return bar;
}

// runOperation triggers a checkpoint or savepoint, then polls its trigger
// id until the operation completes, showing progress meanwhile.
async function runOperation(jobId, kind, dir) {
  const op = { kind, state: "running", started: Date.now(), message: "" };
  app.ops.set(jobId, op);
  renderOp(jobId);
  const ticker = setInterval(() => renderOp(jobId), 100);
  try {
    const collection = kind === "checkpoint" ? "checkpoints" : "savepoints";
    const body = kind === "checkpoint" ? {} : (dir ? { "target-directory": dir } : {});
    const trigger = await api(`jobs/${enc(jobId)}/${collection}`, { method: "POST", body });
    op.requestId = trigger["request-id"];
    for (;;) {
      const result = await api(`jobs/${enc(jobId)}/${collection}/${enc(op.requestId)}`);
      if (result.status.id === "COMPLETED") {
        const o = result.operation || {};
        if (o["failure-cause"]) {
          op.state = "failed";
          op.message = o["failure-cause"]["stack-trace"] || o["failure-cause"].class;
        } else {
          op.state = "completed";
          op.checkpointId = o.checkpointId;
          op.location = o.location;
        }
        break;
      }
      await sleep(200);
    }
  } catch (e) {
    op.state = "failed";
    op.message = e.message;
  } finally {
    op.ended = Date.now();
    clearInterval(ticker);
    renderOp(jobId);
    refreshNow();
  }
}

function renderOp(jobId) {
  const box = $("op-status");
  if (!box || box.dataset.jobId !== jobId) return; // another page is shown
  const op = app.ops.get(jobId);
  if (!op) { box.className = "op-status"; box.replaceChildren(); return; }
  const what = op.kind === "checkpoint" ? "Checkpoint" : "Savepoint";
  const took = fmtDuration((op.ended || Date.now()) - op.started);
  box.className = `op-status ${op.state}`;
  box.dataset.state = op.state;
  box.dataset.kind = op.kind;
  if (op.checkpointId !== undefined) box.dataset.checkpointId = op.checkpointId;
  else delete box.dataset.checkpointId;
  if (op.state === "running") {
    fill(box, el("progress", { "aria-label": `${what} in progress` }), `${what} in progress… ${took}`);
  } else if (op.state === "completed") {
    const link = op.checkpointId !== undefined
      ? el("a", { href: `#/jobs/${enc(jobId)}/checkpoints/${op.checkpointId}`, text: `${what} ${op.checkpointId}` })
      : what;
    fill(box, "✓ ", link, ` completed (${took})`, op.location ? [" at ", el("span", { class: "mono", text: op.location })] : null);
  } else {
    fill(box, `✗ ${what} failed: ${op.message}`);
  }
  for (const id of ["trigger-checkpoint", "trigger-savepoint"]) if (op.state === "running") $(id).disabled = true;
}

function confirmCancel(jobId) {
  const dialog = $("confirm");
  $("confirm-text").textContent = `Job ${jobId} stops at once, without a savepoint. Its completed checkpoints are kept only if the job retains them on cancellation.`;
  dialog.returnValue = "";
  dialog.onclose = async () => {
    if (dialog.returnValue !== "cancel") return;
    try {
      await api(`jobs/${enc(jobId)}?mode=cancel`, { method: "PATCH" });
      fill("op-status", "Cancellation requested.");
    } catch (e) {
      fill("op-status", `✗ Cancel failed: ${e.message}`);
    }
    refreshNow();
  };
  dialog.showModal();
}

// --- the job graph --------------------------------------------------------------------------------

function graphView(jobId) {
  const root = el("div", {},
    el("section", { class: "panel" },
      el("h2", {}, "Job graph", el("span", { class: "muted", text: "vertices in topological order; records per second over the last refresh" })),
      el("div", { class: "graph-wrap", id: "graph" }),
      el("div", { class: "legend" }, "Backpressure:",
        el("span", {}, el("span", { class: "swatch sw-ok" }), "ok (≤ 10%)"),
        el("span", {}, el("span", { class: "swatch sw-low" }), "low (≤ 50%)"),
        el("span", {}, el("span", { class: "swatch sw-high" }), "high"))),
    el("section", { class: "panel" },
      el("h2", { text: "Vertices" }),
      el("div", { class: "table-wrap" }, el("table", { id: "vertices-table" },
        el("thead", {}, el("tr", {},
          el("th", { text: "Vertex" }), el("th", { text: "Status" }), el("th", { class: "num", text: "Parallelism" }),
          el("th", { class: "num", text: "Records in" }), el("th", { class: "num", text: "Records out" }),
          el("th", { class: "num", text: "In /s" }), el("th", { class: "num", text: "Out /s" }),
          el("th", { class: "num", text: "Bytes in" }), el("th", { class: "num", text: "Bytes out" }),
          el("th", { text: "Backpressure" }), el("th", { class: "num", text: "Duration" }))),
        el("tbody", { id: "vertices-body" })))),
    el("section", { class: "panel" },
      el("h2", {}, "Operators", el("span", { class: "muted", text: "every operator of each chain, summed over its subtasks" })),
      el("div", { class: "table-wrap" }, el("table", { id: "operators-table" },
        el("thead", {}, el("tr", {},
          el("th", { text: "Vertex" }), el("th", { text: "Operator" }),
          el("th", { class: "num", text: "Records in" }), el("th", { class: "num", text: "Records out" }))),
        el("tbody", { id: "operators-body" })))),
    el("section", { class: "panel" },
      el("h2", {}, "Subtasks", el("span", { class: "muted", text: "where each subtask of the current attempt runs" })),
      el("div", { class: "table-wrap" }, el("table", { id: "subtasks-table" },
        el("thead", {}, el("tr", {},
          el("th", { text: "Vertex" }), el("th", { class: "num", text: "Subtask" }), el("th", { text: "Status" }),
          el("th", { class: "num", text: "Attempt" }), el("th", { text: "TaskManager" }), el("th", { text: "Endpoint" }),
          el("th", { text: "Start" }), el("th", { class: "num", text: "Duration" }))),
        el("tbody", { id: "subtasks-body" })))));
  return {
    root,
    async refresh(gen, job) {
      // Each vertex's subtasks, with the TaskManager that runs each.
      const details = await Promise.all(job.vertices.map((v) => api(`jobs/${enc(jobId)}/vertices/${enc(v.id)}`)));
      if (stale(gen)) return;
      fill("subtasks-body", details.flatMap((d) => d.subtasks.map((s) =>
        el("tr", { "data-vertex-id": d.id, "data-subtask": s.subtask, "data-taskmanager-id": s["taskmanager-id"] },
          el("td", { text: s.subtask === 0 ? d.name : "" }),
          el("td", { class: "num", text: `${s.subtask + 1}/${d.parallelism}` }),
          el("td", {}, badge(s.status)),
          el("td", { class: "num", text: s.attempt }),
          el("td", { class: "mono", text: s["taskmanager-id"] }),
          el("td", { class: "mono", text: s.endpoint }),
          el("td", { text: fmtTime(s["start-time"]) }),
          el("td", { class: "num", text: s["start-time"] < 0 ? "—" : fmtDuration(s.duration) })))));
      const rates = vertexRates(job);
      fill("graph", drawGraph(job, rates));
      fill("vertices-body", job.vertices.map((v) => {
        const r = rates.get(v.id) || {};
        const m = v.metrics;
        return el("tr", { "data-vertex-id": v.id },
          el("td", {}, v.name),
          el("td", {}, badge(v.status)),
          el("td", { class: "num", text: v.parallelism }),
          el("td", { class: "num", text: fmtCount(m["read-records"]) }),
          el("td", { class: "num", text: fmtCount(m["write-records"]) }),
          el("td", { class: "num", text: fmtRate(r.in) }),
          el("td", { class: "num", text: fmtRate(r.out) }),
          bytesCell(m["read-bytes"], m["read-bytes-complete"]),
          bytesCell(m["write-bytes"], m["write-bytes-complete"]),
          el("td", { class: "num" }, meter(v.backpressure), `${fmtPercent(v.backpressure.ratio)} ${v.backpressure["backpressure-level"]}`),
          el("td", { class: "num", text: fmtDuration(v.duration) }));
      }));
      fill("operators-body", job.vertices.flatMap((v) => (v.operators || []).map((o, i) =>
        el("tr", { "data-vertex-id": v.id, "data-operator-index": i },
          el("td", { text: i === 0 ? v.id : "" }),
          el("td", { text: o.name }),
          el("td", { class: "num", text: fmtCount(o["read-records"]) }),
          el("td", { class: "num", text: fmtCount(o["write-records"]) })))));
    },
  };
}

function meter(bp) {
  const bar = el("span");
  bar.style.width = fmtPercent(Math.min(1, bp.ratio || 0)); // CSSOM: allowed by the page's CSP, unlike style attributes
  return el("span", { class: `meter ${bp["backpressure-level"]}`, "aria-hidden": "true" }, bar);
}

// vertexRates turns the record counters of two successive polls into
// records per second. A counter that went down (the job restarted) has no
// rate until the next poll.
function vertexRates(job) {
  const prev = app.rates.get(job.jid);
  const cur = { now: job.now, vertices: new Map(job.vertices.map((v) => [v.id, v.metrics])) };
  const out = new Map();
  if (prev && cur.now > prev.now) {
    const dt = (cur.now - prev.now) / 1000;
    for (const v of job.vertices) {
      const p = prev.vertices.get(v.id);
      if (!p) continue;
      const din = v.metrics["read-records"] - p["read-records"];
      const dout = v.metrics["write-records"] - p["write-records"];
      out.set(v.id, { in: din >= 0 ? din / dt : undefined, out: dout >= 0 ? dout / dt : undefined });
    }
    cur.rates = out;
    app.rates.set(job.jid, cur);
  } else if (prev && prev.rates) {
    return prev.rates; // the same snapshot again: keep the last rates
  } else {
    app.rates.set(job.jid, cur);
  }
  return out;
}

// layoutGraph places vertices in columns by their depth (the longest path
// from a source), in the order the API lists them (topological) within a
// column.
function layoutGraph(nodes) {
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const depth = new Map();
  const visiting = new Set();
  const depthOf = (id) => {
    if (depth.has(id)) return depth.get(id);
    if (visiting.has(id) || !byId.has(id)) return 0; // a cycle or an unknown input: not a DAG, place it first
    visiting.add(id);
    let d = 0;
    for (const input of byId.get(id).inputs || []) d = Math.max(d, depthOf(input.id) + 1);
    visiting.delete(id);
    depth.set(id, d);
    return d;
  };
  const columns = [];
  for (const n of nodes) {
    const d = depthOf(n.id);
    (columns[d] ||= []).push(n.id);
  }
  return columns.filter((c) => c.length > 0); // filter skips the holes of depths no vertex has
}

function drawGraph(job, rates) {
  const nodes = job.plan.nodes;
  if (nodes.length === 0) return el("p", { class: "empty-note", text: "The job has no vertices." });
  const vertices = new Map(job.vertices.map((v) => [v.id, v]));
  const columns = layoutGraph(nodes);
  const W = 250, H = 104, GX = 110, GY = 30, PAD = 16;
  const rows = Math.max(...columns.map((c) => c.length));
  const width = PAD * 2 + columns.length * W + (columns.length - 1) * GX;
  const height = PAD * 2 + rows * H + (rows - 1) * GY;
  const pos = new Map();
  columns.forEach((col, ci) => {
    const top = PAD + ((rows - col.length) * (H + GY)) / 2;
    col.forEach((id, ri) => pos.set(id, { x: PAD + ci * (W + GX), y: top + ri * (H + GY) }));
  });
  const g = svg("svg", { class: "graph", id: "job-graph", width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": `Job graph of ${job.name}` },
    svg("defs", {}, svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
      svg("path", { d: "M0,0 L10,5 L0,10 z" }))));
  for (const n of nodes) {
    for (const input of n.inputs || []) {
      const a = pos.get(input.id), b = pos.get(n.id);
      if (!a || !b) continue;
      const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x - 2, y2 = b.y + H / 2;
      const mx = (x1 + x2) / 2;
      const label = input.ship_strategy || "";
      const lw = label.length * 6.8 + 10;
      g.append(svg("g", { class: "edge" },
        svg("path", { d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`, "marker-end": "url(#arrow)" }),
        label ? [svg("rect", { x: mx - lw / 2, y: (y1 + y2) / 2 - 9, width: lw, height: 16, rx: 3 }),
          svg("text", { x: mx, y: (y1 + y2) / 2 + 3, "text-anchor": "middle", text: label })] : null));
    }
  }
  for (const n of nodes) {
    const v = vertices.get(n.id);
    const p = pos.get(n.id);
    const bp = v ? v.backpressure : { "backpressure-level": "ok", ratio: 0 };
    const r = rates.get(n.id) || {};
    const name = v ? v.name : n.description;
    g.append(svg("g", { class: `vertex bp-${bp["backpressure-level"]}`, transform: `translate(${p.x},${p.y})`, "data-vertex-id": n.id },
      svg("title", { text: `${name}\nparallelism ${n.parallelism}\nbackpressure ${fmtPercent(bp.ratio)} (${bp["backpressure-level"]})` }),
      svg("rect", { class: "box", width: W, height: H, rx: 8 }),
      svg("rect", { class: "stripe", width: 6, height: H, rx: 3 }),
      svg("text", { class: "name", x: 16, y: 22, text: truncate(name, 30) }),
      svg("text", { class: "meta", x: 16, y: 41, text: `parallelism ${n.parallelism} · ${v ? v.status : "?"}` }),
      svg("text", { class: "figure", x: 16, y: 63, text: `in  ${fmtRate(r.in).padStart(7)} rec/s` }),
      svg("text", { class: "figure", x: 16, y: 79, text: `out ${fmtRate(r.out).padStart(7)} rec/s` }),
      svg("text", { class: "meta", x: 16, y: 96, text: `backpressure ${fmtPercent(bp.ratio)} · ${bp["backpressure-level"]}` })));
  }
  return g;
}

function truncate(s, n) { return s.length > n ? `${s.slice(0, n - 1)}…` : s; }

// --- checkpoints: counts, charts, history ---------------------------------------------------------

function checkpointsView(jobId) {
  const root = el("div", {},
    el("div", { class: "cards", id: "ckpt-counts" }),
    el("section", { class: "panel" },
      el("h2", {}, "History", el("span", { class: "muted", text: "durations and sizes over time, oldest to newest" })),
      el("div", { class: "charts" },
        el("div", { class: "chart" }, el("h3", { text: "End-to-end duration" }), el("div", { id: "chart-duration" })),
        el("div", { class: "chart" }, el("h3", { text: "Checkpointed size" }), el("div", { id: "chart-size" }))),
      el("div", { class: "legend" },
        el("span", {}, el("span", { class: "swatch sw-ck" }), "checkpoint"),
        el("span", {}, el("span", { class: "swatch sw-sav" }), "savepoint"),
        el("span", {}, el("span", { class: "swatch sw-fail" }), "failed"))),
    el("section", { class: "panel" },
      el("h2", { text: "Checkpoints" }),
      el("div", { class: "table-wrap" }, el("table", { id: "history-table" },
        el("thead", {}, el("tr", {},
          el("th", { class: "num", text: "Id" }), el("th", { text: "Status" }), el("th", { text: "Type" }),
          el("th", { text: "Triggered" }), el("th", { text: "Latest acknowledgement" }),
          el("th", { class: "num", text: "End to end" }), el("th", { class: "num", text: "Checkpointed size" }),
          el("th", { class: "num", text: "State size" }), el("th", { class: "num", text: "Acknowledged" }), el("th", { text: "Path or failure" }))),
        el("tbody", { id: "history-body" })))),
    el("div", { class: "charts" },
      el("section", { class: "panel" }, el("h2", { text: "Summary of completed checkpoints" }), el("div", { id: "ckpt-summary" })),
      el("section", { class: "panel" }, el("h2", { text: "Configuration" }), el("div", { id: "ckpt-config" }))));
  return {
    root,
    async refresh(gen) {
      const [stats, config] = await Promise.all([api(`jobs/${enc(jobId)}/checkpoints`), api(`jobs/${enc(jobId)}/checkpoints/config`)]);
      if (stale(gen)) return;
      const c = stats.counts;
      fill("ckpt-counts",
        card("Completed", c.completed, null, "ok"),
        card("Failed", c.failed, null, c.failed > 0 ? "bad" : ""),
        card("In progress", c.in_progress),
        card("Restored", c.restored, stats.latest.restored ? `from ${stats.latest.restored.id}` : ""),
        card("Latest completed", stats.latest.completed ? stats.latest.completed.id : "—",
          stats.latest.completed ? `${fmtDuration(stats.latest.completed.end_to_end_duration)}, ${fmtBytes(stats.latest.completed.checkpointed_size)} of ${fmtBytes(stats.latest.completed.state_size)}` : ""),
        card("Latest failure", stats.latest.failed ? stats.latest.failed.id : "—",
          stats.latest.failed ? truncate(stats.latest.failed.failure_message || "", 40) : ""));
      const history = remember(jobId, stats.history);
      fill("chart-duration", lineChart(history.filter((h) => h.status !== "IN_PROGRESS"),
        (h) => h.end_to_end_duration, fmtDuration, "end-to-end duration"));
      fill("chart-size", barChart(history.filter((h) => h.status === "COMPLETED"),
        (h) => h.checkpointed_size, fmtBytes, "checkpointed size"));
      const rows = stats.history.map((h) => el("tr", { "data-checkpoint-id": h.id, "data-status": h.status },
        el("td", { class: "num" }, el("a", { href: `#/jobs/${enc(jobId)}/checkpoints/${h.id}`, text: h.id })),
        el("td", {}, badge(h.status)),
        el("td", {}, h.is_savepoint ? badge("savepoint", "savepoint") : "checkpoint"),
        el("td", { class: "num", text: fmtTime(h.trigger_timestamp) }),
        el("td", { class: "num", text: fmtTime(h.latest_ack_timestamp) }),
        el("td", { class: "num", text: h.status === "IN_PROGRESS" ? "…" : fmtDuration(h.end_to_end_duration) }),
        el("td", { class: "num", text: fmtBytes(h.checkpointed_size) }),
        el("td", { class: "num", text: fmtBytes(h.state_size) }),
        el("td", { class: "num" }, h.status === "IN_PROGRESS"
          ? el("progress", { max: h.num_subtasks, value: h.num_acknowledged_subtasks, "aria-label": "acknowledged subtasks" }) : null,
          ` ${h.num_acknowledged_subtasks}/${h.num_subtasks}`),
        el("td", { class: "wrap mono", text: h.failure_message || h.external_path || "" })));
      fill("history-body", rows.length ? rows : el("tr", {}, el("td", { colspan: 10, class: "empty-note", text: "No checkpoints yet." })));
      const s = stats.summary;
      const statRow = (label, x, f) => el("tr", {}, el("td", { text: label }),
        ["min", "avg", "p50", "p99", "max"].map((k) => el("td", { class: "num", text: f(x[k]) })));
      fill("ckpt-summary", el("table", {},
        el("thead", {}, el("tr", {}, el("th", { text: "" }), ["min", "avg", "p50", "p99", "max"].map((k) => el("th", { class: "num", text: k })))),
        el("tbody", {},
          statRow("End-to-end duration", s.end_to_end_duration, fmtDuration),
          statRow("Checkpointed size", s.checkpointed_size, fmtBytes),
          statRow("State size", s.state_size, fmtBytes))));
      const facts = [
        ["Mode", config.mode], ["Interval", config.interval > 0 ? fmtDuration(config.interval) : "periodic checkpoints off"],
        ["Timeout", fmtDuration(config.timeout)], ["Minimum pause", fmtDuration(config.min_pause)],
        ["Maximum concurrent", config.max_concurrent], ["Tolerable failures", config.tolerable_failed_checkpoints],
        ["Retained", config.retained_checkpoints], ["Unaligned", config.unaligned_checkpoints ? "yes" : "no"],
        ["State backend", config.state_backend], ["Checkpoint storage", config.checkpoint_storage],
        ["Savepoint directory", config.savepoint_dir || "—"],
        ["Kept on cancel", config.externalization.enabled && !config.externalization.delete_on_cancellation ? "yes" : "no"]];
      fill("ckpt-config", el("dl", { class: "kv" }, facts.map(([k, v]) => [el("dt", { text: k }), el("dd", { text: String(v) })])));
    },
  };
}

// remember merges a poll's history (newest first) into what the page has
// seen of the job, so that the charts grow beyond the server's history
// window while the page is open. It returns the kept checkpoints by id.
function remember(jobId, history) {
  let seen = app.seen.get(jobId);
  if (!seen) app.seen.set(jobId, (seen = new Map()));
  for (const h of history) seen.set(h.id, h);
  const ids = [...seen.keys()].sort((a, b) => a - b);
  for (const id of ids.slice(0, Math.max(0, ids.length - MAX_KEPT_CHECKPOINTS))) seen.delete(id);
  return ids.slice(-MAX_KEPT_CHECKPOINTS).map((id) => seen.get(id));
}

// niceTicks returns about n round tick values from 0 to at least max.
function niceTicks(max, n) {
  if (!(max > 0)) return [0, 1];
  const raw = max / n;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw);
  const ticks = [];
  for (let i = 0; i * step < max + step * 0.999; i++) ticks.push(Number((i * step).toPrecision(12)));
  return ticks;
}

// byteTicks are niceTicks in powers of two, so that sizes read as 256 KiB.
function byteTicks(max, n) {
  if (!(max > 0)) return [0, 1];
  let step = 1;
  while (max / step > n) step *= 2;
  const ticks = [];
  for (let v = 0; v < max + step * 0.999; v += step) ticks.push(v);
  return ticks;
}

const CHART = { W: 620, H: 230, L: 70, R: 14, T: 12, B: 36 };

function chartFrame(points, value, fmt, ticksFn) {
  const { W, H, L, R, T, B } = CHART;
  const max = Math.max(0, ...points.map(value));
  const ticks = ticksFn(max, 4);
  const top = ticks[ticks.length - 1] || 1;
  const y = (v) => T + (H - T - B) * (1 - v / top);
  const root = svg("svg", { class: "chart-svg", viewBox: `0 0 ${W} ${H}`, role: "img" });
  root.append(svg("g", { class: "grid" }, ticks.map((t) => svg("line", { x1: L, x2: W - R, y1: y(t), y2: y(t) }))));
  root.append(svg("g", { class: "axis" },
    svg("line", { x1: L, x2: L, y1: T, y2: H - B }), svg("line", { x1: L, x2: W - R, y1: H - B, y2: H - B }),
    ticks.map((t) => svg("text", { x: L - 6, y: y(t) + 4, "text-anchor": "end", text: fmt(t) }))));
  return { root, y };
}

function xLabels(points, x) {
  const every = Math.max(1, Math.ceil(points.length / 10));
  return svg("g", { class: "axis" }, points.map((p, i) => (i % every === 0 || i === points.length - 1)
    ? svg("text", { x: x(i), y: CHART.H - CHART.B + 16, "text-anchor": "middle", text: `#${p.id}` }) : null),
  svg("text", { x: (CHART.L + CHART.W - CHART.R) / 2, y: CHART.H - 4, "text-anchor": "middle", text: "checkpoint id" }));
}

function emptyChart(what) {
  return svg("svg", { class: "chart-svg", viewBox: `0 0 ${CHART.W} ${CHART.H}`, role: "img", "aria-label": `no ${what} yet` },
    svg("text", { class: "empty", x: CHART.W / 2, y: CHART.H / 2, "text-anchor": "middle", text: "No completed checkpoints yet." }));
}

function pointClass(p) {
  return p.status === "FAILED" ? "failed" : p.is_savepoint ? "savepoint" : "";
}

function lineChart(points, value, fmt, what) {
  if (points.length === 0) return emptyChart(what);
  const { W, L, R } = CHART;
  const { root, y } = chartFrame(points, value, fmt, niceTicks);
  const x = (i) => points.length === 1 ? (L + W - R) / 2 : L + 12 + (i * (W - R - L - 24)) / (points.length - 1);
  root.setAttribute("aria-label", `${what} of the last ${points.length} checkpoints`);
  root.append(svg("path", { class: "series", d: points.map((p, i) => `${i ? "L" : "M"}${x(i).toFixed(1)},${y(value(p)).toFixed(1)}`).join(" ") }));
  root.append(svg("g", {}, points.map((p, i) => svg("circle", { class: `point ${pointClass(p)}`, cx: x(i), cy: y(value(p)), r: points.length > 60 ? 2.5 : 4 },
    svg("title", { text: `#${p.id} ${p.status.toLowerCase()}${p.is_savepoint ? " savepoint" : ""}: ${fmt(value(p))} at ${fmtTime(p.trigger_timestamp)}` })))));
  root.append(xLabels(points, x));
  return root;
}

function barChart(points, value, fmt, what) {
  if (points.length === 0) return emptyChart(what);
  const { W, H, L, R, B } = CHART;
  const { root, y } = chartFrame(points, value, fmt, byteTicks);
  const slot = (W - R - L) / points.length;
  const bw = Math.max(1, Math.min(36, slot * 0.7));
  const x = (i) => L + slot * (i + 0.5);
  root.setAttribute("aria-label", `${what} of the last ${points.length} completed checkpoints`);
  root.append(svg("g", {}, points.map((p, i) => svg("rect", { class: `bar ${pointClass(p)}`, x: x(i) - bw / 2, y: y(value(p)), width: bw, height: Math.max(0, H - B - y(value(p))) },
    svg("title", { text: `#${p.id}${p.is_savepoint ? " savepoint" : ""}: ${fmt(value(p))}` })))));
  root.append(xLabels(points, x));
  return root;
}

// --- one checkpoint: per-subtask timeline -------------------------------------------------------

function checkpointView(jobId, checkpointId) {
  const root = el("div", {},
    el("p", {}, el("a", { href: `#/jobs/${enc(jobId)}/checkpoints`, text: "← all checkpoints" })),
    el("section", { class: "panel" },
      el("h2", {}, `Checkpoint ${checkpointId}`, el("span", { id: "ckpt-badges" })),
      el("dl", { class: "kv", id: "ckpt-facts" })),
    el("section", { class: "panel" },
      el("h2", {}, "Timeline", el("span", { class: "muted", text: "per subtask, from the trigger to its acknowledgement" })),
      el("div", { class: "graph-wrap", id: "timeline" }),
      el("p", { class: "muted", id: "timeline-note" }),
      el("div", { class: "legend" },
        el("span", {}, el("span", { class: "swatch sw-delay" }), "start delay (barrier travel)"),
        el("span", {}, el("span", { class: "swatch sw-align" }), "alignment"),
        el("span", {}, el("span", { class: "swatch sw-sync" }), "sync phase"),
        el("span", {}, el("span", { class: "swatch sw-async" }), "async phase"),
        el("span", {}, el("span", { class: "swatch sw-wait" }), "until acknowledged"),
        el("span", {}, el("span", { class: "swatch sw-ack" }), "acknowledged"))),
    el("section", { class: "panel" }, el("h2", { text: "Subtasks" }), el("div", { id: "subtask-tables" })));
  return {
    root,
    async refresh(gen, job) {
      const base = `jobs/${enc(jobId)}/checkpoints/details/${checkpointId}`;
      const detail = await api(base);
      const order = job.vertices.map((v) => v.id).filter((id) => detail.tasks[id]);
      for (const id of Object.keys(detail.tasks)) if (!order.includes(id)) order.push(id);
      const perVertex = await Promise.all(order.map((id) => api(`${base}/subtasks/${enc(id)}`)));
      if (stale(gen)) return;
      const names = new Map(job.vertices.map((v) => [v.id, v.name]));
      fill("ckpt-badges", badge(detail.status), " ", detail.is_savepoint ? badge("savepoint", "savepoint") : null);
      const facts = [["Triggered", fmtTime(detail.trigger_timestamp)], ["Latest acknowledgement", fmtTime(detail.latest_ack_timestamp)],
        ["End to end", detail.status === "IN_PROGRESS" ? "in progress" : fmtDuration(detail.end_to_end_duration)],
        ["Checkpointed size", fmtBytes(detail.checkpointed_size)], ["State size", fmtBytes(detail.state_size)],
        ["Acknowledged", `${detail.num_acknowledged_subtasks}/${detail.num_subtasks} subtasks`],
        ["Type", detail.checkpoint_type || (detail.is_savepoint ? "savepoint" : "checkpoint")]];
      if (detail.external_path) facts.push(["Path", detail.external_path]);
      if (detail.failure_message) facts.push(["Failure", detail.failure_message]);
      fill("ckpt-facts", facts.map(([k, v]) => [el("dt", { text: k }), el("dd", { text: v })]));
      const groups = order.map((id, i) => ({ id, name: names.get(id) || id, subtasks: perVertex[i].subtasks }));
      fill("timeline", drawTimeline(groups, detail, $("timeline").clientWidth));
      fill("timeline-note", timelineNote(groups, detail));
      fill("subtask-tables", groups.map(subtaskTable));
    },
  };
}

// phases splits a subtask's end-to-end time (from the trigger to its
// acknowledgement) into the phases as they happen one after another.
function phases(s) {
  const c = s.checkpoint || {}, a = s.alignment || {};
  const parts = [["delay", s.start_delay], ["align", a.duration], ["sync", c.sync], ["async", c.async]];
  let t = 0;
  const out = [];
  for (const [kind, d] of parts) {
    const len = Math.max(0, d || 0);
    out.push({ kind, start: t, len });
    t += len;
  }
  out.push({ kind: "wait", start: t, len: Math.max(0, (s.end_to_end_duration || 0) - t) });
  return out;
}

// subtaskEnd is when a subtask's part ended: its acknowledgement, or the end
// of its phases if they add up to more (the figures are rounded to ms).
function subtaskEnd(s) { return Math.max(s.end_to_end_duration || 0, phases(s).at(-1).start); }

function drawTimeline(groups, detail, width) {
  const LABEL = 200, W = Math.max(720, width || 0), ROW = 22, GROUP = 26, TOP = 26, R = 24;
  const done = groups.flatMap((g) => g.subtasks.filter((s) => s.status === "completed"));
  // The scale ends with the last acknowledgement: the checkpoint completes
  // later (the JobManager writes its metadata), which the note below says.
  const span = Math.max(1, ...done.map(subtaskEnd));
  const ticks = niceTicks(span, 6);
  const top = ticks[ticks.length - 1];
  const x = (ms) => LABEL + ((W - LABEL - R) * ms) / top;
  const rowsHeight = groups.reduce((h, g) => h + GROUP + g.subtasks.length * ROW, 0);
  const H = TOP + rowsHeight + 8;
  const root = svg("svg", { class: "graph", id: "checkpoint-timeline", width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img",
    "aria-label": `Timeline of checkpoint ${detail.id} per subtask; the tables below list the same figures` });
  root.append(svg("g", { class: "tl-grid" }, ticks.map((t) => svg("line", { x1: x(t), x2: x(t), y1: TOP - 6, y2: H - 4 }))));
  root.append(svg("g", { class: "tl-axis" }, ticks.map((t) => svg("text", { x: x(t), y: 14, "text-anchor": "middle", text: `${fmtTick(t)}` }))));
  let yy = TOP;
  for (const g of groups) {
    root.append(svg("g", { class: "tl-group" }, svg("text", { x: 4, y: yy + 17, text: truncate(g.name, 60) })));
    yy += GROUP;
    for (const s of g.subtasks) {
      const row = svg("g", { class: "tl-row", "data-subtask": `${g.id}-${s.index}` },
        svg("rect", { class: "bg", x: LABEL, y: yy + 2, width: W - LABEL - R, height: ROW - 4 }),
        svg("text", { x: 16, y: yy + 15, text: `subtask ${s.index}` }));
      if (s.status !== "completed") {
        row.append(svg("text", { class: "pending", x: LABEL + 6, y: yy + 15, text: "not acknowledged (pending or failed)" }));
      } else {
        for (const p of phases(s)) {
          if (p.len <= 0) continue;
          row.append(svg("rect", { class: `ph-${p.kind}`, x: x(p.start), y: yy + (p.kind === "wait" ? 8 : 4), width: Math.max(1, x(p.start + p.len) - x(p.start)), height: p.kind === "wait" ? ROW - 16 : ROW - 8 },
            svg("title", { text: `subtask ${s.index} ${phaseName(p.kind)}: ${p.len} ms (from ${p.start} ms)` })));
        }
        const ack = x(s.end_to_end_duration || 0);
        row.append(svg("path", { class: "ack", d: `M${ack},${yy + 3} l4,8 l-4,8 l-4,-8 z` },
          svg("title", { text: `subtask ${s.index}: acknowledged after ${s.end_to_end_duration} ms, ${fmtBytes(s.state_size)}` })));
      }
      root.append(row);
      yy += ROW;
    }
  }
  return root;
}

function timelineNote(groups, detail) {
  const acks = groups.flatMap((g) => g.subtasks.filter((s) => s.status === "completed").map(subtaskEnd));
  if (acks.length === 0) return "No subtask has acknowledged the checkpoint yet.";
  const last = `The last subtask acknowledged ${fmtDuration(Math.max(...acks))} after the trigger`;
  if (detail.status !== "COMPLETED") return `${last}.`;
  return `${last}; the checkpoint completed after ${fmtDuration(detail.end_to_end_duration)}, once the JobManager had written its metadata.`;
}

function fmtTick(ms) { return ms >= 1000 ? `${ms / 1000} s` : `${ms} ms`; }

function phaseName(kind) {
  return { delay: "start delay", align: "alignment", sync: "sync phase", async: "async phase", wait: "until acknowledged" }[kind];
}

function subtaskTable(g) {
  return el("div", {},
    el("h3", { text: g.name }),
    el("div", { class: "table-wrap" }, el("table", { class: "subtasks", "data-vertex-id": g.id },
      el("thead", {}, el("tr", {}, ["Subtask", "Status", "Acknowledged", "End to end", "Start delay", "Alignment", "Sync", "Async", "Checkpointed size", "State size", "Unaligned"]
        .map((h, i) => el("th", { class: i >= 3 && i <= 9 ? "num" : null, text: h })))),
      el("tbody", {}, g.subtasks.map((s) => el("tr", {},
        el("td", { class: "num", text: s.index }),
        el("td", {}, s.status === "completed" ? badge("COMPLETED") : badge("PENDING")),
        el("td", { class: "num", text: fmtTime(s.ack_timestamp) }),
        el("td", { class: "num", text: s.status === "completed" ? fmtDuration(s.end_to_end_duration) : "—" }),
        el("td", { class: "num", text: s.status === "completed" ? `${s.start_delay} ms` : "—" }),
        el("td", { class: "num", text: s.status === "completed" ? `${s.alignment.duration} ms` : "—" }),
        el("td", { class: "num", text: s.status === "completed" ? `${s.checkpoint.sync} ms` : "—" }),
        el("td", { class: "num", text: s.status === "completed" ? `${s.checkpoint.async} ms` : "—" }),
        el("td", { class: "num", text: s.status === "completed" ? fmtBytes(s.checkpointed_size) : "—" }),
        el("td", { class: "num", text: s.status === "completed" ? fmtBytes(s.state_size) : "—" }),
        el("td", { text: s.status === "completed" ? (s.unaligned_checkpoint ? "yes" : "no") : "—" })))))));
}

// --- exceptions -----------------------------------------------------------------------------------

function exceptionsView(jobId) {
  const root = el("section", { class: "panel" }, el("h2", { text: "Exceptions" }), el("div", { id: "exceptions" }));
  return {
    root,
    async refresh(gen) {
      const ex = await api(`jobs/${enc(jobId)}/exceptions`);
      if (stale(gen)) return;
      const entries = ex.exceptionHistory.entries;
      fill("exceptions", entries.length === 0 ? el("p", { class: "empty-note", text: "No failures: the job has not failed or restarted." }) :
        [el("table", {},
          el("thead", {}, el("tr", {}, el("th", { text: "Time" }), el("th", { text: "Exception" }), el("th", { text: "Task" }), el("th", { text: "Details" }))),
          el("tbody", {}, entries.map((e) => el("tr", {},
            el("td", { class: "num", text: fmtTime(e.timestamp) }),
            el("td", { class: "mono", text: e.exceptionName }),
            el("td", { text: e.taskName || "(the job)" }),
            el("td", { class: "wrap" }, el("details", {}, el("summary", { text: truncate(e.stacktrace.split("\n")[0], 90) }),
              el("pre", { class: "trace", text: e.stacktrace }))))))),
        ex.exceptionHistory.truncated ? el("p", { class: "muted", text: "Older failures are not shown." }) : null]);
    },
  };
}

// --- start ----------------------------------------------------------------------------------------

async function start() {
  const tokenInput = $("token");
  tokenInput.value = app.token;
  $("token-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    app.token = tokenInput.value.trim();
    if (app.token) sessionStorage.setItem(TOKEN_KEY, app.token);
    else sessionStorage.removeItem(TOKEN_KEY);
    loadConfig().then(refreshNow);
  });
  applyRefresh(); // the stored choice, before GET /config answers
  $("refresh-interval").addEventListener("change", (ev) => {
    if (ev.target.value === "") localStorage.removeItem(REFRESH_KEY);
    else localStorage.setItem(REFRESH_KEY, ev.target.value);
    applyRefresh();
    refreshNow(); // now, then at the new interval
  });
  window.addEventListener("hashchange", route);
  document.addEventListener("visibilitychange", () => { if (!document.hidden) refreshNow(); });
  await loadConfig();
  route();
}

// chosenRefresh is the refresh interval chosen in the selector (kept in
// localStorage), or null when none was chosen (or the stored value is not
// a choice).
function chosenRefresh() {
  const v = localStorage.getItem(REFRESH_KEY);
  if (v === null || !/^\d+$/.test(v)) return null;
  const ms = Number(v);
  return REFRESH_CHOICES.includes(ms) ? ms : null;
}

// applyRefresh sets the interval in use and shows it in the selector: the
// chosen one, else the server's (an extra "default" entry when it is none
// of the choices).
function applyRefresh() {
  const chosen = chosenRefresh();
  app.refreshMs = chosen ?? app.serverRefreshMs;
  const sel = $("refresh-interval");
  sel.querySelector("option[data-server]")?.remove();
  if (chosen === null && !REFRESH_CHOICES.includes(app.serverRefreshMs)) {
    sel.append(el("option", { value: "", "data-server": true, text: `${fmtMs(app.serverRefreshMs)} (server)` }));
    sel.value = "";
  } else {
    sel.value = String(app.refreshMs);
  }
}

function fmtMs(ms) { return ms >= 1000 ? `${ms / 1000} s` : `${ms} ms`; }

// loadConfig reads the refresh interval and version from GET /config.
async function loadConfig() {
  try {
    const c = await api("config");
    if (c["refresh-interval"] > 0) app.serverRefreshMs = Math.max(200, c["refresh-interval"]);
    applyRefresh();
    const v = c["weir-version"] || "";
    $("version").textContent = `${/^\d/.test(v) ? "v" + v : v}${c["weir-revision"] ? " · " + c["weir-revision"].slice(0, 8) : ""}`;
  } catch (e) {
    reportError(e);
  }
}

start();
