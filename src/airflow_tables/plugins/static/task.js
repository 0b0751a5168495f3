// The "Table" tab of a task instance: the table the task imported or replaced, and its state.
"use strict";

(() => {
  const { el, getJson, badge, time, age, text, origin, lastImport, appLink, number } = DT;
  const root = document.getElementById("task-table");
  const params = new URLSearchParams(window.location.search);

  function show(...nodes) {
    root.replaceChildren(...nodes.filter(Boolean)); // a node not shown is null: never the text "null"
  }

  async function load() {
    const query = new URLSearchParams();
    for (const name of ["dag_id", "run_id", "task_id", "map_index"]) {
      if (params.get(name) !== null) query.set(name, params.get(name));
    }
    const answer = await getJson(`api/task?${query}`);
    if (!answer.ok) {
      show(el("p", { className: "error" }, answer.message));
      return;
    }
    const body = answer.body;
    if (!body.table) {
      const id = body.card_id ? el("p", {}, "Table ", el("code", {}, body.card_id)) : null;
      show(id, el("p", { className: "muted" }, text(body.message) || "No table."));
      return;
    }
    const row = body.table;
    const facts = el(
      "dl",
      { className: "facts" },
      el("dt", {}, "State"), el("dd", { id: "task-table-state" }, badge(row)),
      el("dt", {}, "CardID"), el("dd", {}, el("code", {}, row.card_id)),
      el("dt", {}, "Name"), el("dd", {}, text(row.name)),
      el("dt", {}, "Rows"), el("dd", {}, number(row.rows)),
      el("dt", {}, "Department"), el("dd", {}, el("code", {}, text(body.project_id)), body.conn_id ? ` (connection ${body.conn_id})` : ""),
      el("dt", {}, "Last completed"), el("dd", {}, row.completed ? `${time(row.completed)} (${age(row.completed)})` : "not yet"),
      el("dt", {}, "Origin"), el("dd", {}, origin(row) || "upload"),
      el("dt", {}, "Last import by Airflow"), el("dd", {}, lastImport(row.last)),
    );
    if (row.reason) facts.append(el("dt", {}, "Why the read failed"), el("dd", { id: "task-table-reason" }, row.reason));
    const open = appLink("Open in Data Tables", row.app_link);
    const page = appLink("The table's page (columns, imports)", row.page_link);
    show(el("h2", {}, text(row.name) || row.card_id), facts, open ? el("p", {}, open) : null, page ? el("p", {}, page) : null);
    if (row.state === "being_read") setTimeout(load, Math.max(1, body.refresh_seconds || 30) * 1000);
  }

  load();
})();
