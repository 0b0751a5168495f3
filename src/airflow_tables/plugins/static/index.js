// The "Data Tables" page: every datatables connection, one department each, its tables a page at a
// time; a table's own page (?card_id=...). The page's state (department, filter, search, sort, the
// table shown) is in its URL, so a link can be shared. It stays live: it polls the server a few
// times per refresh interval with the ETag of what it shows (an unchanged listing costs a 304); the
// server shares one listing per department and interval between all viewers.
"use strict";

(() => {
  const { el, getJson, badge, time, age, duration, text, bytes, connector, origin, lastImport, taskName, appLink, airflowLink, number, OUTCOMES, ZONE } = DT;
  const PAGE = 100;
  const root = document.getElementById("connections");
  const status = document.getElementById("status");
  const sections = new Map(); // conn_id -> {info, project, state, q, sort, desc, offset, node, results, last, etag}
  // The states and their words come from the server (api/connections), in the order rows are sorted;
  // the summary line names them in its own order, the words still the server's.
  let states = [];
  let refresh = 30;
  let timer = null;
  let detail = null; // the table page shown: {conn_id, project_id, card_id, body}
  const SUMMARY_ORDER = ["ready", "being_read", "failed"];
  // Sortable columns: [header, sort key, class]
  const COLUMNS = [
    ["Table", "name", "col-table"],
    ["Rows", "rows", "col-rows num"],
    ["State", "state", "col-state"],
    ["Last read", "completed", "col-read"],
    ["Domain / origin", "domain", "col-domain"],
    ["Last import by Airflow", "last_import", "col-import"],
  ];

  // -- the URL ------------------------------------------------------------------------------------

  function readUrl() {
    const params = new URLSearchParams(window.location.search);
    return {
      conn_id: params.get("conn_id") || "",
      project_id: params.get("project_id") || "",
      state: params.get("state") || "",
      q: params.get("q") || "",
      sort: params.get("sort") || "attention",
      desc: params.get("desc") === "true",
      offset: Math.max(0, parseInt(params.get("offset") || "0", 10) || 0),
      card_id: params.get("card_id") || "",
    };
  }

  function writeUrl(section, card_id, push) {
    const url = new URL(window.location.href);
    const values = {
      conn_id: section.info.conn_id,
      project_id: section.project || "",
      state: section.state,
      q: section.q,
      sort: section.sort === "attention" ? "" : section.sort,
      desc: section.desc ? "true" : "",
      offset: section.offset ? String(section.offset) : "",
      card_id: card_id || "",
    };
    for (const [name, value] of Object.entries(values)) {
      if (value) url.searchParams.set(name, value);
      else url.searchParams.delete(name);
    }
    if (push) window.history.pushState(null, "", url);
    else window.history.replaceState(null, "", url);
  }

  // -- the list ------------------------------------------------------------------------------------

  function summaryLine(body) {
    const c = body.counts || {};
    const shown = [...states].sort((a, b) => SUMMARY_ORDER.indexOf(a.state) - SUMMARY_ORDER.indexOf(b.state));
    return `${number(body.total)} tables: ${shown.map((s) => `${number(c[s.state] || 0)} ${s.label}`).join(", ")}.`;
  }

  function creditsLine(body) {
    if (!body.credits) return null;
    const days = (body.credits.by_day || []).map((d) => `${d.day}: ${number(d.credits)}`).join(", ");
    return el(
      "p",
      { className: "credits", title: days ? `Per day (UTC): ${days}` : null },
      `Credits spent by Airflow: ${number(body.credits.today)} today (UTC), ${number(body.credits.last_7_days)} in the last 7 days`,
      days ? el("span", { className: "muted" }, ` (${days})`) : null,
      ".",
      budgetText(body.credits),
    );
  }

  function budgetText(credits) {
    if (credits.budget === null || credits.budget === undefined) return null;
    if (credits.budget_error) return ` Budget: ${number(credits.budget)} a day; today's claims could not be counted (${credits.budget_error}).`;
    return ` Budget: ${number(credits.budget)} a day; ${number(credits.budget_spent)} claimed today, ${number(credits.budget_left)} left.`;
  }

  function header(section) {
    return el(
      "tr",
      {},
      COLUMNS.map(([label, key, className]) => {
        const sorted = section.sort === key;
        const direction = sorted ? (section.desc ? "descending" : "ascending") : "none";
        const arrow = sorted ? (section.desc ? " ▼" : " ▲") : "";
        return el(
          "th",
          { scope: "col", className, "aria-sort": direction },
          el(
            "button",
            {
              type: "button",
              className: "sort",
              "data-sort": key,
              title: `Sort by ${label.toLowerCase()}`,
              onclick: () => {
                if (section.sort === key) section.desc = !section.desc;
                else {
                  section.sort = key;
                  section.desc = key === "completed" || key === "last_import" || key === "rows";
                }
                section.offset = 0;
                changed(section);
              },
            },
            label,
            arrow,
          ),
        );
      }),
    );
  }

  function readCell(row) {
    const parts = [];
    if (row.completed) parts.push(el("span", {}, time(row.completed)), el("br"), el("span", { className: "muted age" }, age(row.completed)));
    else parts.push(el("span", { className: "muted" }, row.state === "being_read" ? "being read" : "never"));
    const fresh = row.freshness || {};
    if (fresh.stale) parts.push(" ", el("span", { className: "badge stale", title: text(fresh.reason) }, "Stale"), el("div", { className: "reason" }, text(fresh.reason)));
    return parts;
  }

  function openTable(section, row) {
    detail = { conn_id: section.info.conn_id, project_id: section.project, card_id: row.card_id, body: null };
    writeUrl(section, row.card_id, true);
    showDetail();
  }

  function tableOf(section, rows) {
    const body = rows.map((row) =>
      el(
        "tr",
        {
          "data-card-id": row.card_id,
          "data-state": row.state,
          tabindex: 0,
          className: row.freshness && row.freshness.stale ? "is-stale" : null,
          onkeydown: (event) => {
            if (event.key === "Enter" && event.target === event.currentTarget) openTable(section, row);
          },
        },
        el(
          "td",
          { className: "col-table" },
          el("a", { href: `?${new URLSearchParams({ conn_id: section.info.conn_id, project_id: section.project, card_id: row.card_id })}`, className: "table-link", onclick: (event) => { event.preventDefault(); openTable(section, row); } }, text(row.name) || row.card_id),
          el("br"),
          el("code", { className: "card-id" }, row.card_id),
          " ",
          appLink("Open", row.app_link),
        ),
        el("td", { className: "col-rows num" }, number(row.rows)),
        el("td", { className: "col-state" }, badge(row), row.reason ? el("div", { className: "reason" }, row.reason) : null),
        el("td", { className: "col-read" }, readCell(row)),
        el("td", { className: "col-domain" }, text(row.domain), row.domain && origin(row) ? el("br") : null, el("span", { className: "muted" }, origin(row))),
        el("td", { className: "col-import" }, lastImport(row.last), setAsideNote(row.last)),
      ),
    );
    return el("table", { className: "tables" }, el("thead", {}, header(section)), el("tbody", {}, body));
  }

  function pager(section, body) {
    if (body.matching <= body.limit && body.offset === 0) return null;
    const first = body.matching === 0 ? 0 : body.offset + 1;
    const last = Math.min(body.offset + body.limit, body.matching);
    const move = (offset) => () => {
      section.offset = offset;
      changed(section);
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
    const department = el("input", { name: "project_id", value: section.project || "", list: "departments", size: 16, "aria-label": "Department (ProjectID)" });
    const state = el(
      "select",
      { name: "state", "aria-label": "State" },
      [["", "All states"], ...states.map((s) => [s.state, s.label])].map(([value, label]) =>
        el("option", { value, selected: section.state === value }, label),
      ),
    );
    const search = el("input", { type: "search", name: "q", value: section.q, placeholder: "CardID, name, DAG or column", "aria-label": "Search", "aria-keyshortcuts": "/", size: 24 });
    const apply = () => {
      section.project = department.value.trim() || section.info.project_id;
      section.state = state.value;
      section.q = search.value.trim();
      section.offset = 0;
      section.etag = null;
      changed(section);
    };
    let typing = null;
    search.addEventListener("input", () => {
      clearTimeout(typing);
      typing = setTimeout(apply, 300);
    });
    state.addEventListener("change", apply);
    section.search = search;
    return el(
      "form",
      { className: "controls", onsubmit: (event) => { event.preventDefault(); apply(); } },
      el("label", {}, "Department ", department),
      el("label", {}, "State ", state),
      el("label", {}, "Search ", search),
      el("button", { type: "submit" }, "Show"),
    );
  }

  function listingStatus(body) {
    const parts = [];
    if (body.error) {
      const when = body.error_at ? ` (${time(body.error_at)})` : "";
      parts.push(el("p", { className: "error", "data-role": "service-error" }, `Department ${body.project_id}: ${body.error}${when}`));
      if (body.total) parts.push(el("p", { className: "warning", "data-role": "stale-listing" }, `Showing the last listing, taken ${time(body.as_of)} (${age(body.as_of)}).`));
    }
    if (body.pending && !body.total && !body.error) {
      parts.push(el("p", { className: "muted", "data-role": "pending" }, `Listing department ${body.project_id}: the service has not answered yet; this page shows it as soon as it does.`));
    }
    return parts;
  }

  function renderResults(section, body, message) {
    const focused = document.activeElement && document.activeElement.closest ? document.activeElement.closest("tr[data-card-id]") : null;
    const focusedId = focused && section.results.contains(focused) ? focused.getAttribute("data-card-id") : null;
    const parts = [];
    if (message) parts.push(el("p", { className: "error" }, message));
    else if (body) {
      parts.push(...listingStatus(body));
      if (body.total || !body.error) {
        parts.push(el("p", { className: "summary" }, "Department ", el("code", {}, body.project_id), `: ${summaryLine(body)}`));
        parts.push(creditsLine(body));
        if (section.q) parts.push(el("p", { className: "muted" }, `Column names are searched in the ${number(body.columns_known)} tables whose columns this server has read.`));
        parts.push(body.rows.length ? tableOf(section, body.rows) : el("p", { className: "muted" }, body.pending ? "" : "No tables match."));
        parts.push(pager(section, body));
      }
    }
    section.results.replaceChildren(...parts.filter(Boolean));
    if (focusedId) {
      const again = section.results.querySelector(`tr[data-card-id="${CSS.escape(focusedId)}"]`);
      if (again) again.focus();
    }
  }

  function renderSection(section) {
    const info = section.info;
    const title = el("h2", {}, info.conn_id, " ", el("span", { className: "muted" }, info.service ? `(${info.service})` : ""));
    if (info.error) {
      section.node.replaceChildren(title, el("p", { className: "error" }, `Connection ${info.conn_id} cannot be used: ${info.error}`));
      return;
    }
    section.results = el("div", { className: "results", "aria-live": "polite" });
    section.node.replaceChildren(title, controls(section), section.results);
  }

  async function loadSection(section, quiet) {
    if (section.info.error) return;
    if (!section.project) {
      renderResults(section, null, "This connection has no project_id extra: name a department above.");
      return;
    }
    const query = new URLSearchParams({ conn_id: section.info.conn_id, project_id: section.project, offset: section.offset, limit: PAGE });
    if (section.state) query.set("state", section.state);
    if (section.q) query.set("q", section.q);
    if (section.sort !== "attention") query.set("sort", section.sort);
    if (section.desc) query.set("desc", "true");
    const answer = await getJson(`api/tables?${query}`, quiet ? section.etag : null);
    if (answer.status === 304) return;
    section.etag = answer.ok ? answer.etag : null;
    section.last = answer.ok ? answer.body : null;
    if (!detail) renderResults(section, answer.body, answer.ok ? null : answer.message);
    stamp();
  }

  function changed(section) {
    section.etag = null;
    writeUrl(section, "", false);
    const form = section.node.querySelector("form.controls");
    if (form) form.replaceWith(controls(section));
    loadSection(section, false);
  }

  function stamp() {
    const bodies = [...sections.values()].map((s) => s.last).filter(Boolean);
    const asOf = bodies.length ? Math.min(...bodies.map((b) => b.as_of)) : null;
    const when = asOf ? `Listed ${time(asOf)} (${age(asOf)}).` : "";
    status.textContent = `${when} Updates by itself every ${number(refresh)} s. Times in ${ZONE}. Keys: / search, ↑ ↓ rows, Enter opens a table, Esc goes back.`;
  }

  // -- one table's page ----------------------------------------------------------------------------

  function fact(label, ...value) {
    return [el("dt", {}, label), el("dd", {}, ...value)];
  }

  // -- rows set aside (on_bad_rows="quarantine") ------------------------------------------------------

  function setAsideCount(count) {
    return `${number(count)} ${count === 1 ? "row" : "rows"} set aside`;
  }

  // Where the rejects were written, as the task's (templated) rejects_path made it: a link only for
  // an http(s) URL; a local path or an object-storage URI (s3://...) is text to copy, never a link
  // (DT.safeHref would take "/tmp/x.csv" for a path of this server).
  function rejectsLocation(rejects) {
    if (typeof rejects !== "string" || !rejects) return null;
    if (/^https?:\/\//i.test(rejects)) return el("span", { className: "rejects" }, "rejects: ", appLink(rejects, rejects));
    return el("span", { className: "rejects" }, "rejects: ", el("code", { className: "rejects-path", title: rejects }, rejects));
  }

  // An import's quarantine: nothing when none ran, "no bad rows" when it found none.
  function setAside(made) {
    if (typeof made.bad_rows !== "number") return null;
    if (made.bad_rows === 0) return el("span", { className: "muted" }, "no bad rows");
    return [el("span", { className: "set-aside" }, setAsideCount(made.bad_rows)), el("br"), rejectsLocation(made.rejects)];
  }

  // The list's last import: the count only (the table's page says where the rejects are).
  function setAsideNote(last) {
    if (!last || typeof last.bad_rows !== "number" || last.bad_rows <= 0) return null;
    return [el("br"), el("span", { className: "set-aside", title: last.rejects ? `Rejects: ${last.rejects}` : null }, setAsideCount(last.bad_rows))];
  }

  function importsTable(imports) {
    if (!imports.length) return el("p", { className: "muted" }, "Airflow has not imported this table.");
    // The column shows only where a quarantine ran: most tables never set a row aside.
    const quarantined = imports.some((made) => typeof made.bad_rows === "number");
    const labels = ["When", "DAG / task", "Run", "Outcome", "Credits", "File", ...(quarantined ? ["Bad rows"] : [])];
    const head = el("tr", {}, labels.map((label) => el("th", { scope: "col" }, label)));
    const rows = imports.map((made) =>
      el(
        "tr",
        { "data-run-id": made.run_id, "data-outcome": made.outcome },
        el("td", {}, time(made.at)),
        el("td", {}, airflowLink(made.dag_id, `${made.run_link}`), " / ", airflowLink(taskName(made), made.task_link)),
        el("td", {}, airflowLink(made.run_id, made.run_link)),
        el("td", {}, OUTCOMES[made.outcome] || "read, recorded", made.task_state ? el("span", { className: "muted" }, ` (task ${made.task_state})`) : null),
        el("td", { className: "num" }, number(made.credits)),
        el("td", {}, bytes(made.size), made.fingerprint ? el("br") : null, made.fingerprint ? el("code", { className: "fingerprint", title: made.fingerprint }, made.fingerprint) : el("span", { className: "muted" }, made.size === null || made.size === undefined ? "no fingerprint (skip_if_unchanged off)" : "")),
        quarantined ? el("td", { "data-role": "bad-rows" }, setAside(made)) : null,
      ),
    );
    return el("table", { className: "imports" }, el("thead", {}, head), el("tbody", {}, rows));
  }

  function columnsTable(columns) {
    if (!columns.length) return el("p", { className: "muted" }, "No columns yet (the table has not been read).");
    const head = el("tr", {}, ["Column", "Type", "Description"].map((label) => el("th", { scope: "col" }, label)));
    return el(
      "table",
      { className: "columns" },
      el("thead", {}, head),
      el("tbody", {}, columns.map((c) => el("tr", {}, el("td", {}, el("code", {}, c.name)), el("td", {}, c.data_type), el("td", {}, c.description)))),
    );
  }

  function back() {
    const section = sections.get(detail ? detail.conn_id : "") || [...sections.values()][0];
    detail = null;
    if (section) writeUrl(section, "", true);
    showList();
  }

  function renderDetail(body, message) {
    const backButton = el("button", { type: "button", className: "back", onclick: back, "aria-keyshortcuts": "Escape" }, "← All tables");
    if (message) {
      root.replaceChildren(backButton, el("p", { className: "error" }, message));
      return;
    }
    const row = body.table;
    const parts = [backButton, el("h2", { id: "table-title" }, row ? text(row.name) || body.card_id : body.card_id)];
    if (body.message) parts.push(el("p", { className: "error" }, body.message));
    if (body.detail_error) parts.push(el("p", { className: "warning" }, `The table's details could not be fetched: ${body.detail_error}`));
    const facts = [
      ...fact("CardID", el("code", {}, body.card_id)),
      ...fact("Department", el("code", {}, body.project_id), ` (connection ${body.conn_id})`),
    ];
    if (row) {
      const fresh = row.freshness || {};
      facts.push(
        ...fact("State", el("span", { id: "table-state" }, badge(row)), row.reason ? el("div", { className: "reason", id: "table-reason" }, row.reason) : null),
        ...fact("Description", text(body.description) || el("span", { className: "muted" }, "none given")),
        ...fact("Rows", number(row.rows)),
        ...fact("Domain", text(row.domain) || el("span", { className: "muted" }, "none given")),
        ...fact("Connector", connector(row) || el("span", { className: "muted" }, "none (uploaded files)")),
        ...fact("Locked from delete", row.locked ? "yes" : "no"),
        ...fact("Last completed", row.completed ? `${time(row.completed)} (${age(row.completed)})` : el("span", { className: "muted" }, "not yet")),
        ...fact("Freshness", fresh.stale ? el("span", {}, el("span", { className: "badge stale" }, "Stale"), ` ${text(fresh.reason)}`) : fresh.interval_seconds ? `fresh: its DAG runs every ${duration(fresh.interval_seconds)}` : el("span", { className: "muted" }, "no scheduled DAG imports it")),
      );
      const open = appLink("Open in Data Tables", row.app_link);
      if (open) facts.push(...fact("Service", open));
    }
    parts.push(el("dl", { className: "facts" }, facts));
    parts.push(el("h3", {}, "Columns"), columnsTable(body.columns || []));
    parts.push(el("h3", {}, "Imports by Airflow"), importsTable(body.imports || []));
    root.replaceChildren(...parts.filter(Boolean));
    status.textContent = `Listed ${time(body.as_of)} (${age(body.as_of)}). Updates by itself every ${number(refresh)} s. Times in ${ZONE}. Esc: back to all tables.`;
  }

  async function loadDetail() {
    if (!detail) return;
    const query = new URLSearchParams({ conn_id: detail.conn_id, card_id: detail.card_id });
    if (detail.project_id) query.set("project_id", detail.project_id);
    const answer = await getJson(`api/table?${query}`);
    if (!detail) return;
    detail.body = answer.ok ? answer.body : null;
    renderDetail(answer.body, answer.ok ? null : answer.message);
  }

  function showDetail() {
    root.replaceChildren(el("p", { className: "muted" }, "Loading…"));
    loadDetail().then(() => {
      const title = document.getElementById("table-title");
      if (title) {
        title.setAttribute("tabindex", "-1");
        title.focus();
      }
    });
  }

  function showList() {
    root.replaceChildren(el("datalist", { id: "departments" }, [...new Set([...sections.values()].map((s) => s.info.project_id).filter(Boolean))].map((p) => el("option", { value: p }))));
    for (const section of sections.values()) {
      root.append(section.node);
      renderSection(section);
      if (section.last) renderResults(section, section.last, null);
      loadSection(section, false);
    }
    stamp();
  }

  // -- live ------------------------------------------------------------------------------------------

  function poll() {
    clearTimeout(timer);
    const tick = Math.max(1, refresh / 4) * 1000;
    timer = setTimeout(async () => {
      try {
        if (detail) await loadDetail();
        else await Promise.all([...sections.values()].map((section) => loadSection(section, true)));
        if (!detail) stamp();
      } finally {
        poll();
      }
    }, tick);
  }

  // -- keyboard --------------------------------------------------------------------------------------

  document.addEventListener("keydown", (event) => {
    const typing = event.target instanceof HTMLInputElement || event.target instanceof HTMLSelectElement || event.target instanceof HTMLTextAreaElement;
    if (event.key === "Escape" && detail) {
      event.preventDefault();
      back();
      return;
    }
    if (event.key === "/" && !typing && !detail) {
      const first = [...sections.values()].find((s) => s.search);
      if (first) {
        event.preventDefault();
        first.search.focus();
      }
      return;
    }
    const row = event.target instanceof Element ? event.target.closest("tr[data-card-id]") : null;
    if (!row || typing) return;
    const rows = [...row.parentElement.querySelectorAll("tr[data-card-id]")];
    const at = rows.indexOf(row);
    const next = { ArrowDown: at + 1, ArrowUp: at - 1, Home: 0, End: rows.length - 1 }[event.key];
    if (next !== undefined && rows[next]) {
      event.preventDefault();
      rows[next].focus();
    }
  });

  window.addEventListener("popstate", () => {
    const url = readUrl();
    if (url.card_id && url.conn_id) {
      detail = { conn_id: url.conn_id, project_id: url.project_id, card_id: url.card_id, body: null };
      showDetail();
    } else {
      detail = null;
      showList();
    }
  });

  async function start() {
    const answer = await getJson("api/connections");
    if (!answer.ok) {
      status.textContent = "";
      root.replaceChildren(el("p", { className: "error" }, answer.message));
      return;
    }
    const infos = answer.body.connections;
    states = answer.body.states || [];
    refresh = answer.body.refresh_seconds || 30;
    if (!infos.length) {
      status.textContent = "";
      root.replaceChildren(el("p", { className: "muted" }, "No datatables connections that you may read."));
      return;
    }
    const url = readUrl();
    for (const info of infos) {
      const mine = url.conn_id === info.conn_id;
      sections.set(info.conn_id, {
        info,
        project: (mine && url.project_id) || info.project_id,
        state: mine ? url.state : "",
        q: mine ? url.q : "",
        sort: mine ? url.sort : "attention",
        desc: mine ? url.desc : false,
        offset: mine ? url.offset : 0,
        node: el("section", { "data-conn-id": info.conn_id }),
        results: null,
        last: null,
        etag: null,
      });
    }
    if (url.card_id && sections.has(url.conn_id)) {
      detail = { conn_id: url.conn_id, project_id: url.project_id, card_id: url.card_id, body: null };
      showDetail();
    } else showList();
    poll();
  }

  start();
})();
