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
        .catch(function () { conn.textContent = "disconnected"; });
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

  // Live: every daemon event may change what is shown.
  function connect() {
    const es = new EventSource("/events");
    es.addEventListener("hello", function () { conn.textContent = "live"; conn.dataset.state = "live"; refresh(); });
    es.addEventListener("roost", refresh);
    es.addEventListener("gone", function () { conn.textContent = "daemon stopped"; conn.dataset.state = "gone"; es.close(); });
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
  setInterval(function () { paintAges(document); }, 1000);
  connect();
  followLog();
})();
