// raymem memory browser: plain JavaScript over the HTTP API, no build step, no dependencies.
// Every URL is relative to the page's <base>, so the app works under any Serve route prefix.
// All server text is set through textContent, never parsed as HTML.
"use strict";

const TOKEN_KEY = "raymem.token";
const PAGE_SIZE = 50;
const SEARCH_LIMIT = 20;

const $ = (id) => document.getElementById(id);
const state = { authRequired: false, profile: null, tab: "memories", cursor: null };

class Unauthorized extends Error {}

async function api(path, { method = "GET", body } = {}) {
  const headers = { Accept: "application/json" };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await response.json().catch(() => null);
  if (response.status === 401) throw new Unauthorized(data?.error?.message ?? "Unauthorized");
  if (!response.ok) throw new Error(data?.error?.message ?? `${response.status} ${response.statusText}`);
  return data;
}

const profilePath = (name) => `v1/profiles/${encodeURIComponent(name)}`;

// ------------------------------------------------------------------ helpers

function cell(row, text, className) {
  const td = row.insertCell();
  td.textContent = text ?? "";
  if (className) td.className = className;
  return td;
}

function when(iso) {
  return iso ? iso.replace("T", " ").slice(0, 16) : "";
}

function plural(count, one, many) {
  return `${count} ${count === 1 ? one : many}`;
}

function memoryStatus(memory) {
  if (memory.forgotten_at) return "forgotten";
  if (memory.superseded_by) return "superseded";
  return "current";
}

function showError(error) {
  $("error").textContent = error ? String(error.message ?? error) : "";
  $("error").hidden = !error;
}

function fail(error) {
  if (error instanceof Unauthorized) {
    askForToken(sessionStorage.getItem(TOKEN_KEY) ? error.message : "");
  } else {
    showError(error);
  }
}

// -------------------------------------------------------------------- token

function askForToken(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  $("browser").hidden = true;
  $("sign-out").hidden = true;
  $("token-form").hidden = false;
  $("token-error").textContent = message;
  $("token-error").hidden = !message;
  $("token").focus();
}

$("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, $("token").value.trim());
  $("token").value = "";
  $("token-form").hidden = true;
  start();
});

$("sign-out").addEventListener("click", () => askForToken(""));

// ----------------------------------------------------------------- profiles

async function loadProfiles() {
  const { profiles } = await api("v1/profiles");
  const list = $("profile-list");
  list.replaceChildren();
  for (const info of profiles) {
    const item = document.createElement("li");
    const link = document.createElement("a");
    link.href = `ui#/${encodeURIComponent(info.name)}/memories`; // <base> is the app root
    link.textContent = info.name;
    link.dataset.profile = info.name;
    const counts = document.createElement("span");
    counts.className = "counts";
    counts.textContent = [
      plural(info.memories, "current memory", "current memories"),
      plural(info.messages, "turn", "turns"),
      plural(info.sessions, "session", "sessions"),
    ].join(" · ");
    item.append(link, counts);
    list.append(item);
  }
  $("no-profiles").hidden = profiles.length > 0;
}

// ----------------------------------------------------------------- memories

async function loadMemories(more = false) {
  const params = new URLSearchParams({ limit: String(PAGE_SIZE) });
  params.set("include_superseded", String($("show-superseded").checked));
  if (more && state.cursor) params.set("cursor", state.cursor);
  const page = await api(`${profilePath(state.profile)}/memories?${params}`);
  const rows = $("memory-rows");
  if (!more) {
    rows.replaceChildren();
    $("memory-detail").hidden = true;
  }
  for (const memory of page.memories) {
    const row = rows.insertRow();
    row.dataset.id = memory.id;
    row.className = `memory ${memoryStatus(memory)}`;
    cell(row, memory.type, "type");
    cell(row, memory.content, "content");
    cell(row, memory.topic_key, "topic");
    cell(row, memory.event_time, "date");
    cell(row, when(memory.created_at), "date");
    cell(row, memoryStatus(memory), "status");
    row.addEventListener("click", () => showHistory(memory.id).catch(fail));
  }
  state.cursor = page.next_cursor;
  $("more-memories").hidden = !page.next_cursor;
}

// A memory's version chain (its history, oldest first) into the list `list`, then shown.
async function showHistory(memoryId, list = $("history"), panel = $("memory-detail")) {
  const memory = await api(`${profilePath(state.profile)}/memories/${encodeURIComponent(memoryId)}`);
  list.replaceChildren();
  for (const version of memory.history) {
    const item = document.createElement("li");
    item.className = `version ${memoryStatus(version)}${version.id === memory.id ? " selected" : ""}`;
    item.dataset.id = version.id;
    const content = document.createElement("span");
    content.className = "content";
    content.textContent = version.content;
    const meta = document.createElement("span");
    meta.className = "muted";
    meta.textContent = ` ${version.type} · ${when(version.created_at)} · ${memoryStatus(version)}`;
    item.append(content, meta);
    list.append(item);
  }
  panel.hidden = false;
}

// ----------------------------------------------------------------- sessions

async function loadSessions() {
  const { sessions } = await api(`${profilePath(state.profile)}/sessions`);
  const rows = $("session-rows");
  rows.replaceChildren();
  $("turns-panel").hidden = true;
  for (const session of sessions) {
    const row = rows.insertRow();
    row.dataset.id = session.id;
    row.className = "session";
    cell(row, session.id);
    cell(row, String(session.message_count), "number");
    cell(row, when(session.started_at), "date");
    cell(row, when(session.ended_at), "date");
    row.addEventListener("click", () => showTurns(session.id).catch(fail));
  }
}

async function showTurns(sessionId) {
  const path = `${profilePath(state.profile)}/sessions/${encodeURIComponent(sessionId)}/messages`;
  const { messages } = await api(path);
  const list = $("turns");
  list.replaceChildren();
  for (const message of messages) {
    const item = document.createElement("li");
    item.className = `turn ${message.role}`;
    const role = document.createElement("span");
    role.className = "role";
    role.textContent = message.role;
    const content = document.createElement("span");
    content.className = "content";
    content.textContent = message.content;
    const time = document.createElement("span");
    time.className = "muted";
    time.textContent = when(message.created_at);
    item.append(role, content, time);
    list.append(item);
  }
  $("turns-title").textContent = `Session ${sessionId}`;
  $("turns-panel").hidden = false;
}

// ------------------------------------------------------------------- search

// A hit's status: a stale turn says what has since been replaced; it names its replacement.
function hitStatus(hit) {
  if (hit.stale) return "stale";
  return hit.type === "message" ? "" : memoryStatus(hit);
}

async function search(query, asOf) {
  const body = { query, limit: SEARCH_LIMIT };
  if (asOf) body.as_of = new Date(asOf).toISOString(); // the picker's local time, as UTC
  const result = await api(`${profilePath(state.profile)}/recall`, { method: "POST", body });
  $("answer").textContent = result.answer;
  const stages = Object.entries(result.latency_ms)
    .filter(([stage]) => stage !== "total")
    .map(([stage, ms]) => `${stage} ${ms.toFixed(1)} ms`);
  $("latency").textContent =
    `${result.memories.length} hits in ${result.latency_ms.total.toFixed(1)} ms` +
    (stages.length ? ` (${stages.join(" · ")})` : "");
  const rows = $("hit-rows");
  rows.replaceChildren();
  $("hit-detail").hidden = true;
  result.memories.forEach((hit, index) => {
    const row = rows.insertRow();
    row.className = `hit ${hitStatus(hit)}`.trim();
    cell(row, String(index + 1), "number");
    cell(row, hit.type === "message" ? `message (${hit.role})` : hit.type, "type");
    cell(row, hit.content, "content");
    cell(row, hit.score.toFixed(4), "number score");
    cell(row, hit.channels.join(", "), "channels");
    const status = cell(row, hitStatus(hit), "status");
    // The version chain of what holds now (a stale turn) or of the memory itself.
    const chainOf = hit.stale ? hit.superseded_by : hit.type === "message" ? null : hit.id;
    if (chainOf) {
      const link = document.createElement("button");
      link.type = "button";
      link.className = "link history";
      link.textContent = hit.stale ? "what holds now" : "history";
      link.addEventListener("click", () =>
        showHistory(chainOf, $("hit-history"), $("hit-detail")).catch(fail),
      );
      status.append(" ", link);
    }
  });
  $("results").hidden = false;
}

$("search-form").addEventListener("submit", (event) => {
  event.preventDefault();
  showError(null);
  search($("query").value, $("as-of").value).catch(fail);
});

$("show-superseded").addEventListener("change", () => loadMemories().catch(fail));
$("more-memories").addEventListener("click", () => loadMemories(true).catch(fail));

// ------------------------------------------------------------------ routing

function parseHash() {
  const [profile, tab] = location.hash.replace(/^#\/?/, "").split("/");
  return { profile: profile ? decodeURIComponent(profile) : null, tab: tab || "memories" };
}

async function render() {
  showError(null);
  const { profile, tab } = parseHash();
  for (const link of document.querySelectorAll("#profile-list a")) {
    link.classList.toggle("active", link.dataset.profile === profile);
  }
  $("profile").hidden = !profile;
  if (!profile) return;
  const changed = profile !== state.profile;
  state.profile = profile;
  state.tab = tab;
  $("profile-name").textContent = profile;
  for (const link of document.querySelectorAll(".tabs a")) {
    link.href = `ui#/${encodeURIComponent(profile)}/${link.dataset.tab}`;
    link.classList.toggle("active", link.dataset.tab === tab);
  }
  for (const panel of document.querySelectorAll(".tab")) {
    panel.hidden = panel.id !== `tab-${tab}`;
  }
  if (changed) $("results").hidden = true;
  if (tab === "memories") await loadMemories();
  if (tab === "sessions") await loadSessions();
  if (tab === "search") $("query").focus();
}

window.addEventListener("hashchange", () => render().catch(fail));

async function start() {
  try {
    if (state.authRequired && !sessionStorage.getItem(TOKEN_KEY)) {
      askForToken("");
      return;
    }
    await loadProfiles();
    $("browser").hidden = false;
    $("sign-out").hidden = !state.authRequired;
    await render();
  } catch (error) {
    fail(error);
  }
}

async function boot() {
  const config = await api("ui/config");
  state.authRequired = config.auth_required;
  await start();
}

boot().catch(fail);
