// raymem memory browser: plain JavaScript over the HTTP API, no build step, no dependencies.
// Every URL is relative to the page's <base>, so the app works under any Serve route prefix.
// All server text is set through textContent, never parsed as HTML.
"use strict";

const TOKEN_KEY = "raymem.token";
const PAGE_SIZE = 50;
const SEARCH_LIMIT = 20;

const $ = (id) => document.getElementById(id);
const state = {
  authRequired: false,
  readOnly: true, // until /ui/key says otherwise: no write control shows by mistake
  profile: null,
  tab: "memories",
  cursor: null,
  memory: null, // the memory whose history is open
  dream: null, // the dream whose diff is open
};

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

// A button; hidden unless the key may write (the API refuses a read-only key anyway).
function writeButton(label, className, onClick) {
  const button = document.createElement("button");
  button.type = "button";
  button.className = `write ${className}`;
  button.textContent = label;
  button.hidden = state.readOnly;
  button.addEventListener("click", () => {
    showError(null);
    onClick().catch(fail);
  });
  return button;
}

function listItem(className, ...parts) {
  const li = document.createElement("li");
  li.className = className;
  for (const [text, partClass] of parts) {
    const span = document.createElement("span");
    span.className = partClass;
    span.textContent = text ?? "";
    li.append(span);
  }
  return li;
}

function notice(text) {
  $("notice").textContent = text;
  $("notice").hidden = !text;
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
    link.classList.toggle("active", info.name === state.profile);
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
  if (list === $("history")) {
    state.memory = memory;
    $("forget-memory").hidden = state.readOnly || Boolean(memory.forgotten_at);
  }
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

async function forgetMemory() {
  const memory = state.memory;
  if (!memory || !window.confirm(`Forget this memory?\n\n${memory.content}`)) return;
  await api(`${profilePath(state.profile)}/memories/${encodeURIComponent(memory.id)}`, {
    method: "DELETE",
  });
  await Promise.all([loadMemories(), loadProfiles()]);
  await showHistory(memory.id);
  notice("Forgotten: recall no longer returns it; its history stays.");
}

$("forget-memory").addEventListener("click", () => {
  showError(null);
  forgetMemory().catch(fail);
});

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

// -------------------------------------------------------------- core blocks

async function loadBlocks() {
  const { blocks } = await api(`${profilePath(state.profile)}/blocks`);
  const list = $("block-list");
  list.replaceChildren();
  for (const block of blocks) {
    const section = document.createElement("div");
    section.className = "block";
    section.dataset.name = block.name;
    const title = document.createElement("h3");
    title.textContent = block.name;
    const size = document.createElement("span");
    size.className = "muted size";
    size.textContent = ` ${block.size} / ${block.limit} characters`;
    title.append(size);
    const entries = document.createElement("ol");
    for (const entry of block.entries) entries.append(listItem("entry", [entry, "content"]));
    if (!block.entries.length) entries.append(listItem("muted", ["empty", "muted"]));
    section.append(title, entries);
    list.append(section);
  }
  $("no-blocks").hidden = blocks.length > 0;
}

// --------------------------------------------------------------- procedures

function patternStatus(pattern) {
  if (pattern.deleted_at) return "deleted";
  if (pattern.superseded_by) return "superseded";
  return pattern.suppressed ? "suppressed" : "active";
}

async function loadProcedures() {
  const base = profilePath(state.profile);
  const [{ patterns }, { skills }] = await Promise.all([
    api(`${base}/patterns`),
    api(`${base}/skills?status=all`),
  ]);
  const patternRows = $("pattern-rows");
  patternRows.replaceChildren();
  for (const pattern of patterns) {
    const row = patternRows.insertRow();
    row.className = `pattern ${patternStatus(pattern)}`;
    row.dataset.id = pattern.id;
    const failure = pattern.error_code ? ` (${pattern.error_code})` : "";
    cell(row, `${pattern.action_type} on ${pattern.target_type}${failure}`, "type");
    const note = pattern.annotation ? ` Note: ${pattern.annotation}` : "";
    cell(row, pattern.recommendation + note, "content");
    cell(row, pattern.confidence.toFixed(2), "number confidence");
    cell(row, String(pattern.samples), "number");
    cell(row, when(pattern.last_seen), "date");
    cell(row, patternStatus(pattern), "status");
  }
  $("no-patterns").hidden = patterns.length > 0;
  const skillRows = $("skill-rows");
  skillRows.replaceChildren();
  for (const skill of skills) {
    const row = skillRows.insertRow();
    row.className = `skill ${skill.status}`;
    row.dataset.id = skill.id;
    cell(row, skill.name, "name");
    cell(row, skill.when_to_use, "content");
    const steps = document.createElement("ol");
    for (const step of skill.steps) steps.append(listItem("step", [step, "content"]));
    row.insertCell().append(steps);
    cell(row, `${skill.status} (${skill.source})`, "status");
  }
  $("no-skills").hidden = skills.length > 0;
}

// ------------------------------------------------------------------- dreams

const REVIEWABLE = new Set(["ready", "adopted"]); // the states that have a diff

async function loadDreams() {
  const { dreams } = await api(`${profilePath(state.profile)}/dreams`);
  const rows = $("dream-rows");
  rows.replaceChildren();
  for (const dream of dreams) {
    const row = rows.insertRow();
    row.className = `dream ${dream.state}`;
    row.dataset.id = dream.id;
    cell(row, dream.id.slice(0, 12), "id");
    cell(row, dream.state, "status");
    cell(row, dream.instructions, "content");
    const counts = Object.entries(dream.counts).map(([name, count]) => `${name} ${count}`);
    cell(row, counts.join(" · "), "counts");
    cell(row, when(dream.started_at), "date");
    cell(row, when(dream.finished_at), "date");
    row.addEventListener("click", () => showDream(dream).catch(fail));
  }
  $("no-dreams").hidden = dreams.length > 0;
  if (state.dream) {
    const again = dreams.find((dream) => dream.id === state.dream);
    if (again) await showDream(again);
  }
}

async function showDream(dream) {
  state.dream = dream.id;
  $("dream-title").textContent = `Dream ${dream.id.slice(0, 12)}: ${dream.state}`;
  $("dream-error").textContent = dream.error ?? "";
  $("dream-error").hidden = !dream.error;
  $("dream-help").textContent =
    dream.state === "adopted"
      ? "What adopting it changed, with the reason for each change."
      : "Every change the dream makes, with its reason; nothing changes until it is adopted.";
  $("dream-help").hidden = !REVIEWABLE.has(dream.state);
  const list = $("dream-changes");
  list.replaceChildren();
  if (REVIEWABLE.has(dream.state)) {
    const path = `${profilePath(state.profile)}/dreams/${encodeURIComponent(dream.id)}/diff`;
    const { changes } = await api(path);
    for (const change of changes) {
      const entry = listItem(
        `change ${change.action}`,
        [change.action, "action"],
        [change.content, "content"],
        [`Why: ${change.reason}`, "reason"],
        [`memories ${change.memory_ids.join(", ")}`, "muted ids"],
      );
      if (change.evidence.length) {
        const evidence = document.createElement("span");
        evidence.className = "muted evidence";
        evidence.textContent = `evidence: ${change.evidence.join(" | ")}`;
        entry.append(evidence);
      }
      list.append(entry);
    }
    $("dream-empty").hidden = changes.length > 0;
  } else {
    $("dream-empty").hidden = true;
  }
  const ready = dream.state === "ready";
  $("dream-actions").replaceChildren(
    ...(ready
      ? [
          writeButton("Adopt", "adopt", () => decideDream(dream.id, "adopt")),
          writeButton("Discard", "discard", () => decideDream(dream.id, "discard")),
        ]
      : []),
  );
  $("dream-detail").hidden = false;
}

async function decideDream(dreamId, decision) {
  const path = `${profilePath(state.profile)}/dreams/${encodeURIComponent(dreamId)}/${decision}`;
  const result = await api(path, { method: "POST" });
  await Promise.all([loadDreams(), loadProfiles()]);
  if (decision === "adopt") {
    const applied = plural(result.applied, "change", "changes");
    notice(`Adopted: ${applied} applied, ${result.skipped.length} skipped.`);
  } else {
    notice("Discarded: the profile stays as it was.");
  }
}

// -------------------------------------------------------------- review queue

async function loadReview() {
  const base = profilePath(state.profile);
  const [mode, { proposals }] = await Promise.all([
    api(`${base}/review`),
    api(`${base}/proposals`),
  ]);
  $("review-mode").textContent =
    mode.mode === "review"
      ? `Review mode: supersessions and merges under confidence ${mode.below} wait here.`
      : "Apply mode: reconciliation makes its changes at once.";
  // The memories the proposals name, fetched once each, for their text.
  const ids = [...new Set(proposals.flatMap((p) => [p.memory_id, p.target_id]))];
  const contents = new Map(
    await Promise.all(
      ids.map(async (id) => {
        const memory = await api(`${base}/memories/${encodeURIComponent(id)}`);
        return [id, memory.content];
      }),
    ),
  );
  const rows = $("proposal-rows");
  rows.replaceChildren();
  for (const proposal of proposals) {
    const row = rows.insertRow();
    row.className = `proposal ${proposal.state}`;
    row.dataset.id = proposal.id;
    cell(row, proposal.action, "type");
    cell(row, contents.get(proposal.memory_id), "content new");
    cell(row, contents.get(proposal.target_id), "content target");
    cell(row, proposal.confidence.toFixed(2), "number");
    cell(row, proposal.reason, "reason");
    const status = cell(row, proposal.state, "status");
    if (proposal.state === "pending") {
      status.append(
        " ",
        writeButton("Approve", "approve", () => decideProposal(proposal.id, "approve")),
        " ",
        writeButton("Reject", "reject", () => decideProposal(proposal.id, "reject")),
      );
    }
  }
  $("no-proposals").hidden = proposals.length > 0;
}

async function decideProposal(proposalId, decision) {
  const proposal = encodeURIComponent(proposalId);
  const path = `${profilePath(state.profile)}/proposals/${proposal}/${decision}`;
  const decided = await api(path, { method: "POST" });
  await Promise.all([loadReview(), loadProfiles()]);
  notice(`Proposal ${decided.state}.`);
}

// ------------------------------------------------------------------ routing

function parseHash() {
  const [profile, tab] = location.hash.replace(/^#\/?/, "").split("/");
  return { profile: profile ? decodeURIComponent(profile) : null, tab: tab || "memories" };
}

async function render() {
  showError(null);
  notice("");
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
  if (changed) {
    $("results").hidden = true;
    state.dream = null;
  }
  $("dream-detail").hidden = !state.dream;
  if (tab === "memories") await loadMemories();
  if (tab === "sessions") await loadSessions();
  if (tab === "core") await loadBlocks();
  if (tab === "procedures") await loadProcedures();
  if (tab === "dreams") await loadDreams();
  if (tab === "review") await loadReview();
  if (tab === "search") $("query").focus();
}

window.addEventListener("hashchange", () => render().catch(fail));

async function start() {
  try {
    if (state.authRequired && !sessionStorage.getItem(TOKEN_KEY)) {
      askForToken("");
      return;
    }
    const key = await api("ui/key");
    state.readOnly = key.read_only;
    $("mode").textContent = key.read_only
      ? "Read-only key: this page changes nothing."
      : "This key may write: forget a memory, adopt or discard a dream, decide a proposal.";
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
