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

  async function getJson(url) {
    let response;
    try {
      response = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
    } catch (err) {
      return { ok: false, status: 0, body: null, message: "The Airflow API server did not answer." };
    }
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
    return { ok: response.ok, status: response.status, body, message };
  }

  function badge(row) {
    return el("span", { className: `badge state-${row.state}` }, row.state_label);
  }

  function time(value) {
    if (!value) return "";
    return String(value).replace("T", " ").replace(/\.\d+/, "").replace(/(\+00:00|Z)$/, " UTC");
  }

  function origin(row) {
    const parts = [];
    if (row.connector) parts.push(`connector: ${row.connector.source || "?"} (${row.connector.status || "?"})`);
    if (row.locked) parts.push("locked from delete");
    return parts.join(", ");
  }

  function lastImport(last) {
    if (!last) return el("span", { className: "muted" }, "not by Airflow");
    return el(
      "span",
      {},
      airflowLink(last.dag_id, last.run_link),
      " / ",
      airflowLink(last.task_id + (last.map_index >= 0 ? `[${last.map_index}]` : ""), last.task_link),
      el("br"),
      el("code", { title: `run ${last.run_id}` }, last.run_id),
      el("span", { className: "muted" }, ` at ${time(last.at)}`),
    );
  }

  function number(value) {
    return typeof value === "number" ? value.toLocaleString("en") : value === null || value === undefined ? "" : String(value);
  }

  return { el, safeHref, airflowLink, appLink, getJson, badge, time, origin, lastImport, number };
})();
