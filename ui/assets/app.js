// batchclaim status page: polls /api/status and redraws. No dependencies; every value from
// the server goes into the page as text, never as markup.
"use strict";
(function () {
  const STATES = ["NEW", "INFLIGHT", "PENDING", "DELAYED", "UNKNOWN", "VALID", "COMMITTED", "INVALID"];
  const TOKEN_KEY = "batchclaim.token";
  const body = document.body;
  const refreshMs = Math.max(100, parseInt(body.dataset.refreshMs, 10) || 2000);
  const $ = (id) => document.getElementById(id);
  let renders = 0;
  let failures = 0;

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v;
      else if (k === "dataset") Object.assign(e.dataset, v);
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
    for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return e;
  }

  function age(s) {
    if (s == null || !isFinite(s)) return "–";
    if (s < 1) return s.toFixed(2) + "s";
    if (s < 60) return s.toFixed(1) + "s";
    if (s < 3600) return Math.floor(s / 60) + "m" + String(Math.floor(s % 60)).padStart(2, "0") + "s";
    if (s < 86400) return Math.floor(s / 3600) + "h" + String(Math.floor((s % 3600) / 60)).padStart(2, "0") + "m";
    return Math.floor(s / 86400) + "d" + Math.floor((s % 86400) / 3600) + "h";
  }
  // span names a configured length: "10m", "20s", "1h".
  function span(s) {
    if (s >= 3600 && s % 3600 === 0) return s / 3600 + "h";
    if (s >= 60 && s % 60 === 0) return s / 60 + "m";
    return Number.isInteger(s) ? s + "s" : age(s);
  }
  const since = (now, t) => (Date.parse(now) - Date.parse(t)) / 1000;
  const clock = (t) => new Date(t).toLocaleTimeString([], { hour12: false });

  function fillTable(id, rows, empty, cols) {
    const tb = $(id).tBodies[0];
    tb.replaceChildren();
    if (rows.length === 0) {
      tb.append(el("tr", {}, el("td", { class: "empty", colspan: String(cols) }, empty)));
      return;
    }
    for (const r of rows) tb.append(r);
  }

  function chips(byState) {
    const out = [];
    for (const s of STATES) if (byState[s]) out.push(el("span", { class: "chip s-" + s, title: s }, s + " " + byState[s]));
    return out;
  }

  function banner(msg, kind) {
    const b = $("banner");
    if (!msg) { b.hidden = true; return; }
    b.className = "banner" + (kind ? " " + kind : "");
    b.textContent = msg;
    b.hidden = false;
  }

  function renderTiles(st) {
    const live = st.instances.filter((i) => i.phase === "live").length;
    $("t-instances").textContent = live + " / " + st.instances.length;
    $("t-services").textContent = st.service_ids;
    $("t-unclaimed").textContent = st.unclaimed;
    $("t-open").textContent = st.open.total;
    $("t-oldest").textContent = st.open.total ? age(st.open.oldest_seconds) : "–";
    $("t-committed").textContent = st.chart.totals.COMMITTED || 0;
    $("t-committed-l").textContent = "committed in " + span(st.chart.window_seconds);
    $("t-halted").textContent = st.halted.length;
    $("t-halted").classList.toggle("nonzero", st.halted.length > 0);
  }

  function renderInstances(st) {
    fillTable("instances", st.instances.map((i) => el("tr", { dataset: { instance: i.name } },
      el("td", { title: i.id }, i.name),
      el("td", {}, i.host || "–"),
      el("td", {}, el("span", { class: "badge phase-" + i.phase }, i.phase.replaceAll("_", " "))),
      el("td", { class: "num" }, age(i.heartbeat_age_seconds)),
      el("td", { class: "num" }, age(since(st.at, i.started_at))))), "no instance registered", 5);

    const bars = $("bars");
    bars.replaceChildren();
    $("share").textContent = st.fair_share ? "(fair share " + st.fair_share + ": the line)" : "";
    const top = Math.max(1, st.fair_share, ...st.instances.map((i) => i.claims));
    for (const i of st.instances) {
      const fill = el("div", { class: "fill" + (st.fair_share && i.claims > st.fair_share ? " over" : "") });
      fill.style.width = (100 * i.claims / top).toFixed(1) + "%";
      const track = el("div", { class: "track" }, fill);
      if (st.fair_share) {
        const m = el("div", { class: "share", title: "fair share " + st.fair_share });
        m.style.left = (100 * st.fair_share / top).toFixed(1) + "%";
        track.append(m);
      }
      bars.append(el("div", { class: "row", dataset: { instance: i.name, claims: String(i.claims) } },
        el("span", { class: "name", title: i.name }, i.name), track, el("span", { class: "num" }, i.claims)));
    }
    if (st.instances.length === 0) bars.append(el("div", { class: "muted" }, "no instance registered"));
  }

  function renderChart(st) {
    const c = st.chart;
    const svg = $("chart");
    const ns = "http://www.w3.org/2000/svg";
    svg.replaceChildren();
    const n = (c.counts.COMMITTED || []).length;
    let peak = 1;
    for (let i = 0; i < n; i++) {
      let sum = 0;
      for (const s of STATES) sum += c.counts[s][i];
      peak = Math.max(peak, sum);
    }
    const colors = getComputedStyle(document.documentElement);
    const w = 1000 / Math.max(1, n);
    for (let i = 0; i < n; i++) {
      let y = 180;
      for (const s of STATES) {
        const v = c.counts[s][i];
        if (!v) continue;
        const h = (170 * v) / peak;
        y -= h;
        const r = document.createElementNS(ns, "rect");
        r.setAttribute("x", (i * w + 1).toFixed(1));
        r.setAttribute("y", y.toFixed(1));
        r.setAttribute("width", Math.max(1, w - 2).toFixed(1));
        r.setAttribute("height", h.toFixed(1));
        r.setAttribute("fill", colors.getPropertyValue("--s-" + s.toLowerCase()).trim());
        const t = document.createElementNS(ns, "title");
        t.textContent = s + ": " + v;
        r.append(t);
        svg.append(r);
      }
    }
    $("chart-span").textContent = "(all instances, per " + span(c.bucket_seconds) + "; tallest bar " + peak + ")";
    $("axis-left").textContent = "−" + span(c.window_seconds);
    const legend = $("legend");
    legend.replaceChildren();
    for (const s of STATES) {
      legend.append(el("span", { dataset: { state: s } }, el("i", { class: "s-" + s }), s + " " + (c.totals[s] || 0)));
    }
  }

  function renderServices(st) {
    $("open-states").replaceChildren(...chips(st.open.by_state));
    $("open-count").textContent = st.open.service_count > st.open.services.length
      ? "(oldest " + st.open.services.length + " of " + st.open.service_count + ")" : "";
    fillTable("services", st.open.services.map((s) => el("tr", {},
      el("td", {}, s.service_id), el("td", {}, s.owner || "unclaimed"),
      el("td", { class: "num" }, age(s.oldest_seconds)), el("td", {}, ...chips(s.by_state)))),
    "every batch is finished", 4);
  }

  function renderHalted(st) {
    fillTable("halted", st.halted.map((h) => el("tr", { dataset: { service: h.service_id } },
      el("td", {}, h.service_id), el("td", { class: "num" }, h.seq),
      el("td", {}, age(since(st.at, h.at)) + " ago"), el("td", { title: h.reason }, h.reason),
      el("td", {}, el("button", { onclick: (e) => resume(h.service_id, e.target) }, "Resume")))),
    "none", 5);
  }

  function renderRecent(st) {
    fillTable("transitions", st.transitions.map((t) => el("tr", {},
      el("td", {}, clock(t.at)), el("td", {}, t.service_id),
      el("td", { title: t.batch_id }, el("code", {}, t.batch_id.slice(0, 12))),
      el("td", {}, (t.from || "·") + " → ", el("span", { class: "chip s-" + t.to }, t.to)),
      el("td", {}, t.instance || "–"))), "no transition yet", 5);
    fillTable("takeovers", st.takeovers.map((t) => el("tr", {},
      el("td", {}, clock(t.at)), el("td", {}, t.service_id), el("td", {}, t.from),
      el("td", {}, t.to ? t.to + " (+" + age(t.acquired_after_seconds) + ")" : "not yet"), el("td", {}, t.event === "voided_expired" ? "past expiry_2" : "past expiry_1"))),
    "no takeover", 5);
  }

  function render(st) {
    renderTiles(st);
    renderInstances(st);
    renderChart(st);
    renderServices(st);
    renderHalted(st);
    renderRecent(st);
    renders++;
    body.dataset.renders = String(renders);
    $("updated").textContent = "database time " + clock(st.at);
  }

  async function errorText(resp) {
    try {
      const j = await resp.json();
      if (j && j.error) return j.error.message || j.error.title || JSON.stringify(j.error);
    } catch (e) { /* not JSON */ }
    return resp.statusText;
  }

  function authHeaders() {
    const token = sessionStorage.getItem(TOKEN_KEY);
    return token ? { Authorization: "Bearer " + token } : {};
  }

  let timer = 0;
  let inflight = false;
  let again = false; // poll() was called while a poll was in flight: poll again at once
  async function poll() {
    clearTimeout(timer);
    if (inflight) {
      again = true;
      return;
    }
    inflight = true;
    try {
      const resp = await fetch("/api/status", { cache: "no-store", headers: authHeaders() });
      if (resp.status === 401) {
        throw new Error("401: this server shows its status to operators only; " +
          (sessionStorage.getItem(TOKEN_KEY) ? "the saved token was refused" : "enter a token") + " at the top right");
      }
      if (!resp.ok) throw new Error(resp.status + ": " + (await errorText(resp)));
      render(await resp.json());
      failures = 0;
      $("conn").textContent = "live";
      $("conn").className = "conn ok";
    } catch (e) {
      failures++;
      $("conn").textContent = "no data: " + e.message;
      $("conn").className = "conn err";
    } finally {
      inflight = false;
      const next = again ? 0 : failures ? Math.min(30000, refreshMs * 2 ** Math.min(failures, 4)) : refreshMs;
      again = false;
      timer = setTimeout(poll, next);
    }
  }

  async function resume(serviceID, button) {
    if (!confirm("Resume " + serviceID + "? Its next batch will be sent.")) return;
    button.disabled = true;
    const headers = authHeaders();
    const token = sessionStorage.getItem(TOKEN_KEY);
    try {
      const resp = await fetch("/api/halts/" + encodeURIComponent(serviceID) + "/resume", { method: "POST", headers });
      if (resp.status === 401) {
        banner("401 Unauthorized: the server requires an operator token for this. " +
          (token ? "The saved token was refused; " : "No token is saved; ") + "enter one at the top right and try again.");
      } else if (!resp.ok) {
        banner("Resume of " + serviceID + " failed: " + resp.status + " " + (await errorText(resp)));
      } else {
        banner("Resumed " + serviceID + ".", "info");
      }
    } catch (e) {
      banner("Resume of " + serviceID + " failed: " + e.message);
    } finally {
      button.disabled = false;
    }
  }

  $("token").value = sessionStorage.getItem(TOKEN_KEY) || "";
  $("token-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const v = $("token").value.trim();
    if (v) sessionStorage.setItem(TOKEN_KEY, v); else sessionStorage.removeItem(TOKEN_KEY);
    banner(v ? "Token saved for this tab." : "Token cleared.", "info");
    failures = 0;
    poll();
  });
  $("token-clear").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    $("token").value = "";
    banner("Token cleared.", "info");
  });
  poll();
})();
