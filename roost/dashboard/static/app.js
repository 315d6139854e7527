// mur-roost dashboard: live updates over server-sent events, local times, confirmed actions.
// Plain script, no build step, no third-party code; every request goes to this page's origin.
"use strict";
(function () {
  const csrf = document.querySelector('meta[name="csrf"]').content;
  const conn = document.getElementById("conn");
  const notice = document.getElementById("notice");
  const live = document.getElementById("live");

  function fmtAge(ms) {
    const s = Math.max(0, Math.floor(ms / 1000));
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m" + String(s % 60).padStart(2, "0") + "s";
    if (s < 86400) return Math.floor(s / 3600) + "h" + String(Math.floor((s % 3600) / 60)).padStart(2, "0") + "m";
    return Math.floor(s / 86400) + "d" + String(Math.floor((s % 86400) / 3600)).padStart(2, "0") + "h";
  }

  // Times in the browser's own zone; ages kept current once a second.
  function paintTimes(root) {
    root.querySelectorAll("time.when").forEach(function (t) {
      const d = new Date(Number(t.dataset.ms));
      t.textContent = d.toLocaleString();
      t.title = d.toISOString();
    });
    paintAges(root);
    // Trace marks: their place on the axis (no inline styles under the page's CSP).
    root.querySelectorAll(".mark[data-left]").forEach(function (m) {
      m.style.left = m.dataset.left + "%";
      if (m.classList.contains("bar")) m.style.width = Math.max(0.4, Number(m.dataset.width)) + "%";
    });
    root.querySelectorAll(".indent[data-depth]").forEach(function (i) {
      i.style.width = (Number(i.dataset.depth) * 0.9) + "rem";
    });
    paintTree(root);
  }

  // The delegation tree's timeline: bars of running jobs grow to now.
  function paintTree(root) {
    const now = Date.now();
    root.querySelectorAll(".timeline[data-t0]").forEach(function (fig) {
      const t0 = Number(fig.dataset.t0);
      const t1 = fig.hasAttribute("data-live") ? now : Number(fig.dataset.t1);
      const span = Math.max(1, t1 - t0);
      fig.querySelectorAll(".tl-bar").forEach(function (bar) {
        const start = Number(bar.dataset.start);
        const end = bar.dataset.end ? Number(bar.dataset.end) : now;
        bar.style.left = (100 * (start - t0) / span) + "%";
        bar.style.width = Math.max(0.4, 100 * (end - start) / span) + "%";
        bar.dataset.growing = bar.dataset.end ? "no" : "yes";
      });
      fig.querySelectorAll(".mark.point[data-start]").forEach(function (p) {
        p.style.left = (100 * (Number(p.dataset.start) - t0) / span) + "%";
      });
      const label = fig.querySelector(".tl-span");
      if (label) label.textContent = "+" + ((t1 - t0) / 1000).toFixed(1) + " s";
    });
  }
  function paintAges(root) {
    const now = Date.now();
    root.querySelectorAll("time.age").forEach(function (t) {
      const start = Number(t.dataset.ms);
      if (t.dataset.end) {
        t.textContent = "ran " + fmtAge(Number(t.dataset.end) - start);
      } else {
        t.textContent = "up " + fmtAge(now - start);
      }
      t.title = new Date(start).toLocaleString();
    });
  }

  // Re-render the live part from the server, keeping keyboard focus where it was.
  let pending = null;
  function refresh() {
    if (!live || !live.dataset.fragment) return;
    if (pending) return;
    pending = setTimeout(function () {
      pending = null;
      fetch(live.dataset.fragment, { credentials: "same-origin" })
        .then(function (r) { return r.text(); })
        .then(function (html) {
          const focused = document.activeElement && document.activeElement.id;
          live.innerHTML = html;
          paintTimes(live);
          if (focused) {
            const again = document.getElementById(focused);
            if (again) again.focus();
          }
        })
        .catch(function () { conn.textContent = "disconnected"; conn.dataset.state = "retry"; });
    }, 250);
  }

  function say(text, bad) {
    notice.textContent = text;
    notice.className = bad ? "error" : "ok";
  }

  // Actions: a confirmation, then a same-origin POST carrying the page's CSRF value.
  const verbs = { cancel: "Cancel", end: "End", drain: "Drain" };
  document.addEventListener("click", function (ev) {
    const btn = ev.target.closest("button[data-action]");
    if (!btn) return;
    const what = btn.dataset.action;
    const sure = what === "drain"
      ? "Drain the daemon? It takes no new work and stops once running jobs have finished."
      : verbs[what] + " " + btn.dataset.label + "? This cannot be undone.";
    if (!window.confirm(sure)) return;
    btn.disabled = true;
    const url = "/action/" + what + (btn.dataset.id ? "/" + encodeURIComponent(btn.dataset.id) : "");
    fetch(url, { method: "POST", credentials: "same-origin", headers: { "X-Roost-CSRF": csrf } })
      .then(function (r) { return r.json().then(function (body) { return [r.ok, body]; }); })
      .then(function (res) { say(res[1].message, !res[0]); refresh(); })
      .catch(function () { say("the dashboard did not answer", true); })
      .finally(function () { btn.disabled = false; });
  });

  // The daemon's state, said in the header; a daemon that stopped, said in a sentence.
  const daemon = document.getElementById("daemon");
  function banner(text) {
    const shown = document.querySelector("main .error");
    if (shown && shown.textContent === text) return;  // the page already says it
    let gone = document.getElementById("gone");
    if (!gone) {
      gone = document.createElement("p");
      gone.id = "gone";
      gone.setAttribute("role", "alert");
      document.getElementById("main").prepend(gone);
    }
    gone.textContent = text;
  }
  function showState(state) {
    daemon.textContent = state === "gone" ? "daemon stopped" : state;
    daemon.dataset.state = state;
  }

  // The events page: live rows, filtered as the page was.
  const evlist = document.getElementById("events");
  function addEvent(ev) {
    if (!evlist) return;
    const text = (ev.operation || "") + " " + (ev.type || "") + " " + JSON.stringify(ev.attributes || {});
    if (evlist.dataset.q && text.indexOf(evlist.dataset.q) < 0) return;
    const none = document.getElementById("no-events");
    if (none) none.remove();
    const row = document.createElement("li");
    row.className = "ev";
    row.dataset.type = ev.type || "";
    row.dataset.operation = ev.operation || "";
    const t = document.createElement("time");
    t.className = "when";
    t.dataset.ms = String(ev.timestamp || Date.now());
    t.textContent = new Date(Number(t.dataset.ms)).toLocaleString();
    const op = document.createElement("strong");
    op.textContent = ev.operation || ev.type;
    const kind = document.createElement("span");
    kind.className = "badge";
    kind.textContent = (ev.type || "").replace("operation.", "");
    kind.dataset.state = kind.textContent;
    const attrs = document.createElement("span");
    attrs.className = "meta";
    attrs.textContent = Object.keys(ev.attributes || {}).map(function (k) {
      return k.split(".").pop() + "=" + ev.attributes[k];
    }).join(" ");
    row.append(t, " ", op, " ", kind, " ", attrs);
    evlist.prepend(row);
  }

  // Live: every daemon event may change what is shown.
  function connect() {
    const es = new EventSource("/events");
    es.addEventListener("hello", function () {
      conn.textContent = "live"; conn.dataset.state = "live";
      const gone = document.getElementById("gone");
      if (gone) { gone.remove(); }
      refresh();
    });
    es.addEventListener("roost", function (ev) { addEvent(JSON.parse(ev.data)); refresh(); });
    es.addEventListener("status", function (ev) {
      const s = JSON.parse(ev.data);
      showState(s.draining ? "draining" : "serving");
      refresh();
    });
    es.addEventListener("gone", function (ev) {
      conn.textContent = "daemon stopped"; conn.dataset.state = "gone";
      showState("gone");
      banner(JSON.parse(ev.data).message);
      es.close();
      setTimeout(connect, 3000);  // it may come back
    });
    es.onerror = function () { conn.textContent = "reconnecting…"; conn.dataset.state = "retry"; };
  }

  // The job page's log, followed live.
  function followLog() {
    const pre = document.getElementById("log");
    if (!pre) return;
    const es = new EventSource(pre.dataset.log);
    let lines = 0;
    es.addEventListener("line", function (ev) {
      const item = JSON.parse(ev.data);
      const row = document.createElement("span");
      row.className = "l-" + (item.stream || "log");
      const label = document.createElement("b");
      label.textContent = (item.stream || item.file || "log").padEnd(6) + " | ";
      row.appendChild(label);
      row.appendChild(document.createTextNode(item.line + "\n"));
      pre.appendChild(row);
      lines += 1;
      pre.scrollTop = pre.scrollHeight;
    });
    es.addEventListener("end", function () {
      es.close();
      const row = document.createElement("i");
      row.textContent = lines ? "(ended)" : "(nothing was written)";
      pre.appendChild(row);
      refresh();
    });
    es.addEventListener("failed", function (ev) { pre.textContent = JSON.parse(ev.data).message; es.close(); });
  }

  paintTimes(document);
  setInterval(function () { paintAges(document); paintTree(document); }, 1000);
  // A page with charts is redrawn as the daemon takes new samples, events or not.
  if (live && live.dataset.every) setInterval(refresh, Number(live.dataset.every));
  connect();
  followLog();
})();
