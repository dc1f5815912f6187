// batchclaim status page: polls /api/status and redraws. No dependencies; every value from
// the server goes into the page as text, never as markup.
"use strict";
(function () {
  const STATES = ["NEW", "INFLIGHT", "PENDING", "DELAYED", "UNKNOWN", "VALID", "COMMITTED", "INVALID", "DISCARDED", "CANCELLED"];
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

  // Links to the job view. Every id goes into the page as text and into the link as an
  // encoded URL component, so odd characters in a service_id neither break nor inject.
  const serviceHref = (id) => "#/service/" + encodeURIComponent(id);
  const serviceLink = (id) => el("a", { href: serviceHref(id), class: "service-link" }, id);
  // batchLink shows a batch id shortened and links to the batch's page; the full id is the
  // link's title and data-batch-id.
  // A job enqueued without an id (an empty batch_id) is shown by its seq.
  function batchLink(seq, batchID) {
    const short = !batchID ? "#" + seq : batchID.length > 16 ? batchID.slice(0, 12) + "…" : batchID;
    return el("a", { href: "#/batch/" + seq, title: batchID || "no id: seq " + seq, class: "batch-link", dataset: { batchId: batchID, seq: String(seq) } },
      el("code", {}, short));
  }
  const chip = (state) => el("span", { class: "chip s-" + state }, state);
  // A job's kind links to the list of the jobs of that kind; a plain job (no kind) shows "–".
  const kindLink = (kind) => kind
    ? el("a", { href: "#/batches?kind=" + encodeURIComponent(kind) + "&window=24h", class: "kind" }, el("code", {}, kind))
    : el("span", { class: "muted" }, "–");
  const when = (t) => t ? new Date(t).toLocaleString([], { hour12: false }) : "–";

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
      el("td", {}, serviceLink(s.service_id)), el("td", {}, s.owner || "unclaimed"),
      el("td", { class: "num" }, age(s.oldest_seconds)), el("td", {}, ...chips(s.by_state)))),
    "every batch is finished", 4);
  }

  function renderHalted(st) {
    fillTable("halted", st.halted.map((h) => el("tr", { dataset: { service: h.service_id } },
      el("td", {}, serviceLink(h.service_id)), el("td", { class: "num" }, batchLink(h.seq, "#" + h.seq)),
      el("td", {}, age(since(st.at, h.at)) + " ago"), el("td", { title: h.reason }, h.reason),
      el("td", {}, el("button", { onclick: (e) => resume(h.service_id, e.target) }, "Resume")))),
    "none", 5);
  }

  function renderRecent(st) {
    fillTable("transitions", st.transitions.map((t) => el("tr", {},
      el("td", {}, clock(t.at)), el("td", {}, serviceLink(t.service_id)),
      el("td", {}, batchLink(t.seq, t.batch_id)),
      el("td", {}, (t.from || "·") + " → ", el("span", { class: "chip s-" + t.to }, t.to)),
      el("td", {}, t.instance || "–"))), "no transition yet", 5);
    fillTable("takeovers", st.takeovers.map((t) => el("tr", {},
      el("td", {}, clock(t.at)), el("td", {}, serviceLink(t.service_id)), el("td", {}, t.from),
      el("td", {}, t.to ? t.to + " (+" + age(t.acquired_after_seconds) + ")" : "not yet"), el("td", {}, t.event === "voided_expired" ? "past expiry_2" : "past expiry_1"))),
    "no takeover", 5);
  }

  function renderPeriodic(st) {
    fillTable("periodic", (st.periodic || []).map((p) => {
      const job = p.last_seq ? [batchLink(p.last_seq, "#" + p.last_seq), " ", p.last_state ? chip(p.last_state) : "(deleted)"] : ["–"];
      const wait = p.next_run ? since(p.next_run, st.at) : null; // seconds until the next run
      return el("tr", { dataset: { periodic: p.name } },
        el("td", {}, p.name), el("td", {}, el("code", {}, p.schedule)), el("td", {}, serviceLink(p.service_id)),
        el("td", {}, p.last_tick ? clock(p.last_tick) : "none yet"), el("td", {}, ...job),
        el("td", { class: wait !== null && wait < 0 ? "bad" : "" }, wait === null ? "–"
          : wait < 0 ? "overdue since " + clock(p.next_run) : clock(p.next_run) + " (in " + age(wait) + ")"));
    }), "no periodic job", 6);
  }

  function render(st) {
    renderTiles(st);
    renderInstances(st);
    renderChart(st);
    renderServices(st);
    renderHalted(st);
    renderRecent(st);
    renderPeriodic(st);
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
    if ($("overview").hidden) { // the job view is shown: no need for the status
      timer = setTimeout(poll, refreshMs);
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
        if (!$("job").hidden) route();
      }
    } catch (e) {
      banner("Resume of " + serviceID + " failed: " + e.message);
    } finally {
      button.disabled = false;
    }
  }


  // act posts a batch action (retry, cancel) and shows the batch again.
  async function act(seq, action, question, button) {
    if (!confirm(question)) return;
    button.disabled = true;
    const token = sessionStorage.getItem(TOKEN_KEY);
    try {
      const resp = await fetch("/api/batches/" + encodeURIComponent(seq) + "/" + action, { method: "POST", headers: authHeaders() });
      if (resp.status === 401) {
        banner("401 Unauthorized: the server requires an operator token for this. " +
          (token ? "The saved token was refused; " : "No token is saved; ") + "enter one at the top right and try again.");
      } else if (!resp.ok) {
        banner("The " + action + " of batch #" + seq + " failed: " + resp.status + " " + (await errorText(resp)));
      } else {
        const c = (await resp.json()).changed;
        banner(c.cancel_requested ? "Batch #" + seq + " is running: its job is asked to stop, and it ends CANCELLED once it returns (unless it finished first)."
          : "Batch #" + seq + ": " + c.from + " → " + c.to + ".", "info");
        if (!$("job").hidden) route();
      }
    } catch (e) {
      banner("The " + action + " of batch #" + seq + " failed: " + e.message);
    } finally {
      button.disabled = false;
    }
  }

  // ---- The job view: search, a service_id's page, a batch's page, the batch list. ----
  // Routes live in the URL's fragment, so a page can be bookmarked and the back button works:
  //   #/search?q=...   #/service/ID[?after=SEQ]   #/batch/SEQ   #/batches?state=&service_id=&window=&before=
  async function getJSON(path) {
    const resp = await fetch(path, { cache: "no-store", headers: authHeaders() });
    if (resp.status === 401) {
      throw new Error("401: this server shows its data to operators only; " +
        (sessionStorage.getItem(TOKEN_KEY) ? "the saved token was refused" : "enter a token") + " at the top right");
    }
    if (!resp.ok) throw new Error(resp.status + ": " + (await errorText(resp)));
    return resp.json();
  }

  function card(title, ...children) {
    return el("section", { class: "card" }, el("h2", {}, ...[].concat(title)), ...children);
  }

  function table(id, head, rows, empty) {
    const t = el("table", { id }, el("thead", {}, el("tr", {}, ...head.map((h) => el("th", {}, h)))), el("tbody", {}));
    if (rows.length === 0) t.tBodies[0].append(el("tr", {}, el("td", { class: "empty", colspan: String(head.length) }, empty)));
    for (const r of rows) t.tBodies[0].append(r);
    return t;
  }

  function facts(pairs) {
    const dl = el("dl", { class: "facts" });
    for (const [k, v] of pairs) dl.append(el("dt", {}, k), el("dd", {}, v == null || v === "" ? "–" : v));
    return dl;
  }

  function show(view, ...children) {
    const job = $("job");
    job.replaceChildren(...children);
    job.dataset.view = view;
    body.dataset.view = view;
  }

  async function viewSearch(q) {
    const r = await getJSON("/api/search?q=" + encodeURIComponent(q));
    if (r.batches.length + r.service_ids.length === 1) {
      location.replace(r.batches.length ? "#/batch/" + r.batches[0].seq : serviceHref(r.service_ids[0]));
      return;
    }
    show("search", card(["Search ", el("code", {}, q)],
      r.note ? el("p", { class: "muted" }, r.note) : "",
      table("search-batches", ["seq", "batch", "service_id", "state"], r.batches.map((b) => el("tr", {},
        el("td", { class: "num" }, b.seq), el("td", {}, batchLink(b.seq, b.batch_id)), el("td", {}, serviceLink(b.service_id)), el("td", {}, chip(b.state)))),
      "no batch"),
      el("h2", {}, "service_ids"),
      table("search-services", ["service_id"], r.service_ids.map((id) => el("tr", {}, el("td", {}, serviceLink(id)))), "no service_id")));
  }

  async function viewService(id, params) {
    const q = new URLSearchParams();
    if (params.get("after")) q.set("after", params.get("after"));
    if (params.get("limit")) q.set("limit", params.get("limit"));
    const p = await getJSON("/api/services/" + encodeURIComponent(id) + (q.size ? "?" + q : ""));
    const halt = p.halt
      ? card("Halted", facts([["since", when(p.halt.at)], ["by batch", batchLink(p.halt.seq, "#" + p.halt.seq)], ["reason", p.halt.reason]]),
        el("p", {}, el("button", { id: "service-resume", onclick: (e) => resume(p.service_id, e.target) }, "Resume")))
      : "";
    const pager = el("div", { class: "pager" });
    if (params.get("after")) pager.append(el("a", { href: serviceHref(id) }, "first page"), " ");
    if (p.next_after) pager.append(el("a", { id: "queue-next", href: serviceHref(id) + "?after=" + p.next_after }, "next page →"));
    show("service",
      card(["service_id ", el("code", { id: "service-id" }, p.service_id)], facts([
        ["owner", p.owner || "unclaimed"], ["epoch", String(p.epoch)], ["claim", p.phase.replaceAll("_", " ")],
        ["claimed at", when(p.claimed_at)], ["unfinished batches", String(p.unfinished)],
        ["history", el("a", { href: "#/batches?service_id=" + encodeURIComponent(p.service_id) + "&window=7d" }, "its batches of the last 7 days")]])),
      halt,
      card(["Queue ", el("span", { class: "muted" }, "(unfinished, in send order)")],
        table("queue", ["seq", "batch", "kind", "state", "attempts", "created", "updated"], p.queue.map((b) => el("tr", { dataset: { seq: String(b.seq) } },
          el("td", { class: "num" }, b.seq), el("td", {}, batchLink(b.seq, b.batch_id)), el("td", {}, kindLink(b.kind)), el("td", {}, chip(b.state)),
          el("td", { class: "num" }, b.attempts), el("td", {}, when(b.created_at)), el("td", {}, when(b.updated_at)))),
        "no unfinished batch"), pager),
      card(["Owners and epochs ", el("span", { class: "muted" }, "(newest first)")],
        table("ownership", ["at", "event", "epoch", "instance"], p.ownership.map((e) => el("tr", {},
          el("td", {}, when(e.at)), el("td", {}, e.event.replaceAll("_", " ")), el("td", { class: "num" }, e.epoch), el("td", {}, e.instance))),
        "never claimed")));
  }

  async function viewBatch(seq) {
    const b = await getJSON("/api/batches/" + encodeURIComponent(seq));
    const invalid = b.invalid_details !== undefined
      ? card("The ledger's invalid details", el("pre", { id: "invalid-details", class: "details" }, JSON.stringify(b.invalid_details, null, 2)))
      : (b.state === "INVALID" ? card("The ledger's invalid details", el("p", { class: "muted" }, "the ledger gave none")) : "");
    const actions = el("p", { class: "actions" });
    if (["DISCARDED", "CANCELLED", "INVALID", "DELAYED"].includes(b.state)) {
      actions.append(el("button", { id: "batch-retry", onclick: (e) => act(b.seq, "retry",
        b.state === "DELAYED" ? "Send batch #" + b.seq + " now?" : "Run batch #" + b.seq + " again, its attempts counted afresh?", e.target) }, b.state === "DELAYED" ? "Retry now" : "Retry"), " ");
    }
    if (["NEW", "DELAYED", "INFLIGHT"].includes(b.state)) {
      actions.append(el("button", { id: "batch-cancel", onclick: (e) => act(b.seq, "cancel", b.state === "INFLIGHT"
        ? "Cancel batch #" + b.seq + " while it runs? Its job is asked to stop; it ends CANCELLED unless it finishes first."
        : "Cancel batch #" + b.seq + "? It will not be sent; its service_id goes on with the next batch.", e.target) }, "Cancel"));
    }
    show("batch",
      card(["Batch #" + b.seq + " ", chip(b.state)], actions, facts([
        ["batch id", b.batch_id ? el("code", { id: "batch-id" }, b.batch_id) : el("span", { id: "batch-id" }, "none (enqueued without an id)")], ["service_id", serviceLink(b.service_id)],
        ["kind", b.kind ? kindLink(b.kind) : ""], ["timeout", b.timeout_ms != null ? (b.timeout_ms / 1000) + " s (its own)" : ""],
        ["state", b.state], ["ledger status", b.dlt_status], ["attempts", String(b.attempts)],
        ["last written by", b.owner ? b.owner + (b.epoch != null ? " (epoch " + b.epoch + ")" : "") : ""],
        ["created", when(b.created_at)], ["submitted", when(b.submitted_at)], ["next attempt", b.next_attempt_at && !b.finished_at ? when(b.next_attempt_at) : ""],
        ["finished", b.finished_at ? when(b.finished_at) : ""], ["last error", b.last_error], ["payload", b.payload_bytes + " bytes"]])),
      invalid,
      b.output !== undefined ? card("Output", el("pre", { id: "batch-output", class: "details" }, JSON.stringify(b.output, null, 2))) : "",
      card("Attempts", table("attempts", ["#", "started", "instance", "epoch", "reason", "HTTP", "latency", "outcome", "error"],
        b.posts.map((a) => el("tr", {},
          el("td", { class: "num" }, a.number), el("td", {}, when(a.started_at)), el("td", {}, a.instance), el("td", { class: "num" }, a.epoch),
          el("td", {}, a.reason), el("td", { class: "num" }, a.http_status ?? "–"),
          el("td", { class: "num" }, a.latency_ms != null ? a.latency_ms.toFixed(1) + " ms" : "–"),
          el("td", {}, a.outcome || (a.finished_at ? "–" : "in flight")), el("td", { class: "wrap", title: a.error || "" }, a.error || ""))),
        "never sent")),
      card("Transitions", table("batch-transitions", ["at", "change", "instance", "epoch", "detail"],
        b.transitions.map((t) => el("tr", {},
          el("td", {}, when(t.at)), el("td", {}, (t.from || "·") + " → ", chip(t.to)), el("td", {}, t.instance || "–"),
          el("td", { class: "num" }, t.epoch ?? "–"), el("td", { class: "wrap" }, t.detail || ""))),
        "none recorded")));
  }

  const WINDOWS = ["10m", "1h", "6h", "24h", "7d", "30d"];
  async function viewBatches(params) {
    const q = new URLSearchParams();
    for (const k of ["state", "service_id", "kind", "window", "before", "limit"]) if (params.get(k)) q.set(k, params.get(k));
    const l = await getJSON("/api/batches" + (q.size ? "?" + q : ""));
    const state = el("select", { name: "state", id: "filter-state" }, el("option", { value: "" }, "any state"), ...STATES.map((s) => el("option", { value: s }, s)));
    state.value = l.state || "";
    const svc = el("input", { name: "service_id", id: "filter-service", placeholder: "service_id", maxlength: "256" });
    svc.value = l.service_id || "";
    const kind = el("input", { name: "kind", id: "filter-kind", placeholder: "kind", maxlength: "128" });
    kind.value = l.kind || "";
    const win = el("select", { name: "window", id: "filter-window" }, ...WINDOWS.map((w) => el("option", { value: w }, "changed in the last " + w)));
    win.value = params.get("window") || "1h";
    const form = el("form", { class: "filters", id: "filters", onsubmit: (e) => {
      e.preventDefault();
      const f = new URLSearchParams();
      if (state.value) f.set("state", state.value);
      if (svc.value.trim()) f.set("service_id", svc.value.trim());
      if (kind.value.trim()) f.set("kind", kind.value.trim());
      f.set("window", win.value);
      location.hash = "#/batches?" + f;
    } }, state, svc, kind, win, el("button", { type: "submit" }, "Filter"));
    const pager = el("div", { class: "pager" });
    if (params.get("before")) { const f = new URLSearchParams(q); f.delete("before"); pager.append(el("a", { href: "#/batches?" + f }, "newest"), " "); }
    if (l.next_before) { const f = new URLSearchParams(q); f.set("before", l.next_before); pager.append(el("a", { id: "list-next", href: "#/batches?" + f }, "older →")); }
    if (l.scanned_to) pager.append(el("span", { class: "muted" }, " (this page read the batches from #" + l.scanned_to + " on)"));
    show("batches", card(["Batches ", el("span", { class: "muted" }, "(newest first)")], form,
      table("batch-list", ["seq", "service_id", "batch", "kind", "state", "attempts", "updated"], l.batches.map((b) => el("tr", {},
        el("td", { class: "num" }, b.seq), el("td", {}, serviceLink(b.service_id)), el("td", {}, batchLink(b.seq, b.batch_id)), el("td", {}, kindLink(b.kind)),
        el("td", {}, chip(b.state)), el("td", { class: "num" }, b.attempts), el("td", {}, when(b.updated_at)))),
      "no batch changed in this window"), pager));
  }

  async function route() {
    const h = location.hash.replace(/^#\/?/, "");
    const [path, query] = [h.split("?")[0], h.includes("?") ? h.slice(h.indexOf("?") + 1) : ""];
    const params = new URLSearchParams(query);
    const parts = path.split("/");
    const onJob = path !== "";
    $("overview").hidden = onJob;
    $("job").hidden = !onJob;
    if (!onJob) { body.dataset.view = "overview"; poll(); return; }
    show("loading", el("p", { class: "muted" }, "loading…"));
    try {
      switch (parts[0]) {
        case "search": await viewSearch(params.get("q") || ""); break;
        case "service": await viewService(decodeURIComponent(parts.slice(1).join("/")), params); break;
        case "batch": await viewBatch(parts[1] || ""); break;
        case "batches": await viewBatches(params); break;
        default: show("error", card("Not found", el("p", {}, "No such view.")));
      }
      $("conn").textContent = "loaded " + new Date().toLocaleTimeString([], { hour12: false });
      $("conn").className = "conn ok";
    } catch (e) {
      show("error", card("Could not load this view", el("p", { id: "view-error" }, e.message)));
      $("conn").textContent = "no data";
      $("conn").className = "conn err";
    }
  }

  $("search-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const q = $("search").value.trim();
    if (q) location.hash = "#/search?q=" + encodeURIComponent(q);
  });
  window.addEventListener("hashchange", route);

  $("token").value = sessionStorage.getItem(TOKEN_KEY) || "";
  $("token-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const v = $("token").value.trim();
    if (v) sessionStorage.setItem(TOKEN_KEY, v); else sessionStorage.removeItem(TOKEN_KEY);
    banner(v ? "Token saved for this tab." : "Token cleared.", "info");
    failures = 0;
    if ($("overview").hidden) route(); else poll();
  });
  $("token-clear").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    $("token").value = "";
    banner("Token cleared.", "info");
  });
  route();
})();
