// The "Data Tables" page: every datatables connection, one department each (pick another in
// the form, or with ?conn_id=...&project_id=...), its tables a page at a time. While a table
// is being read, the page asks again every refresh interval; the server shares its listings.
"use strict";

(() => {
  const { el, getJson, badge, time, origin, lastImport, appLink, number } = DT;
  const PAGE = 100;
  const root = document.getElementById("connections");
  const status = document.getElementById("status");
  const params = new URLSearchParams(window.location.search);
  const sections = new Map(); // conn_id -> {info, project, state, q, offset, node, last}
  // The states and their words come from the server (api/connections), in the order rows are sorted;
  // the summary line names them in its own order, the words still the server's.
  let states = [];
  const SUMMARY_ORDER = ["ready", "being_read", "failed"];
  let timer = null;

  function summaryLine(body) {
    const c = body.counts || {};
    const shown = [...states].sort((a, b) => SUMMARY_ORDER.indexOf(a.state) - SUMMARY_ORDER.indexOf(b.state));
    const parts = [
      `${number(body.total)} tables: ${shown.map((s) => `${number(c[s.state] || 0)} ${s.label}`).join(", ")}.`,
    ];
    if (body.credits) {
      parts.push(
        `Credits spent by Airflow: ${number(body.credits.today)} today (UTC), ${number(body.credits.last_7_days)} in the last 7 days.`,
      );
    }
    return parts.join(" ");
  }

  function tableOf(rows) {
    const head = el(
      "tr",
      {},
      ["CardID", "Name", "Rows", "State", "Last completed", "Locked / connector", "Last import by Airflow (DAG / task, run)", ""].map(
        (text) => el("th", { scope: "col" }, text),
      ),
    );
    const body = rows.map((row) =>
      el(
        "tr",
        { "data-card-id": row.card_id, "data-state": row.state },
        el("td", {}, el("code", {}, row.card_id)),
        el("td", {}, row.name || ""),
        el("td", { className: "num" }, number(row.rows)),
        el("td", {}, badge(row)),
        el("td", {}, time(row.completed)),
        el("td", {}, origin(row)),
        el("td", {}, lastImport(row.last)),
        el("td", {}, appLink("Open", row.app_link)),
      ),
    );
    return el("table", {}, el("thead", {}, head), el("tbody", {}, body));
  }

  function pager(section, body) {
    if (body.matching <= body.limit && body.offset === 0) return null;
    const first = body.matching === 0 ? 0 : body.offset + 1;
    const last = Math.min(body.offset + body.limit, body.matching);
    const move = (offset) => () => {
      section.offset = offset;
      loadSection(section);
    };
    return el(
      "div",
      { className: "pager" },
      el("button", { type: "button", disabled: body.offset === 0, onclick: move(Math.max(0, body.offset - body.limit)) }, "Previous"),
      el("span", {}, `${number(first)}–${number(last)} of ${number(body.matching)}`),
      el("button", { type: "button", disabled: last >= body.matching, onclick: move(body.offset + body.limit) }, "Next"),
    );
  }

  function controls(section) {
    const department = el("input", { name: "project_id", value: section.project || "", list: "departments", size: 24, "aria-label": "Department (ProjectID)" });
    const state = el(
      "select",
      { name: "state", "aria-label": "State" },
      [["", "All states"], ...states.map((s) => [s.state, s.label])].map(([value, text]) =>
        el("option", { value, selected: section.state === value }, text),
      ),
    );
    const search = el("input", { type: "search", name: "q", value: section.q, placeholder: "CardID, name or DAG", "aria-label": "Search" });
    const form = el(
      "form",
      {
        className: "controls",
        onsubmit: (event) => {
          event.preventDefault();
          section.project = department.value.trim() || section.info.project_id;
          section.state = state.value;
          section.q = search.value.trim();
          section.offset = 0;
          const url = new URL(window.location.href);
          url.searchParams.set("conn_id", section.info.conn_id);
          url.searchParams.set("project_id", section.project || "");
          window.history.replaceState(null, "", url);
          loadSection(section);
        },
      },
      el("label", {}, "Department ", department),
      el("label", {}, "State ", state),
      el("label", {}, "Search ", search),
      el("button", { type: "submit" }, "Show"),
    );
    state.addEventListener("change", () => form.requestSubmit());
    return form;
  }

  function render(section, body, message) {
    const info = section.info;
    const title = el("h2", {}, info.conn_id, " ", el("span", { className: "muted" }, info.service ? `(${info.service})` : ""));
    const parts = [title];
    if (info.error) {
      parts.push(el("p", { className: "error" }, `Connection ${info.conn_id} cannot be used: ${info.error}`));
      section.node.replaceChildren(...parts);
      return;
    }
    parts.push(controls(section));
    if (message) parts.push(el("p", { className: "error" }, message));
    else if (body.error) parts.push(el("p", { className: "error", "data-role": "service-error" }, `Department ${body.project_id}: ${body.error}`));
    else {
      parts.push(el("p", { className: "summary" }, `Department `, el("code", {}, body.project_id), `: ${summaryLine(body)}`));
      parts.push(body.rows.length ? tableOf(body.rows) : el("p", { className: "muted" }, "No tables match."));
      parts.push(pager(section, body));
    }
    section.node.replaceChildren(...parts.filter(Boolean));
  }

  async function loadSection(section) {
    if (section.info.error) {
      render(section, null, null);
      return section;
    }
    if (!section.project) {
      render(section, null, "This connection has no project_id extra: name a department above.");
      section.last = null;
      return section;
    }
    const query = new URLSearchParams({ conn_id: section.info.conn_id, project_id: section.project, offset: section.offset, limit: PAGE });
    if (section.state) query.set("state", section.state);
    if (section.q) query.set("q", section.q);
    const answer = await getJson(`api/tables?${query}`);
    section.last = answer.ok ? answer.body : null;
    render(section, answer.body, answer.ok ? null : answer.message);
    stamp();
    return section;
  }

  function stamp() {
    const bodies = [...sections.values()].map((s) => s.last).filter(Boolean);
    const reading = bodies.some((b) => b.being_read);
    const asOf = bodies.length ? Math.min(...bodies.map((b) => b.as_of)) : null;
    const refresh = bodies.length ? Math.min(...bodies.map((b) => b.refresh_seconds)) : 30;
    const when = asOf ? `Listed at ${new Date(asOf * 1000).toLocaleTimeString()}.` : "";
    status.textContent = reading ? `${when} A table is being read: this page refreshes every ${refresh} s.` : when;
    clearTimeout(timer);
    if (reading) timer = setTimeout(() => sections.forEach(loadSection), Math.max(1, refresh) * 1000);
  }

  async function start() {
    const answer = await getJson("api/connections");
    if (!answer.ok) {
      status.textContent = "";
      root.replaceChildren(el("p", { className: "error" }, answer.message));
      return;
    }
    const infos = answer.body.connections;
    states = answer.body.states || [];
    if (!infos.length) {
      status.textContent = "";
      root.replaceChildren(el("p", { className: "muted" }, "No datatables connections that you may read."));
      return;
    }
    const defaults = [...new Set(infos.map((i) => i.project_id).filter(Boolean))];
    root.replaceChildren(el("datalist", { id: "departments" }, defaults.map((p) => el("option", { value: p }))));
    for (const info of infos) {
      const picked = params.get("conn_id") === info.conn_id ? params.get("project_id") : null;
      const node = el("section", { "data-conn-id": info.conn_id });
      root.append(node);
      sections.set(info.conn_id, { info, project: picked || info.project_id, state: "", q: "", offset: 0, node, last: null });
    }
    await Promise.all([...sections.values()].map(loadSection));
  }

  start();
})();
