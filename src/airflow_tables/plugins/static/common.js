// Shared by the Data Tables pages. Every value from the server reaches the DOM through
// textContent or a checked href, never as HTML.
"use strict";

const DT = (() => {
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "className") node.className = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  // Only http(s) URLs and paths of this server: never javascript:, data: or protocol-relative.
  function safeHref(url) {
    if (typeof url !== "string") return null;
    if (/^https?:\/\//i.test(url)) return url;
    if (url.startsWith("/") && !url.startsWith("//")) return url;
    return null;
  }

  // The page is shown in a sandboxed iframe of the Airflow UI, which may not navigate the
  // top window itself; the Airflow UI is a single-page app on the same origin, so a link to
  // one of its pages pushes the route there and lets its router follow.
  function openInAirflow(event) {
    if (window.top === window || event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) return;
    try {
      const top = window.top;
      top.history.pushState(null, "", event.currentTarget.getAttribute("href"));
      top.dispatchEvent(new PopStateEvent("popstate", { state: null }));
      event.preventDefault();
    } catch (err) {
      // Not the same origin after all: the link opens here.
    }
  }

  function airflowLink(text, href) {
    const safe = safeHref(href);
    if (!safe) return document.createTextNode(text);
    return el("a", { href: safe, onclick: openInAirflow }, text);
  }

  // The sandbox allows no pop-ups either: the Airflow UI's window opens the new tab instead.
  function openOutside(event) {
    if (window.top === window) return;
    try {
      window.top.open(event.currentTarget.getAttribute("href"), "_blank", "noopener,noreferrer");
      event.preventDefault();
    } catch (err) {
      // Not the same origin after all: the browser decides.
    }
  }

  function appLink(text, href) {
    const safe = safeHref(href);
    if (!safe) return null;
    return el("a", { href: safe, target: "_blank", rel: "noopener noreferrer", onclick: openOutside }, text);
  }

  // etag: the one the last answer gave; the server then answers 304 (unchanged: body null) cheaply.
  async function getJson(url, etag) {
    let response;
    const headers = { Accept: "application/json" };
    if (etag) headers["If-None-Match"] = etag;
    try {
      response = await fetch(url, { headers, credentials: "same-origin", cache: "no-store" });
    } catch (err) {
      return { ok: false, status: 0, body: null, message: "The Airflow API server did not answer." };
    }
    if (response.status === 304) return { ok: true, status: 304, body: null, message: null, etag };
    let body = null;
    try {
      body = await response.json();
    } catch (err) {
      body = null;
    }
    let message = null;
    if (!response.ok) {
      const detail = body && typeof body.detail === "string" ? body.detail : response.statusText;
      message = response.status === 401 ? "Log in to Airflow to see Data Tables."
        : response.status === 403 ? "You may not read connections and assets in Airflow."
        : `The Airflow API server answered ${response.status}: ${detail}`;
    }
    return { ok: response.ok, status: response.status, body, message, etag: response.headers.get("ETag") };
  }

  function badge(row) {
    return el("span", { className: `badge state-${row.state}` }, row.state_label);
  }

  // The user's Airflow time zone: the one picked in the Airflow UI (its "timezone" setting, kept
  // in this origin's localStorage), else the browser's, as the Airflow UI itself does.
  function timeZone() {
    try {
      const picked = JSON.parse(window.localStorage.getItem("timezone") || "null");
      if (typeof picked === "string" && picked) {
        new Intl.DateTimeFormat("en", { timeZone: picked });
        return picked;
      }
    } catch (err) {
      // Not set, not JSON, or not a zone this browser knows: the browser's own.
    }
    return Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  }

  const ZONE = timeZone();
  const FORMAT = new Intl.DateTimeFormat("en-CA", {
    timeZone: ZONE, year: "numeric", month: "2-digit", day: "2-digit",
    hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23", timeZoneName: "short",
  });

  function toDate(value) {
    if (value === null || value === undefined || value === "") return null;
    const date = typeof value === "number" ? new Date(value * 1000) : new Date(String(value));
    return Number.isNaN(date.getTime()) ? null : date;
  }

  // One format for every time on the page: 2026-05-20 14:03:07 CEST, in the user's Airflow time zone.
  function time(value) {
    const date = toDate(value);
    if (!date) return "";
    const parts = Object.fromEntries(FORMAT.formatToParts(date).map((p) => [p.type, p.value]));
    return `${parts.year}-${parts.month}-${parts.day} ${parts.hour}:${parts.minute}:${parts.second} ${parts.timeZoneName || ZONE}`;
  }

  function duration(seconds) {
    const s = Math.max(0, Math.round(seconds));
    if (s < 60) return `${s} s`;
    if (s < 3600) return `${Math.floor(s / 60)} min`;
    if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
    return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
  }

  // "3 min ago" from a time the server gave; "" when there is none.
  function age(value) {
    const date = toDate(value);
    return date ? `${duration((Date.now() - date.getTime()) / 1000)} ago` : "";
  }

  function text(value) {
    return value === null || value === undefined ? "" : String(value);
  }

  function bytes(value) {
    if (typeof value !== "number") return "";
    const units = ["B", "KiB", "MiB", "GiB"];
    let size = value;
    let unit = 0;
    while (size >= 1024 && unit < units.length - 1) {
      size /= 1024;
      unit += 1;
    }
    return `${unit ? size.toFixed(1) : size} ${units[unit]}`;
  }

  function connector(row) {
    if (!row.connector) return "";
    const status = row.connector.status ? ` (${row.connector.status})` : " (status not given)";
    return `connector: ${text(row.connector.source)}${status}`;
  }

  function origin(row) {
    const parts = [];
    if (row.connector) parts.push(connector(row));
    if (row.locked) parts.push("locked from delete");
    return parts.join(", ");
  }

  const OUTCOMES = { recorded: "", failed: "read failed / task failed", running: "task still running", unchanged: "unchanged, nothing sent" };

  function taskName(last) {
    return last.task_id + (last.map_index >= 0 ? `[${last.map_index}]` : "");
  }

  function lastImport(last) {
    if (!last) return el("span", { className: "muted" }, "not by Airflow");
    const outcome = OUTCOMES[last.outcome] || "";
    return el(
      "span",
      {},
      airflowLink(last.dag_id, last.run_link),
      " / ",
      airflowLink(taskName(last), last.task_link),
      outcome ? el("span", { className: `outcome outcome-${last.outcome}` }, ` (${outcome})`) : null,
      el("br"),
      el("span", { className: "muted" }, time(last.at)),
    );
  }

  function number(value) {
    return typeof value === "number" ? value.toLocaleString("en") : value === null || value === undefined ? "" : String(value);
  }

  return {
    el, safeHref, airflowLink, appLink, getJson, badge, time, age, duration, text, bytes, connector, origin,
    lastImport, taskName, number, OUTCOMES, ZONE,
  };
})();
