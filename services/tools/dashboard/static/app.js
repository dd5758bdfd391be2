// punto-banco dashboard: renders the read model's snapshot, pushed by server-sent events.
"use strict";
const $ = (id) => document.getElementById(id);
const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
const money = (v, cur) => v === null || v === undefined ? "–" : (v / 100).toLocaleString(undefined, {minimumFractionDigits: 2, maximumFractionDigits: 2}) + (cur ? " " + cur : "");
const pct = (v, digits = 2) => v === null || v === undefined ? "–" : (v * 100).toFixed(digits) + "%";
const secs = (v) => v === null || v === undefined ? "–" : (v < 1 ? Math.round(v * 1000) + " ms" : v.toFixed(2) + " s");
const signed = (v) => v > 0 ? "pos" : v < 0 ? "neg" : "";
const BET_NAMES = {player: "Player", banker: "Banker", tie: "Tie", player_pair: "Player pair", banker_pair: "Banker pair"};

function cardHtml(code) {
  const red = code.endsWith("H") || code.endsWith("D");
  const suit = {C: "♣", D: "♦", H: "♥", S: "♠"}[code.slice(-1)] || "";
  const rank = code[0] === "T" ? "10" : code[0];
  return `<span class="card${red ? " red" : ""}">${rank}${suit}</span>`;
}

// A road grid showing the last `visible` columns.
function grid(cells, visible, cellHtml, cls = "") {
  const maxCol = cells.reduce((m, c) => Math.max(m, c.col), -1);
  const offset = Math.max(0, maxCol + 1 - visible);
  const inner = cells.filter((c) => c.col >= offset).map((c) =>
    `<div class="cell" style="grid-column:${c.col - offset + 1};grid-row:${c.row + 1}">${cellHtml(c)}</div>`).join("");
  return `<div class="road ${cls}" style="grid-template-columns:repeat(${visible},var(--cell))" data-cells="${cells.length}">${inner}</div>`;
}
const pairs = (c) => (c.banker_pair ? '<i class="pair bp"></i>' : "") + (c.player_pair ? '<i class="pair pp"></i>' : "");
const bead = (c) => `<div class="bead ${c.outcome}">${c.total ?? c.outcome}</div>${pairs(c)}`;
const big = (c) => `<div class="ring ${c.outcome}">${c.ties ? '<i class="tie"></i>' : ""}</div>${c.ties > 1 ? `<span class="ties">${c.ties}</span>` : ""}${pairs(c)}`;
const eye = (c) => `<div class="eye ${c.colour}"></div>`;
const dot = (c) => `<div class="dot ${c.colour}"></div>`;
const slash = (c) => `<div class="slash ${c.colour}"></div>`;

function shoeHtml(shoe) {
  if (!shoe) return '<p class="dim">no shoe yet</p>';
  const used = 100 * (shoe.card_count - shoe.cards_left) / shoe.card_count;
  const known = shoe.cut_card_index !== null;  // a studio shoe's: once its device read it
  const cutText = shoe.cut_card_out ? '<span class="flag">out: last coup</span>'
    : known ? `in ${shoe.cards_to_cut} cards (position ${shoe.cut_card_index})` : "not read yet";
  const cutMark = known ? `<div class="cut" style="left:${100 * shoe.cut_card_index / shoe.card_count}%"></div>` : "";
  return `<div>${shoe.studio ? "Studio shoe" : "Shoe"} ${shoe.number} · <b data-k="cards-left">${shoe.cards_left}</b> of ${shoe.card_count} cards left ·
    cut card <span data-k="cut-card">${cutText}</span>
    ${shoe.closed ? ' · <span class="badge closed">shoe closed</span>' : ""}</div>
    <div class="shoebar" title="cards dealt; the yellow mark is the cut card"><div class="used" style="width:${used}%"></div>${cutMark}</div>`;
}

// A studio table's card-reading shoe: its reads, gaps and holds (null for a software shoe).
function deviceHtml(d) {
  if (!d) return "";
  const heard = d.last_read_at === null ? '<span class="dim">no read yet</span>'
    : `last read ${esc(d.last_read_at)} · <span class="${d.stale ? "flag" : ""}" data-k="silent">${d.stale ? "silent for" : "heard"} ${d.silent_for.toFixed(0)} s${d.stale ? "" : " ago"}</span>`;
  const h = d.last_hold;
  const hold = !h ? "no hold" : `last hold <b class="flag" data-k="hold-reason">${esc(h.reason)}</b> at ${esc(h.at)} ·
    since: ${h.coups_resolved_since} coups resolved, ${h.coups_voided_since} voided${h.coups_resolved_since + h.coups_voided_since ? "" : ' <span class="flag">(may still be held)</span>'}`;
  return `<div class="device" data-k="device"><h3>Device <span class="id">${esc(d.device || "–")}</span></h3>
    <div>${heard}</div>
    <div>reads <b data-k="reads">${d.reads}</b> · cards ${d.cards} · unreadable <b data-k="unreadable">${d.unreadable}</b> · re-scans ${d.rescans} ·
      gaps <b class="${d.gaps ? "neg" : ""}" data-k="gaps">${d.gaps}</b> (${d.missing} reads missing)</div>
    <div>holds <b class="${d.holds ? "neg" : ""}" data-k="holds">${d.holds}</b> · ${hold}</div></div>`;
}

function coupHtml(coup, last) {
  if (!coup) return '<p class="dim">no coup yet</p>';
  const shown = coup.player.length || !last ? coup : last;
  const win = shown.outcome;
  const side = (name, cards, total, who) => `<div class="${win === who ? "win" : ""}">${name} ${cards.map(cardHtml).join("")}${total !== null ? `<span class="total">${total}</span>` : ""}</div>`;
  return `<div>Coup <b data-k="coup-number">${coup.number}</b> <span class="badge ${coup.phase}" data-k="phase">${coup.phase}</span>
      ${coup.bets ? `· ${coup.bets} bets` : ""} ${coup.house_result !== null ? `· house <b class="${signed(coup.house_result)}">${money(coup.house_result)}</b>` : ""}</div>
    <div class="hand${shown === coup ? "" : " previous"}">${shown === coup ? "" : `<span class="dim">coup ${shown.number}:</span>`}${side("Player", shown.player, shown.player_total, "PLAYER")}${side("Banker", shown.banker, shown.banker_total, "BANKER")}</div>`;
}

function betsHtml(t) {
  const rows = t.bets.map((b) => `<tr class="${b.favourable ? "favourable" : ""}" data-bet="${b.bet_type}">
    <td>${BET_NAMES[b.bet_type] || esc(b.bet_type)}${b.favourable ? ' <span class="flag" title="the cards left favour the players">▲ players’ edge</span>' : ""}</td>
    <td>${pct(b.theoretical_edge)}</td><td class="${b.edge_now < 0 ? "flag" : ""}">${pct(b.edge_now)}</td>
    <td>${money(b.staked)}</td><td class="${signed(b.house_result)}">${money(b.house_result)}</td><td>${pct(b.hold)}</td></tr>`).join("");
  return `<table class="bets"><tr><th>bet</th><th>edge, full shoe</th><th>edge, cards left</th><th>staked</th><th>house result</th><th>hold</th></tr>${rows}</table>`;
}

function tableHtml(t) {
  const r = t.roads;
  const reasons = Object.entries(t.rejections).map(([k, v]) => `${esc(k)} ${v}`).join(" · ") || "none";
  return `<section class="table ${t.status}" data-table="${esc(t.table_id)}">
    <div class="thead"><h2>${esc(t.table_id)}</h2><span class="badge ${t.status}">${t.status}</span>
      <span class="dim">${esc(t.paytable)} · ${t.decks} decks · ${esc(t.currency)}</span>
      <span class="dim">coups <b data-k="coups">${t.coups_resolved}</b> · Banker ${t.outcomes.BANKER} · Player ${t.outcomes.PLAYER} · Tie ${t.outcomes.TIE}</span></div>
    <div class="cols">
      <div>${shoeHtml(t.shoe)}${deviceHtml(t.device)}${coupHtml(t.coup, t.last_coup)}
        <h3>Bead plate</h3>${grid(r.bead_plate, 24, bead, "bead-plate")}
        <h3>Bets: house edge and realised hold</h3>${betsHtml(t)}
      </div>
      <div><h3>Big road</h3>${grid(r.big_road, 30, big, "big-road")}
        <div class="derived">
          <div><h3>Big eye boy</h3>${grid(r.big_eye_boy, 30, eye, "small big-eye-boy")}</div>
          <div><h3>Small road</h3>${grid(r.small_road, 30, dot, "small small-road")}</div>
          <div><h3>Cockroach road</h3>${grid(r.cockroach_road, 30, slash, "small cockroach-road")}</div>
        </div>
      </div>
    </div>
    <div class="kpis">
      <div class="kpi"><span>house result</span><b class="${signed(t.house_result)}" data-k="house-result">${money(t.house_result, t.currency)}</b></div>
      <div class="kpi"><span>staked</span><b data-k="staked">${money(t.staked)}</b></div>
      <div class="kpi"><span>realised hold</span><b data-k="hold">${pct(t.hold)}</b></div>
      <div class="kpi"><span>bets / s</span><b>${t.bets_per_second.toFixed(1)}</b></div>
      <div class="kpi"><span>accepted</span><b data-k="accepted">${t.bets_accepted}</b></div>
      <div class="kpi"><span>settled</span><b data-k="settled">${t.bets_settled}</b></div>
      <div class="kpi"><span>settlement latency p50 / p95</span><b>${secs(t.latency.p50)} / ${secs(t.latency.p95)}</b></div>
    </div>
    <div class="reasons">rejections: <span data-k="rejections">${reasons}</span></div>
  </section>`;
}

function render(state) {
  const tables = state.tables;
  $("tables").innerHTML = tables.length ? tables.map(tableHtml).join("") : '<p class="dim waiting">Waiting for the first table on Kafka…</p>';
  const rejected = Object.values(state.rejections).reduce((a, b) => a + b, 0);
  $("totals").innerHTML = `<span>tables <b>${tables.filter((t) => t.status === "open").length}</b></span>
    <span>bets / s <b data-k="bets-per-second">${state.bets_per_second.toFixed(1)}</b></span>
    <span>accepted <b>${state.bets_accepted}</b></span><span>rejected <b>${rejected}</b></span>
    <span>settled <b>${state.bets_settled}</b></span>
    <span>dead letters <b class="${state.dead_letters ? "neg" : ""}" data-k="dead-letters">${state.dead_letters}</b></span>`;
  $("ops").innerHTML = state.recent_dead_letters.length
    ? "Last dead letters: " + state.recent_dead_letters.map((d) => `${esc(d.at)} ${esc(d.service)} ${esc(d.topic)}: ${esc(d.error)}`).join("<br>")
    : `${state.messages} messages read from Kafka · no dead letters`;
  document.body.dataset.version = state.version;
}

function connect() {
  const source = new EventSource("/events");
  source.addEventListener("state", (e) => { $("conn").dataset.state = "live"; $("conn").textContent = "live"; render(JSON.parse(e.data)); });
  source.onerror = () => { $("conn").dataset.state = "lost"; $("conn").textContent = "reconnecting…"; };
}
connect();
