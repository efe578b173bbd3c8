// The monitor page: a server-sent event stream for the live parts, fetches for the rest.
// Texts from ads are untrusted: they only ever reach the page through textContent.
(function () {
  "use strict";
  const token = new URLSearchParams(location.search).get("token");
  const q = (path) => token ? path + (path.includes("?") ? "&" : "?") + "token=" + encodeURIComponent(token) : path;
  const $ = (id) => document.getElementById(id);
  const pct = (x) => (100 * x).toFixed(1) + " %";
  // a time of today as its hour, an older one with its date (a replay's clusters are days old)
  const when = (t) => {
    if (!t) return "";
    const d = new Date(t * 1000);
    return d.toDateString() === new Date().toDateString() ? d.toLocaleTimeString() : d.toLocaleString();
  };
  // An ad's bidirectional controls written out as \u202e, as tail and explain write them:
  // U+202E (right-to-left override) showed "EUR 5000" as "0005 EUR".
  const BIDI = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
  const visible = (t) => String(t).replace(BIDI, (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));

  // a cluster whose first document came before --from: at least one more than was read
  const shownSize = (c) => c.partial ? "≥" + (c.size + 1) : c.size;
  function cell(row, text) { const td = document.createElement("td"); td.textContent = text == null ? "" : visible(text); row.appendChild(td); return td; }
  // An ad's own address as a link, http(s) only (the monitor sends no other; checked again
  // here, since a javascript: address would run on a click), opened apart from the page.
  function anchor(href) {
    if (!href || !/^https?:\/\//i.test(href)) return null;
    const a = document.createElement("a");
    a.href = href; a.textContent = "open the ad"; a.target = "_blank"; a.rel = "noopener noreferrer";
    return a;
  }
  function fill(table, rows, make) {
    const body = table.querySelector("tbody");
    body.replaceChildren(...rows.map((r) => { const tr = document.createElement("tr"); make(tr, r); return tr; }));
  }

  function showSummary(s) {
    $("verdicts").textContent = s.verdicts;
    $("duplicates").textContent = s.duplicates;
    $("rate").textContent = pct(s.duplicate_rate);
    $("clusters").textContent = s.clusters;
    $("dead").textContent = s.dead_letters;
    $("bad").textContent = s.bad_records;
    const reasons = Object.entries(s.dead_letters_by_reason).sort((a, b) => b[1] - a[1]);
    if (!reasons.length) reasons.push(["none", ""]);
    $("reasons").replaceChildren(...reasons.map(([r, n]) => { const li = document.createElement("li"); li.textContent = n === "" ? r : r + ": " + n; return li; }));
  }

  // What the page can vouch for: "live" only when the broker answered the monitor's last ask
  // (every 2 s) and little is left to read; a quiet topic and a stopped broker look alike
  // otherwise.
  function showStatus(b) {
    const waiting = b.waiting_for || [];
    let text = "live", warn = false;
    if (b.reachable === false) {
      text = "broker not answering since " + new Date(b.away_since * 1000).toLocaleTimeString() +
        " (showing what was read until then)";
      warn = true;
    } else if (b.catching_up) {
      text = "catching up: " + b.behind.toLocaleString() + " records to read";
    } else if (b.reachable == null) {
      text = waiting.length ? "" : "connecting…";
    } else if (b.behind == null) {  // reached, but no topic there to ask about yet
      text = "connected";
    }
    if (waiting.length) text += (text ? " · " : "") + "waiting for topic " + waiting.join(", ");
    $("status").textContent = text;
    $("status").classList.toggle("warn", warn);
  }

  // The latest duplicates: read from the API when the stream (re)opens, then from ticks. The
  // first tick holds the newest 200 verdicts only (a quiet stream's duplicates were never
  // shown), and a reconnected stream sends them again (each was listed twice).
  let latest = [];
  function showLatest(vs) {
    const seen = new Set();  // by the monitor's index of each verdict: newest first
    latest = vs.filter((v) => !seen.has(v.index) && seen.add(v.index));
    latest.sort((a, b) => b.index - a.index);
    latest.length = Math.min(latest.length, 50);
    fill($("latest"), latest, (tr, v) => {
      tr.className = "dup"; tr.dataset.id = v.id;
      cell(tr, v.id); cell(tr, v.title); cell(tr, v.duplicate_of);
      // this pair's Jaccard: duplicate_of is the earliest match, matches[0] the best
      const pair = (v.matches || []).find((m) => m.id === v.duplicate_of);
      cell(tr, pair ? pair.jaccard.toFixed(3) : "");
      cell(tr, v.cluster_id);
      tr.addEventListener("click", () => explain(v.id, v.duplicate_of));
    });
  }
  function addVerdicts(vs) {
    const added = vs.filter((v) => v.duplicate);
    if (added.length) showLatest([...added, ...latest]);
  }
  // The latest 50 as the monitor has them now, titled (a verdict read before its ad came
  // untitled), with what the ticks brought that they do not hold.
  async function retitle() {
    const r = await json("api/duplicates?limit=50");
    if (r.ok) showLatest([...r.body, ...latest]);
  }
  async function loadLatest() {  // what this connection's ticks bring meanwhile is kept
    latest = [];
    await retitle();
  }

  function showSeries(points) {
    // Seconds without verdicts are absent from the series: they are zeros, not a slope.
    const byT = new Map(points.map((p) => [p.t, p]));
    const rated = [];
    if (points.length) {
      for (let t = points[0].t; t <= points[points.length - 1].t; t++) {
        const p = byT.get(t) || { verdicts: 0, duplicates: 0 };
        rated.push({ t: t, verdicts: p.verdicts, rate: p.verdicts ? p.duplicates / p.verdicts : 0 });
      }
    }
    SdChart.draw($("chart"), rated, { line: "verdicts", bars: "rate", barMax: 1, barLabel: "bars: duplicate rate, top = 100 %" });
  }

  async function clusters() {
    const r = await json("api/clusters?limit=10");
    if (!r.ok) return;  // the next round retries
    const c = r.body;
    const opens = (tr, x) => { tr.className = "dup"; tr.addEventListener("click", () => showCluster(x.cluster_id)); };
    fill($("biggest"), c.biggest, (tr, x) => { cell(tr, shownSize(x)); cell(tr, x.title || x.cluster_id); cell(tr, when(x.last_seen)); opens(tr, x); });
    fill($("growing"), c.fastest_growing, (tr, x) => { cell(tr, x.added_last_300s); cell(tr, shownSize(x)); cell(tr, x.title || x.cluster_id); opens(tr, x); });
    $("still").hidden = c.fastest_growing.length > 0;  // an empty table said nothing
  }

  // A cluster's ads among the verdicts the monitor keeps, newest first; a duplicate's row
  // opens it beside its match.
  async function showCluster(label) {
    const r = await json("api/cluster?id=" + encodeURIComponent(label) + "&limit=200");
    $("cluster").hidden = false;
    if (!r.ok) { $("cluster-name").textContent = visible(label); $("cluster-note").textContent = r.body.error; fill($("members"), [], () => {}); return; }
    const c = r.body;
    $("cluster-name").textContent = visible(c.cluster_id + (c.title ? " · " + c.title : ""));
    // size counts verdicts: an ad sent again with another text counts once more
    $("cluster-note").textContent = shownSize(c) + " verdicts" +
      (c.kept < c.size ? ", " + c.kept + " ads among the verdicts kept" : "") +
      (c.links && c.links < c.kept ? "; " + c.links + " distinct ad link" + (c.links === 1 ? "" : "s") + " among them (an ad scraped again is another id)" : "") +
      (c.members.length < c.kept ? "; the newest " + c.members.length + " listed" : "");
    fill($("members"), c.members, (tr, m) => {
      cell(tr, m.id); cell(tr, m.title); cell(tr, m.duplicate_of);
      cell(tr, m.jaccard == null ? "" : m.jaccard.toFixed(3));
      const link = anchor(m.link); const td = cell(tr, ""); if (link) td.appendChild(link);
      if (m.duplicate_of == null) return;
      tr.className = "dup";
      tr.addEventListener("click", (ev) => { if (ev.target.tagName !== "A") explain(m.id, String(m.duplicate_of)); });
    });
    $("cluster").scrollIntoView({ behavior: "smooth" });
  }

  function marked(el, text, spans) {
    // Spans count code points (Python's), not UTF-16 units: slice an array of code points.
    const cps = Array.from(text);
    const slice = (x, y) => visible(cps.slice(x, y).join(""));
    const parts = []; let at = 0;
    for (const [x, y] of spans) {
      if (x > at) parts.push(document.createTextNode(slice(at, x)));
      const m = document.createElement("mark"); m.textContent = slice(x, y); parts.push(m); at = y;
    }
    if (at < cps.length) parts.push(document.createTextNode(slice(at)));
    el.replaceChildren(...parts);
  }

  async function json(path) {
    // {ok, body}: a server error that is not JSON becomes a message, not an exception
    try {
      const r = await fetch(q(path));
      try { return { ok: r.ok, status: r.status, body: await r.json() }; }
      catch (e) { return { ok: false, status: r.status, body: { error: "HTTP " + r.status } }; }
    } catch (e) { return { ok: false, body: { error: "the monitor cannot be reached" } }; }
  }

  async function explain(id, other) {
    const path = "api/explain?id=" + encodeURIComponent(id) + (other ? "&other=" + encodeURIComponent(other) : "");
    const r = await json(path);
    const e = r.body;
    $("explain").hidden = false;
    if (!r.ok) { $("why").textContent = e.error; for (const k of ["a-id", "a-raw", "a-text", "b-id", "b-raw", "b-text"]) $(k).textContent = ""; return; }
    $("why").textContent = "Jaccard " + e.jaccard.toFixed(3) + " · MinHash estimate " + e.minhash_estimate.toFixed(3) +
      " · bands shared " + e.bands_shared + " of " + e.bands + " · " + e.reason +
      (e.warning ? " · " + e.warning : "") + (e.note ? " · " + e.note : "");
    for (const side of ["a", "b"]) {
      $(side + "-id").textContent = visible(e[side].id) + " (" + e[side].shingles + " shingles) ";
      const link = anchor(e[side].link); if (link) $(side + "-id").appendChild(link);
      $(side + "-raw").textContent = visible(e[side].raw);
      marked($(side + "-text"), e[side].text, e[side].differs);
    }
    $("explain").scrollIntoView({ behavior: "smooth" });
  }

  $("close").addEventListener("click", () => { $("explain").hidden = true; });
  $("cluster-close").addEventListener("click", () => { $("cluster").hidden = true; });
  $("search").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    // An id as typed first (ids may end in spaces), then without the spaces a paste adds.
    const typed = $("query").value, id = typed.trim(); if (!id) return;
    let r = await json("api/verdict?id=" + encodeURIComponent(typed));
    if (r.status === 404 && typed !== id) r = await json("api/verdict?id=" + encodeURIComponent(id));
    const v = r.body;
    $("found-cluster").hidden = !r.ok;
    if (!r.ok) { $("found").textContent = v.error; $("explain").hidden = true; return; }
    $("found").textContent = visible(v.id + ": " + (v.duplicate ? "duplicate of " + v.duplicate_of : "not a duplicate") + ", cluster " + v.cluster_id);
    $("found-cluster").onclick = () => showCluster(String(v.cluster_id != null ? v.cluster_id : v.id));
    if (v.duplicate) explain(v.id, v.duplicate_of);
    else $("explain").hidden = true;  // the last pair is not this id's
  });

  let current = null;
  function connect() {
    const es = current = new EventSource(q("api/events?since=0"));
    es.onopen = loadLatest;
    es.addEventListener("tick", (ev) => {
      const body = JSON.parse(ev.data);
      showStatus(body.summary.broker || {});
      showSummary(body.summary); showSeries(body.series); addVerdicts(body.verdicts);
    });
    es.onerror = async () => {
      $("status").textContent = "reconnecting…";
      // A page opened without its token would say "reconnecting…" for ever: ask why.
      const r = await json("api/summary");
      if (r.status === 401) {
        $("status").textContent = r.body.error + " (open the page as " + location.origin + location.pathname + "?token=…)";
        $("status").classList.add("warn");
      }
    };
  }
  connect(); clusters(); setInterval(() => { clusters(); retitle(); }, 5000);
  // A test's way to open the stream again, as after a lost connection (the old one closed).
  window.addEventListener("sd-reconnect", () => { current.close(); connect(); });
  window.sdExplain = explain;
})();
