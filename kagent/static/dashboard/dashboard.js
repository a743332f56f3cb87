// kagent's dashboard: fills the page shells from the worker's JSON API and keeps them live.
//
// Plain ES2020, no dependencies, no build step. Rules kept throughout:
// - API data reaches the page only as DOM text (textContent, Text nodes, attributes set one by one),
//   never as markup: group and member names are chosen by whoever runs the consumers.
// - Names in URLs go through encodeURIComponent; every URL is relative to the page
//   (body[data-root]), so the pages work wherever a proxy mounts the worker.
// - A page polls every body[data-refresh-ms] ms while it is visible, never while hidden, and a
//   newer request supersedes an older one (the older answer is dropped).
// - The groups page keeps its view (sort, order, filter, page, page size) in the query string.
"use strict";

(() => {
  const body = document.body;
  const ROOT = body.dataset.root || "./";
  const REFRESH_MS = Math.max(500, Number(body.dataset.refreshMs) || 5000);
  const REQUEST_TIMEOUT_MS = 15000;
  const INTEGER = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });
  const DECIMAL = new Intl.NumberFormat("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 });
  const SVG = "http://www.w3.org/2000/svg";

  // ---- DOM helpers ----------------------------------------------------------------------------

  /** An element with attributes (text: its textContent; testid: data-testid) and children (strings become Text). */
  function h(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs)) {
      if (value === null || value === undefined || value === false) continue;
      if (name === "text") node.textContent = String(value);
      else if (name === "class") node.className = value;
      else if (name === "testid") node.dataset.testid = value;
      else node.setAttribute(name, String(value));
    }
    for (const child of children) if (child !== null && child !== undefined) node.append(child);
    return node;
  }

  /** Set a node's text only when it differs (a user's selection in an unchanged cell survives a refresh). */
  function setText(node, text) {
    const value = text === null || text === undefined ? "" : String(text);
    if (node.textContent !== value) node.textContent = value;
  }

  function setAttr(node, name, value) {
    if (value === null || value === undefined) {
      if (node.hasAttribute(name)) node.removeAttribute(name);
    } else if (node.getAttribute(name) !== String(value)) {
      node.setAttribute(name, String(value));
    }
  }

  const $ = (testid, scope = document) => scope.querySelector(`[data-testid="${testid}"]`);

  /**
   * Make tbody's rows those of items, in order, reusing the row of each key: create(item) builds a
   * row, update(row, item) brings it up to date. Rows are moved only when the order changed.
   */
  function syncRows(tbody, items, key, create, update) {
    const old = new Map();
    for (const row of tbody.children) if (row.dataset.key !== undefined) old.set(row.dataset.key, row);
    const rows = items.map((item) => {
      const k = String(key(item));
      let row = old.get(k);
      if (row === undefined) {
        row = create(item);
        row.dataset.key = k;
      }
      update(row, item);
      return row;
    });
    const same = rows.length === tbody.children.length && rows.every((row, i) => tbody.children[i] === row);
    if (!same) tbody.replaceChildren(...rows);
  }

  // ---- formats ----------------------------------------------------------------------------------

  // A figure the API gives as null is one kagent does not know: it reads "unknown", never 0 or blank.
  const UNKNOWN = "unknown";
  const known = (value) => value !== null && value !== undefined && !Number.isNaN(value);
  const integer = (value) => (known(value) ? INTEGER.format(value) : UNKNOWN);
  const decimal = (value) => (known(value) ? DECIMAL.format(value) : UNKNOWN);

  /** Seconds as "850 ms", "12.3 s", "4 m 05 s", "3 h 02 m", "2 d 04 h". */
  function duration(seconds) {
    if (!known(seconds)) return UNKNOWN;
    const s = Math.abs(seconds);
    const two = (n) => String(Math.floor(n)).padStart(2, "0");
    if (s < 1) return `${Math.round(s * 1000)} ms`;
    if (s < 60) return `${s.toFixed(1)} s`;
    if (s < 3600) return `${Math.floor(s / 60)} m ${two(s % 60)} s`;
    if (s < 86400) return `${Math.floor(s / 3600)} h ${two((s % 3600) / 60)} m`;
    return `${Math.floor(s / 86400)} d ${two((s % 86400) / 3600)} h`;
  }

  /**
   * A drain time (kagent.core.drain_time.Drain) in the words kagent.core.drain_time.drain_text uses, which the
   * terminal and the alerts say too: "caught up", "catches up in 4 min", "falling behind at 120/s" (or "not
   * catching up" when the lag holds steady), "unknown".
   */
  function drainText(drain) {
    const d = drain || { state: "unknown" };
    if (d.state === "caught-up") return "caught up";
    if (d.state === "catching-up" && known(d.seconds)) return `catches up in ${drainDuration(d.seconds)}`;
    if (d.state === "falling-behind") {
      const rate = d.falling_behind_rate || 0;
      if (rate < 0.05) return "not catching up";
      const text = rate >= 9.95 ? INTEGER.format(rate) : rate.toFixed(1);
      return `falling behind at ${text}/s`;
    }
    return UNKNOWN;
  }

  /** Records/s as kagent.core.drain_time.rate_text says them: "120/s", "1,250/s", "4.5/s". */
  function rateText(rate) {
    return `${rate >= 9.95 ? INTEGER.format(rate) : rate.toFixed(1)}/s`;
  }

  /**
   * A recommendation's hot partitions (kagent.core.recommendation.HotPartitionEvidence) in the words of
   * kagent.core.hot_partitions.hot_partition_text: each partition's production rate beside its member's pace,
   * then the fastest member's.
   */
  function hotPartitionText(hot) {
    const parts = hot.partitions.map(
      (p) =>
        `${p.topic}-${p.partition} written at ${rateText(p.production_rate)} ` +
        `(its member ${p.member_id} reads ${rateText(p.member_capacity)})`,
    );
    const plural = hot.partitions.length > 1 ? "s" : "";
    return `Hot partition${plural} ${parts.join(", ")}; the fastest member reads ${rateText(hot.best_capacity)}`;
  }

  /**
   * The heavy partitions a rebalance isolates (kagent.core.recommendation.IsolationEvidence) in the words of
   * kagent.core.heavy_partitions.heavy_partition_text: each partition's rate, the member it is left alone on,
   * and why it cannot share one.
   */
  function heavyPartitionText(isolated) {
    const parts = isolated.partitions.map(
      (p) =>
        `${p.topic}-${p.partition} written at ${rateText(p.production_rate)}, alone on ${p.member_id} ` +
        `(a member reads ${rateText(p.member_capacity)}, less than ${rateText(p.production_rate)} plus the ` +
        `lightest other partition's ${rateText(p.lightest_other_rate)})`,
    );
    const plural = isolated.partitions.length > 1 ? "s" : "";
    return `Heavy partition${plural} ${parts.join(", ")}`;
  }

  /**
   * An option a recommendation weighed (kagent.core.remedies.Remedy) in the words of
   * kagent.core.remedies.remedy_text: "rebalance the 3 members", "scale to 6 members", "no assignment helps:
   * partition t-0 is hot".
   */
  function remedyText(remedy) {
    const members = `${remedy.members} member${remedy.members === 1 ? "" : "s"}`;
    if (remedy.kind === "rebalance") return `rebalance the ${members}`;
    if (remedy.kind === "scale") return `scale to ${members}`;
    const named = remedy.partitions.map((p) => `${p.topic}-${p.partition}`).join(", ");
    const several = remedy.partitions.length > 1;
    return `no assignment helps: partition${several ? "s" : ""} ${named} ${several ? "are" : "is"} hot`;
  }

  /** Seconds as kagent.core.drain_time.duration_text says them: "45 s", "4 min", "2 h 5 min", "3 d 4 h". */
  function drainDuration(seconds) {
    if (seconds < 59.5) return `${Math.max(1, Math.round(seconds))} s`;
    const minutes = Math.round(seconds / 60);
    if (minutes < 60) return `${minutes} min`;
    if (minutes < 24 * 60) {
      const [hours, rest] = [Math.floor(minutes / 60), minutes % 60];
      return rest ? `${hours} h ${rest} min` : `${hours} h`;
    }
    const allHours = Math.round(seconds / 3600);
    const [days, hours] = [Math.floor(allHours / 24), allHours % 24];
    return hours ? `${days} d ${hours} h` : `${days} d`;
  }

  /** Show a drain time in ``node``: its words, its state as a class (falling behind stands out), its figures
   * in the title. */
  function showDrain(node, drain) {
    const d = drain || { state: "unknown" };
    setText(node, drainText(d));
    node.dataset.state = d.state;
    node.className = `drain drain-${d.state}`;
    const why = {
      "caught-up": "no lag",
      "catching-up": "its lag over its consumption less its production, at the rates of the rate window",
      "falling-behind": "its consumption is not above its production: the lag does not shrink at these rates",
      unknown: "its lag or a rate it needs is not measured (just after a rebalance, its pace is not yet)",
    }[d.state];
    setAttr(node, "title", why || null);
  }

  /** A lag in a member lag unit: records as a count, seconds as a duration. */
  function lagIn(unit, value) {
    if (!known(value)) return UNKNOWN;
    return unit === "seconds" ? duration(value) : plural(value, "record");
  }

  /** Seconds since the epoch as local "HH:MM:SS" (with the date when not today). */
  function clock(epochSeconds) {
    if (!known(epochSeconds)) return UNKNOWN;
    const date = new Date(epochSeconds * 1000);
    const pad = (n) => String(n).padStart(2, "0");
    const time = `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
    const today = new Date();
    if (date.toDateString() === today.toDateString()) return time;
    return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} ${time}`;
  }

  const iso = (epochSeconds) => (known(epochSeconds) ? new Date(epochSeconds * 1000).toISOString() : "");
  function ago(epochSeconds) {
    if (!known(epochSeconds)) return "";
    const seconds = Date.now() / 1000 - epochSeconds;
    return seconds < 1 ? "just now" : `${duration(seconds)} ago`;
  }

  const plural = (count, word) => `${INTEGER.format(count)} ${word}${count === 1 ? "" : "s"}`;

  /** How many of a group's partitions there are, and how many have no measured lag: "12" or "12 (3 unknown)". */
  const partitionCount = (s) =>
    s.partitions_unknown ? `${integer(s.partitions)} (${integer(s.partitions_unknown)} unknown)` : integer(s.partitions);

  /** The group's lag added up in its lag unit (records or seconds), as the trigger's minimum counts it. */
  const totalInUnit = (s) => (s.lag_unit === "seconds" ? s.total_lag_seconds : s.total_lag);

  /**
   * Whether the group's skew is over less lag than the trigger's minimum (KAGENT_MIN_TOTAL_LAG): the
   * skew of a few records swings with every commit and no rebalance is recommended for it, so it is
   * shown as such, never as an alarm. False when the skew or the total is unknown.
   */
  const belowMinimum = (s) =>
    known(s.skew) && known(totalInUnit(s)) && known(s.min_total_lag) && totalInUnit(s) < s.min_total_lag;

  /** Why a skew is below the trigger's minimum, in words. */
  const belowMinimumWhy = (s) =>
    `${lagIn(s.lag_unit, totalInUnit(s))} of lag, below the trigger's minimum of ` +
    `${lagIn(s.lag_unit, s.min_total_lag)}: no rebalance is recommended at any skew`;

  /** What each partition flag says (kagent.core.snapshot.LagFlag). */
  const FLAGS = {
    "no-commit": "the group has committed nothing here",
    "stale-end-offset": "the latest end-offset answer is older than a few polls",
    "data-loss": "the committed offset is below the log start: retention deleted records the group never read",
    "not-polled": "no end-offset poll of this worker has answered for it yet",
    "unknown-partition": "the latest poll found no such partition",
    "no-leader": "the latest poll found the partition without a leader",
    "request-failed": "the latest poll's request to its leader failed",
    "error-code": "its leader answered the latest poll with an error",
  };
  const flagTitle = (flags) => flags.map((f) => `${f}: ${FLAGS[f] || "see the API's LagFlag"}`).join("\n");

  // "." and ".." cannot be a path segment (the browser resolves them away): those go by query.
  const groupHref = (group) =>
    group === "." || group === ".."
      ? `${ROOT}groups/?group=${encodeURIComponent(group)}`
      : `${ROOT}groups/${encodeURIComponent(group)}`;
  const recommendationHref = (id) => `${ROOT}api/recommendations/${encodeURIComponent(id)}`;

  /** A status badge (Burrow's OK, WARN, STOP, STALL, REWIND, or UNKNOWN: no partition judged). */
  function statusBadge(badge, status, text = status) {
    setText(badge, text);
    const wanted = `status status-${status}`;
    if (badge.className !== wanted) badge.className = wanted;
    return badge;
  }

  // ---- fetching and polling ------------------------------------------------------------------

  /**
   * One request at a time: get(url) aborts the request before it, and answers
   * {status, body} (body: parsed JSON or null), {error} when nothing answered, or null when a
   * newer request superseded it (its answer must be dropped).
   */
  function requester() {
    let current = null;
    return async function get(url) {
      if (current !== null) current.abort();
      const controller = new AbortController();
      current = controller;
      const timer = setTimeout(() => controller.abort(), REQUEST_TIMEOUT_MS);
      try {
        const response = await fetch(url, {
          signal: controller.signal,
          headers: { Accept: "application/json" },
          cache: "no-store",
        });
        const text = await response.text();
        if (current !== controller) return null;
        let parsed = null;
        try {
          parsed = text ? JSON.parse(text) : null;
        } catch (_) {
          parsed = null;
        }
        return { status: response.status, body: parsed };
      } catch (error) {
        if (current !== controller) return null;
        if (controller.signal.aborted) return { error: `no answer within ${REQUEST_TIMEOUT_MS / 1000} s` };
        return { error: String(error.message || error) };
      } finally {
        clearTimeout(timer);
      }
    };
  }

  /**
   * Call refresh() now, then REFRESH_MS after each one ends, while the page is visible; calling the
   * returned function refreshes at once (after a user's change). Hidden, nothing is asked; shown
   * again, it refreshes at once.
   */
  function poll(refresh) {
    let timer = null;
    const run = async () => {
      clearTimeout(timer);
      timer = null;
      await refresh();
      clearTimeout(timer);
      timer = document.hidden ? null : setTimeout(run, REFRESH_MS);
    };
    document.addEventListener("visibilitychange", () => {
      if (document.hidden) {
        clearTimeout(timer);
        timer = null;
      } else {
        run();
      }
    });
    run();
    return run;
  }

  /** The "live" indicator and the error banner: what the last poll gave. */
  function liveness() {
    const live = $("live-status");
    const banner = $("fetch-error");
    let lastGood = null;
    setInterval(() => {
      if (lastGood !== null && banner.hidden) setText(live, `live · updated ${ago(lastGood)}`);
    }, 1000);
    return {
      ok() {
        lastGood = Date.now() / 1000;
        banner.hidden = true;
        live.className = "live ok";
        setText(live, "live · updated just now");
      },
      failed(what) {
        banner.hidden = false;
        live.className = "live failed";
        setText(live, "not updating");
        const since =
          lastGood === null
            ? "Nothing shown yet."
            : `Showing what it answered at ${clock(lastGood)}; retrying every ${REFRESH_MS / 1000} s.`;
        setText(banner, `Could not load from the worker's API: ${what}. ${since}`);
      },
    };
  }

  /** What a failed answer of requester() says: why nothing answered, or the status and the API's error. */
  function answerError(answer) {
    if (answer.error !== undefined) return answer.error;
    return answer.body && answer.body.error ? `${answer.status}: ${answer.body.error}` : String(answer.status);
  }

  // ---- the groups page ---------------------------------------------------------------------------

  const SORTS = ["group", "status", "total_lag", "max_lag", "max_lag_seconds", "skew"];
  const DEFAULT_VIEW = { sort: "skew", order: "desc", q: "", offset: 0, limit: 50 };

  const defaultOrder = (sort) => (sort === "group" ? "asc" : "desc");

  /** The view the query string asks for, each part checked (a bad one gets its default). */
  function viewFromUrl() {
    const params = new URLSearchParams(location.search);
    const sort = SORTS.includes(params.get("sort")) ? params.get("sort") : DEFAULT_VIEW.sort;
    const order = ["asc", "desc"].includes(params.get("order")) ? params.get("order") : defaultOrder(sort);
    const offset = Math.max(0, Number.parseInt(params.get("offset"), 10) || 0);
    const limit = Math.min(1000, Math.max(1, Number.parseInt(params.get("limit"), 10) || DEFAULT_VIEW.limit));
    return { sort, order, q: params.get("q") || "", offset, limit };
  }

  /** The query string of view, without the parts at their default (an order at its sort's default). */
  function viewQuery(view) {
    const params = new URLSearchParams();
    if (view.sort !== DEFAULT_VIEW.sort) params.set("sort", view.sort);
    if (view.order !== defaultOrder(view.sort)) params.set("order", view.order);
    if (view.q) params.set("q", view.q);
    if (view.offset) params.set("offset", String(view.offset));
    if (view.limit !== DEFAULT_VIEW.limit) params.set("limit", String(view.limit));
    const query = params.toString();
    return query ? `?${query}` : "";
  }

  function groupsPage() {
    let view = viewFromUrl();
    const get = requester();
    const live = liveness();
    const form = $("groups-filter-form");
    const filter = $("groups-filter");
    const limit = $("groups-limit");
    const tbody = $("groups-body");
    const empty = $("groups-empty");
    const count = $("groups-count");
    const prev = $("groups-prev");
    const next = $("groups-next");
    const incomplete = $("incomplete-banner");
    let total = null;

    function showView() {
      if (filter.value !== view.q && document.activeElement !== filter) filter.value = view.q;
      if (![...limit.options].some((o) => o.value === String(view.limit))) {
        limit.append(h("option", { text: view.limit }));
      }
      limit.value = String(view.limit);
      for (const th of document.querySelectorAll("th[data-sort]")) {
        const active = th.dataset.sort === view.sort;
        setAttr(th, "aria-sort", active ? (view.order === "asc" ? "ascending" : "descending") : null);
      }
    }

    /** Go to view (push: a new history entry, else replace the current one) and refresh at once. */
    function navigate(target, push) {
      view = target;
      const url = `${location.pathname}${viewQuery(view)}`;
      if (push) history.pushState(null, "", url);
      else history.replaceState(null, "", url);
      showView();
      refreshNow();
    }

    function createRow() {
      const link = h("a", { testid: "group-link" });
      const recLink = h("a", { testid: "recommendation-link" });
      /** A figure's cell: its value, and a note under it shown only when it has something to say. */
      const figure = (testid, note) =>
        h(
          "td",
          { class: "num", testid },
          h("span", { class: "value", testid: `${testid}-value` }),
          h("span", { class: "note", testid: note, hidden: true }),
        );
      return h(
        "tr",
        { testid: "group-row" },
        h("td", { class: "name" }, link),
        h("td", {}, h("span", { class: "status", testid: "group-status" })),
        h("td", { testid: "group-state" }),
        h("td", { class: "num", testid: "group-members" }),
        h("td", { class: "num", testid: "group-generation" }),
        h("td", { testid: "group-protocol" }),
        figure("group-total-lag", "partitions-unknown"),
        h("td", { class: "num", testid: "group-max-lag" }),
        h("td", { class: "num", testid: "group-max-lag-seconds" }),
        figure("group-skew", "skew-below-minimum"),
        h("td", { class: "num", testid: "group-evaluated" }),
        h("td", { testid: "group-incidents" }),
        h("td", { class: "rec" }, recLink, h("span", { class: "age" })),
      );
    }

    function updateRow(row, g) {
      const cells = row.children;
      const link = cells[0].firstChild;
      setText(link, g.group);
      setAttr(link, "href", groupHref(g.group));
      row.dataset.group = g.group;
      statusBadge(cells[1].firstChild, g.status);
      setText(cells[2], g.state);
      setText(cells[3], integer(g.members));
      setText(cells[4], integer(g.generation));
      setText(cells[5], g.protocol || UNKNOWN);
      const [totalValue, unknownNote] = cells[6].children;
      setText(totalValue, integer(g.total_lag));
      // The total adds up the measured partitions only: say how many others there are.
      unknownNote.hidden = !g.partitions_unknown;
      setText(unknownNote, g.partitions_unknown ? `${integer(g.partitions_unknown)} of ${integer(g.partitions)} unknown` : "");
      setAttr(cells[6], "title", g.partitions_unknown ? `partitions of unknown lag: not added up` : null);
      setText(cells[7], integer(g.max_lag));
      setText(cells[8], duration(g.max_lag_seconds));
      const [skewValue, skewNote] = cells[9].children;
      setText(skewValue, decimal(g.skew));
      const low = belowMinimum(g);
      skewNote.hidden = !low;
      setText(skewNote, low ? "low lag" : "");
      cells[9].classList.toggle("below-minimum", low);
      const metric = `${g.skew_metric}, member lag in ${g.lag_unit}`;
      setAttr(cells[9], "title", low ? `${metric}; ${belowMinimumWhy(g)}` : metric);
      // The list's figures are those of the group's last evaluation: say when that was.
      setText(cells[10], clock(g.evaluated_at));
      setAttr(cells[10], "title", `this row's figures are those of the group's last evaluation, ${iso(g.evaluated_at)}`);
      const incidents = g.open_incidents || [];
      setText(cells[11], incidents.length ? incidents.map((i) => i.kind).join(", ") : "—");
      const severity = incidents.length ? ` severity-${worstSeverity(incidents)}` : "";
      setAttr(cells[11], "class", `incidents-cell${severity}`);
      const described = incidents.map((i) => `${i.kind} (${i.severity}) since ${clock(i.opened_at)}`);
      setAttr(cells[11], "title", described.join("\n") || null);
      const [recLink, age] = cells[12].children;
      if (g.last_recommendation_id) {
        setText(recLink, g.last_recommendation_id);
        setAttr(recLink, "href", recommendationHref(g.last_recommendation_id));
        setAttr(recLink, "title", `${g.last_recommendation_id}, ${iso(g.last_recommendation_at)}`);
        setText(age, g.last_recommendation_at ? ago(g.last_recommendation_at) : "");
      } else {
        setText(recLink, "—");
        setAttr(recLink, "href", null);
        setAttr(recLink, "title", null);
        setText(age, "");
      }
    }

    function render(page) {
      total = page.total;
      syncRows(tbody, page.groups, (g) => g.group, createRow, updateRow);
      const first = page.groups.length ? page.offset + 1 : 0;
      const last = page.offset + page.groups.length;
      const matching = view.q ? ` matching “${view.q}”` : "";
      setText(count, `${integer(first)}–${integer(last)} of ${integer(page.total)} groups${matching}`);
      prev.disabled = view.offset <= 0;
      next.disabled = last >= page.total;
      empty.hidden = page.groups.length > 0;
      if (!page.groups.length) {
        let why = "No consumer groups yet.";
        if (page.total > 0) why = "No groups on this page.";
        else if (view.q) why = `No group's name contains “${view.q}”.`;
        setText(empty, why);
      }
      const missing = (page.workers || []).filter((w) => !w.ok);
      incomplete.hidden = page.complete !== false;
      if (page.complete === false) {
        const named = missing.map((w) => `${w.url}${w.error ? ` (${w.error})` : ""}`).join(", ");
        const of = `${missing.length} of ${(page.workers || []).length}`;
        const whose = named || "unknown";
        setText(incomplete, `Incomplete: ${of} workers did not answer, so their groups are missing: ${whose}.`);
      }
    }

    async function refresh() {
      const asked = view;
      const params = new URLSearchParams({
        sort: asked.sort,
        order: asked.order,
        offset: String(asked.offset),
        limit: String(asked.limit),
      });
      if (asked.q) params.set("q", asked.q);
      const answer = await get(`${ROOT}api/groups?${params}`);
      if (answer === null || asked !== view) return;
      if (answer.status !== 200 || answer.body === null || !Array.isArray(answer.body.groups)) {
        live.failed(answerError(answer));
        return;
      }
      live.ok();
      // Past the end (the filter or the cluster shrank): go to the last page.
      if (answer.body.groups.length === 0 && asked.offset > 0 && answer.body.total > 0) {
        const lastPage = Math.floor((answer.body.total - 1) / asked.limit) * asked.limit;
        navigate({ ...asked, offset: lastPage }, false);
        return;
      }
      render(answer.body);
    }

    const refreshNow = poll(refresh);
    showView();

    for (const th of document.querySelectorAll("th[data-sort]")) {
      th.querySelector("button").addEventListener("click", () => {
        const sort = th.dataset.sort;
        const flipped = view.order === "asc" ? "desc" : "asc";
        const order = sort === view.sort ? flipped : defaultOrder(sort);
        navigate({ ...view, sort, order, offset: 0 }, true);
      });
    }
    let typing = null;
    filter.addEventListener("input", () => {
      clearTimeout(typing);
      typing = setTimeout(() => {
        if (filter.value !== view.q) navigate({ ...view, q: filter.value, offset: 0 }, false);
      }, 250);
    });
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      clearTimeout(typing);
      navigate({ ...view, q: filter.value, offset: 0 }, true);
    });
    limit.addEventListener("change", () => navigate({ ...view, limit: Number(limit.value), offset: 0 }, true));
    prev.addEventListener("click", () => navigate({ ...view, offset: Math.max(0, view.offset - view.limit) }, true));
    next.addEventListener("click", () => {
      if (total === null || view.offset + view.limit < total) {
        navigate({ ...view, offset: view.offset + view.limit }, true);
      }
    });
    window.addEventListener("popstate", () => {
      view = viewFromUrl();
      showView();
      refreshNow();
    });
    document.addEventListener("keydown", (event) => {
      if (event.key === "/" && document.activeElement !== filter) {
        event.preventDefault();
        filter.focus();
      }
    });
  }

  const SEVERITY_RANK = { critical: 4, error: 3, warning: 2, info: 1 };
  const rank = (severity) => SEVERITY_RANK[severity] || 0;
  const worstSeverity = (incidents) =>
    incidents.reduce((worst, i) => (rank(i.severity) > rank(worst) ? i.severity : worst), "info");

  // ---- one group's page ----------------------------------------------------------------------------

  /** An inline SVG line of points [{time, skew}], scaled to its box, with its last value marked. */
  function sparkline(points) {
    const width = 320;
    const height = 56;
    const pad = 4;
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
    svg.setAttribute("width", String(width));
    svg.setAttribute("height", String(height));
    svg.setAttribute("class", "sparkline");
    svg.setAttribute("role", "img");
    svg.dataset.testid = "skew-sparkline";
    svg.dataset.points = String(points.length);
    const values = points.map((p) => p.skew);
    const times = points.map((p) => p.time);
    const low = Math.min(0, ...values);
    const high = Math.max(...values, low + 1e-9);
    const t0 = Math.min(...times);
    const t1 = Math.max(...times, t0 + 1e-9);
    const x = (t) => (points.length === 1 ? width - pad : pad + ((t - t0) / (t1 - t0)) * (width - 2 * pad));
    // One point: a level line across the box, ending in the point.
    const drawn =
      points.length === 1
        ? [{ skew: points[0].skew, x: pad }, { skew: points[0].skew, x: width - pad }]
        : points.map((p) => ({ skew: p.skew, x: x(p.time) }));
    const y = (v) => height - pad - ((v - low) / (high - low)) * (height - 2 * pad);
    const title = document.createElementNS(SVG, "title");
    const last = points[points.length - 1];
    const span = `${points.length} points from ${clock(t0)}`;
    title.textContent = `skew ${decimal(last.skew)} at ${clock(last.time)}; ${span}; highest ${decimal(high)}`;
    svg.append(title);
    const line = document.createElementNS(SVG, "polyline");
    line.setAttribute("points", drawn.map((p) => `${p.x.toFixed(1)},${y(p.skew).toFixed(1)}`).join(" "));
    line.setAttribute("class", "line");
    svg.append(line);
    const dot = document.createElementNS(SVG, "circle");
    dot.setAttribute("cx", x(last.time).toFixed(1));
    dot.setAttribute("cy", y(last.skew).toFixed(1));
    dot.setAttribute("r", "3");
    dot.setAttribute("class", "dot");
    svg.append(dot);
    return svg;
  }

  function groupPage() {
    const group = body.dataset.group;
    const get = requester();
    const live = liveness();
    const notFound = $("group-not-found");
    const main = $("group-body");
    const status = $("group-status");
    const field = (name, scope = document) => scope.querySelector(`[data-field="${name}"]`);

    /** The figures of the group's summary, a lag in records with its unit; "unknown" when the API gives null. */
    const records = (value) => (known(value) ? plural(value, "record") : UNKNOWN);

    function renderFacts(s) {
      statusBadge(status, s.status);
      setText(field("state"), s.state);
      setText(field("generation"), integer(s.generation));
      setText(field("protocol"), s.protocol || UNKNOWN);
      setText(field("members"), integer(s.members));
      setText(field("partitions"), partitionCount(s));
      const over = s.partitions_unknown ? ` (of ${integer(s.partitions - s.partitions_unknown)} measured)` : "";
      setText(field("total_lag"), known(s.total_lag) ? `${records(s.total_lag)}${over}` : UNKNOWN);
      setText(field("max_lag"), records(s.max_lag));
      setText(field("max_lag_seconds"), duration(s.max_lag_seconds));
      setText(field("skew"), `${decimal(s.skew)} (${s.skew_metric})`);
      const low = belowMinimum(s);
      field("skew").classList.toggle("below-minimum", low);
      const why = $("skew-below-minimum");
      why.hidden = !low;
      setText(why, low ? `Skew over too little lag to act on: ${belowMinimumWhy(s)}.` : "");
      // Every figure, bar and row of the page comes from this one measurement: its time is said once here
      // and beside the bars and the partitions.
      const measured = clock(s.evaluated_at);
      setText(field("evaluated_at"), `${measured} (${ago(s.evaluated_at)})`);
      setAttr(field("evaluated_at"), "title", iso(s.evaluated_at));
      for (const node of document.querySelectorAll('[data-testid="measured-at"]')) setText(node, measured);
      setText(field("worker"), s.worker);
      setText($("lag-unit"), `(lag in ${s.lag_unit === "seconds" ? "seconds" : "records"})`);
      document.title = `${s.status} ${group} · kagent`;
    }

    function renderIncidents(incidents) {
      const list = $("incidents");
      syncRows(
        list,
        incidents.length ? incidents : [null],
        (i) => (i === null ? "none" : i.id),
        (i) =>
          i === null
            ? h("li", { class: "empty", text: "None." })
            : h("li", { testid: "incident" }, h("span", { class: "severity" }), h("span", { class: "what" })),
        (li, i) => {
          if (i === null) return;
          const [severity, what] = li.children;
          setText(severity, i.severity);
          severity.className = `severity severity-${i.severity}`;
          setText(what, `${i.kind}, open since ${clock(i.opened_at)} (${ago(i.opened_at)}) · ${i.id}`);
        },
      );
    }

    /**
     * One bar pair per member (and one bar for the partitions no member holds, the API's `unassigned`,
     * member "unknown"), on one scale: the largest known figure fills the track. Each bar's width is its
     * own label's figure at once (no transition: a bar never shows an older answer than its label).
     * An unknown figure is a hatched track reading "unknown", never a bar of 0.
     */
    function renderMembers(detail) {
      const unit = detail.summary.lag_unit;
      const rows = [...detail.members, ...(detail.unassigned ? [{ ...detail.unassigned, unassigned: true }] : [])];
      const figures = rows.flatMap((m) => [m.lag, m.unassigned ? null : m.recommended_lag]).filter(known);
      const scale = Math.max(1e-9, ...figures);
      const box = $("members");
      const bar = (kind) =>
        h(
          "div",
          { class: `bar-row ${kind}` },
          h("span", { class: "bar-label", text: kind === "now" ? "now" : "recommended" }),
          h("span", { class: "track" }, h("span", { class: `bar ${kind}`, testid: `member-lag-${kind}` })),
          h("span", { class: "bar-value num", testid: `member-lag-${kind}-value` }),
          kind === "now" ? h("span", { class: "drain", testid: "member-drain" }) : h("span"),
        );
      const nameRow = () => h("div", { class: "member-name" }, h("span", { class: "id" }), h("span", { class: "host" }));
      /** Draw one bar: kind "known" (value, scaled), "unknown" (hatched, no bar) or "none" (nothing to draw). */
      const fill = (row, value, kind, text, partitions) => {
        const [, track, label] = row.children;
        const barNode = track.firstChild;
        track.className = kind === "known" ? "track" : `track ${kind}`;
        barNode.hidden = kind !== "known";
        barNode.style.width = kind === "known" ? `${Math.min(100, (100 * value) / scale).toFixed(2)}%` : "";
        barNode.dataset.value = kind === "known" ? String(value) : "";
        barNode.dataset.state = kind;
        setText(label, text);
        setAttr(row, "title", partitions ? partitions.map((p) => `${p.topic}-${p.partition}`).join(", ") : null);
      };
      syncRows(
        box,
        rows.length ? rows : [null],
        (m) => (m === null ? "" : m.unassigned ? "\u0000unassigned" : `member:${m.member_id}`),
        (m) =>
          m === null
            ? h("p", { class: "empty", text: "No members, and no partition without one." })
            : h("div", { class: "member", testid: "member-bar" }, nameRow(), bar("now"), bar("recommended")),
        (div, m) => {
          if (m === null) return;
          div.dataset.member = m.member_id;
          div.classList.toggle("unassigned", Boolean(m.unassigned));
          setAttr(div, "data-unassigned", m.unassigned ? "true" : null);
          const [name, now, rec] = div.children;
          setText(name.children[0], m.member_id);
          const unmeasured = m.partitions_unknown ? ` (${INTEGER.format(m.partitions_unknown)} not measured)` : "";
          // A member whose assignment the cluster did not say holds partitions kagent does not know.
          const held = m.partitions === null ? "partitions unknown" : `${plural(m.partitions.length, "partition")}${unmeasured}`;
          if (m.unassigned) {
            setText(name.children[1], `no member holds these ${held}`);
          } else {
            const recommended = m.recommended_partitions;
            const moved = recommended ? `, ${INTEGER.format(recommended.length)} recommended` : "";
            setText(name.children[1], `${m.client_host} · ${held} now${moved}`);
          }
          fill(now, m.lag, known(m.lag) ? "known" : "unknown", lagIn(unit, m.lag), m.partitions);
          showDrain(now.children[3], m.drain);
          // The partitions no member holds have no recommended share of their own: no second bar.
          rec.hidden = Boolean(m.unassigned);
          if (m.unassigned) return;
          if (!m.recommended_partitions) fill(rec, null, "none", "no recommendation", null);
          else {
            const kind = known(m.recommended_lag) ? "known" : "unknown";
            fill(rec, m.recommended_lag, kind, lagIn(unit, m.recommended_lag), m.recommended_partitions);
          }
        },
      );
    }

    function renderRecommendation(detail) {
      const rec = detail.recommendation;
      $("no-recommendation").hidden = rec !== null;
      $("recommendation-body").hidden = rec === null;
      if (rec === null) return;
      const link = $("recommendation-link");
      setText(link, rec.id);
      setAttr(link, "href", recommendationHref(rec.id));
      setText(field("rec_time"), `${clock(rec.time)} (${ago(rec.time)})`);
      setAttr(field("rec_time"), "title", iso(rec.time));
      setText(field("rec_strategy"), rec.strategy);
      setText(field("rec_generation"), integer(rec.generation));
      setText(field("rec_skew"), `${decimal(rec.skew_before)} → ${decimal(rec.skew_after)}`);
      const stale = $("recommendation-stale");
      stale.hidden = rec.current !== false;
      if (rec.current === false) {
        const now = integer(detail.summary.generation);
        const since = `the group has rebalanced since (now generation ${now})`;
        setText(stale, `Made for generation ${rec.generation}; ${since}.`);
      }
      const hot = $("recommendation-hot");
      hot.hidden = !rec.hot;
      if (rec.hot) setText(hot, `${hotPartitionText(rec.hot)}. ${rec.hot.remedy}`);
      const isolated = $("recommendation-isolated");
      isolated.hidden = !rec.isolated;
      if (rec.isolated) setText(isolated, `${heavyPartitionText(rec.isolated)}.`);
      const unit = detail.summary.lag_unit;
      const noMoves =
        rec.kind === "hot-partition"
          ? "No moves: no assignment and no number of members keeps up with a hot partition."
          : rec.kind === "scale"
          ? `No moves: the members cannot keep up whatever their assignment; ` +
            `the group needs ${integer(rec.members_needed)} members (it has ${integer(detail.summary.members)}).`
          : rec.server_assignor
            ? `No moves: the broker assigns (KIP-848); its ${rec.server_assignor} assignor fits better.`
            : "No moves.";
      syncRows(
        $("moves-body"),
        rec.moves.length ? rec.moves : [null],
        (mv) => (mv === null ? "" : `${mv.topic}\u0000${mv.partition}`),
        (mv) =>
          mv === null
            ? h("tr", {}, h("td", { colspan: "4", class: "empty", testid: "no-moves" }))
            : h("tr", { testid: "move-row" }, h("td"), h("td"), h("td"), h("td", { class: "num" })),
        (tr, mv) => {
          if (mv === null) {
            setText(tr.firstChild, noMoves);
            return;
          }
          const [partition, from, to, lag] = tr.children;
          setText(partition, `${mv.topic}-${mv.partition}`);
          setText(from, mv.from_member === null ? "(unassigned)" : mv.from_member);
          setText(to, mv.to_member === null ? "(none left)" : mv.to_member);
          setText(lag, lagIn(unit, mv.lag));
        },
      );
      renderRemedies(rec);
    }

    /**
     * The options the recommendation weighed, in its order: each one's skew (none for a scale: kagent assigns
     * no member that does not exist yet), its drain time ("(estimated)" when it rests on a pace not measured)
     * and which one it asks for.
     */
    function renderRemedies(rec) {
      const remedies = rec.remedies || [];
      $("no-remedies").hidden = remedies.length > 0;
      $("remedies-table").hidden = remedies.length === 0;
      syncRows(
        $("remedies-body"),
        remedies,
        (r) => r.kind,
        () => h("tr", { testid: "remedy-row" }, h("td"), h("td", { class: "num" }), h("td"), h("td")),
        (tr, r) => {
          const [option, skew, drain, chosen] = tr.children;
          setText(option, remedyText(r));
          setText(skew, r.kind === "scale" ? "n/a" : decimal(r.skew));
          setAttr(skew, "title", r.kind === "scale" ? "no assignment of members that do not exist yet" : null);
          showDrain(drain, r.drain);
          if (r.estimated) {
            setText(drain, `${drainText(r.drain)} (estimated)`);
            setAttr(drain, "title", "it rests on a pace not measured: a member not saturated, or new members");
          }
          setText(chosen, r.chosen ? "chosen" : "");
          setAttr(tr, "class", r.chosen ? "chosen" : null);
          tr.dataset.kind = r.kind;
        },
      );
    }

    /**
     * Every partition with its figures. The committed offsets are the measurement's; each log end is its
     * latest end-offset poll's (its time in the last column), raised by the API to the committed offset
     * when a commit newer than that poll is beyond it. An offset lag kagent did not measure reads
     * "unknown", or "~N (estimate)" where auto.offset.reset's guess is all there is; flags say why.
     */
    function renderPartitions(partitions) {
      syncRows(
        $("partitions-body"),
        partitions,
        (p) => `${p.topic}\u0000${p.partition}`,
        () => {
          const num = () => h("td", { class: "num" });
          const flags = h("td", { class: "flags" });
          return h(
            "tr",
            { testid: "partition-row" },
            h("td"),
            num(),
            h("td"),
            num(),
            num(),
            num(),
            num(),
            h("td", { testid: "partition-drain" }),
            num(),
            flags,
          );
        },
        (tr, p) => {
          const c = tr.children;
          setText(c[0], p.topic);
          setText(c[1], p.partition);
          setText(c[2], p.member_id === null ? UNKNOWN : p.member_id);
          setAttr(c[2], "title", p.member_id === null ? "no member holds it" : null);
          setText(c[3], known(p.committed) ? integer(p.committed) : "none");
          setAttr(c[3], "title", known(p.committed) ? null : "the group has no committed offset here");
          setText(c[4], integer(p.log_end));
          setAttr(c[4], "title", `log start ${integer(p.log_start)}`);
          const estimate = !known(p.offset_lag) && known(p.estimated_lag);
          setText(c[5], estimate ? `~${integer(p.estimated_lag)} (estimate)` : integer(p.offset_lag));
          c[5].classList.toggle("estimate", estimate);
          setAttr(c[5], "title", estimate ? "where auto.offset.reset would start the group: not counted as lag" : null);
          setText(c[6], duration(p.time_lag));
          showDrain(c[7], p.drain);
          setText(c[8], clock(p.polled_at));
          setAttr(c[8], "title", known(p.polled_at) ? iso(p.polled_at) : "no end-offset poll has answered for it");
          const flags = p.flags || [];
          setText(c[9], flags.join(", "));
          setAttr(c[9], "title", flags.length ? flagTitle(flags) : null);
          setAttr(tr, "class", flags.length ? "flagged" : null);
        },
      );
    }

    function renderHistory(points) {
      const box = $("skew-history");
      if (!points.length) {
        const why = "No history yet (a worker that just took the group over starts one).";
        box.replaceChildren(h("p", { class: "empty", text: why }));
        return;
      }
      // The evaluations' figures, not this page's measurement: the highest skew of each minute.
      const last = points[points.length - 1];
      const highest = Math.max(...points.map((p) => p.skew));
      const label = `minute from ${clock(last.time)}: ${decimal(last.skew)} · hour's highest ${decimal(highest)}`;
      box.replaceChildren(sparkline(points), h("span", { class: "spark-label num", text: label }));
    }

    function render(detail) {
      notFound.hidden = true;
      main.hidden = false;
      renderFacts(detail.summary);
      showDrain(field("drain"), detail.drain);
      renderIncidents(detail.summary.open_incidents || []);
      renderHistory(detail.skew_history || []);
      renderMembers(detail);
      renderRecommendation(detail);
      renderPartitions(detail.partitions);
    }

    async function refresh() {
      const answer = await get(`${ROOT}api/groups/${encodeURIComponent(group)}`);
      if (answer === null) return;
      if (answer.status === 404) {
        live.ok();
        main.hidden = true;
        statusBadge(status, "none", "not found");
        notFound.hidden = false;
        const why = answer.body && answer.body.error ? ` (${answer.body.error})` : "";
        const asking = `this page keeps asking every ${REFRESH_MS / 1000} s`;
        const maybe = "It may not have committed yet, or it was deleted";
        setText(notFound, `No worker knows a consumer group named “${group}”${why}. ${maybe}; ${asking}.`);
        return;
      }
      if (answer.status !== 200 || answer.body === null || !answer.body.summary) {
        live.failed(answerError(answer));
        return;
      }
      live.ok();
      render(answer.body);
    }

    poll(refresh);
  }

  if (body.dataset.page === "groups") groupsPage();
  else if (body.dataset.page === "group") groupPage();
})();
