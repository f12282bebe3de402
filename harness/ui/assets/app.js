// The live boundary view: calls arrive from /api/events (server-sent events, a batch per message),
// are kept in `calls` (bounded like the server's ring), and the newest MAX_ROWS of those that pass
// the filters are drawn as rows of arrows between lanes, as harness/diagram's SVG draws them:
// the same lane names in the same order (first appearance: caller, callee, chained plugins), the
// same colours, newest at the bottom.
'use strict';

const COL_W = 230, MARGIN = 24, GUTTER = 92, ROW_H = 34, ERR_H = 10;
const MAX_ROWS = 1500;       // DOM rows: what the page draws is bounded whatever the load
let MAX_CALLS = 20000;       // calls kept for filtering and following (the server's ring size)

const $ = (id) => document.getElementById(id);
const calls = [];            // summaries, sorted by (start, id)
let shown = [];              // the summaries drawn, in order; rows[i] draws shown[i]
let rows = [];
let lanes = [], laneX = new Map();
let paused = false, queued = [], queuedDropped = 0;
let follow = null, followSandboxes = new Set(), followVolumes = new Set();
let selected = null;
let housekeepingFolded = 0;
let meta = {};
// What the page received, for measuring it (harness/ui/e2e reads it).
window.plugsimStats = { received: 0, batches: 0, first: 0, last: 0, lost: 0, missed: 0 };

// The view's token: only whoever has the URL the harness printed (…/#token=…) may use its API. The
// fragment never reaches the server, a log or a Referer; the page keeps the token in this tab's
// sessionStorage (per origin, so per port) and takes it out of the address bar.
const TOKEN = (() => {
  const m = /(?:^#|&)token=([0-9a-f]+)/.exec(location.hash);
  if (m) {
    sessionStorage.setItem('plugsim-token', m[1]);
    history.replaceState(null, '', location.pathname + location.search);
  }
  return sessionStorage.getItem('plugsim-token') || '';
})();

// api calls the view's API with the token (the X-Plugsim-UI header, which a page of another origin
// could not send without a CORS preflight either). The tests call it too.
function api(path, opts = {}) {
  return fetch(path, Object.assign({}, opts, { headers: Object.assign({ 'X-Plugsim-UI': TOKEN }, opts.headers || {}) }));
}
window.plugsimApi = api;

function before(a, b) { return a.start < b.start || (a.start === b.start && a.id < b.id); }

// insertSorted puts c where (start, id) says and returns its index; most calls go at the end.
function insertSorted(list, c) {
  let lo = 0, hi = list.length;
  if (hi === 0 || before(list[hi - 1], c)) { list.push(c); return hi; }
  while (lo < hi) { const mid = (lo + hi) >> 1; if (before(list[mid], c)) lo = mid + 1; else hi = mid; }
  list.splice(lo, 0, c);
  return lo;
}

function filters() {
  return {
    iface: $('filter-iface').value,
    pod: $('filter-pod').value.trim().toLowerCase(),
    volume: $('filter-volume').value.trim().toLowerCase(),
    method: $('filter-method').value.trim().toLowerCase(),
    housekeeping: $('show-housekeeping').checked,
  };
}

function concernsFollowed(c) {
  return c.pod === follow || (c.sandbox && followSandboxes.has(c.sandbox)) || (c.volume && followVolumes.has(c.volume));
}

function passes(c, f) {
  if (f.iface && c.iface !== f.iface) return false;
  if (f.method && !c.method.toLowerCase().includes(f.method)) return false;
  if (f.pod && !((c.pod || '').toLowerCase().includes(f.pod) || (c.sandbox || '').toLowerCase().startsWith(f.pod))) return false;
  if (f.volume && !(c.volume || '').toLowerCase().includes(f.volume)) return false;
  if (follow !== null) return concernsFollowed(c); // a followed pod's status polls are its own
  if (c.poll && !f.housekeeping) return false;
  return true;
}

// learnFollowed adds what a call of the followed pod names; it reports whether that set grew (then
// calls seen before, CreateVolume of its volume say, now belong to the pod too).
function learnFollowed(c) {
  if (follow === null || c.pod !== follow) return false;
  let grew = false;
  if (c.sandbox && !followSandboxes.has(c.sandbox)) { followSandboxes.add(c.sandbox); grew = true; }
  if (c.volume && !followVolumes.has(c.volume)) { followVolumes.add(c.volume); grew = true; }
  return grew;
}

function laneClass(p) {
  if (p === 'kubelet' || p === 'harness' || p.startsWith('kubelet@') || p.startsWith('external-') || p.startsWith('csi-provisioner') || p.startsWith('csi-attacher') || p.startsWith('csi-resizer') || p.startsWith('csi-snapshotter')) return 'caller';
  if (p.startsWith('cri')) return 'cri';
  if (p.startsWith('cni') || p.startsWith('portmap')) return 'cni';
  if (p.startsWith('csi')) return 'csi';
  if (p === 'runc') return 'oci';
  return '';
}

function addLane(p) {
  if (laneX.has(p)) return false;
  laneX.set(p, GUTTER + MARGIN + COL_W / 2 + lanes.length * COL_W);
  lanes.push(p);
  return true;
}

function addLanesOf(c) {
  let added = addLane(c.from);
  added = addLane(c.to) || added;
  for (const p of c.chain || []) added = addLane(p) || added;
  return added;
}

function drawLanes() {
  const head = $('lanes'), life = $('lifelines');
  head.replaceChildren(); life.replaceChildren();
  for (const p of lanes) {
    const x = laneX.get(p);
    const box = document.createElement('div');
    box.className = 'lane ' + laneClass(p);
    box.style.left = (x - COL_W / 2 + 14) + 'px';
    box.style.width = (COL_W - 28) + 'px';
    box.textContent = p;
    box.dataset.lane = p;
    head.appendChild(box);
    const line = document.createElement('div');
    line.className = 'lifeline';
    line.style.left = x + 'px';
    life.appendChild(line);
  }
  const width = Math.max(760, GUTTER + MARGIN * 2 + COL_W * lanes.length);
  head.style.width = width + 'px';
  $('rows').style.width = width + 'px';
}

function segment(cls, x1, x2, y, text, dashed) {
  const seg = document.createElement('div');
  const leftward = x2 < x1;
  seg.className = 'seg ' + cls + (leftward ? ' left' : '') + (dashed ? ' dashed' : '');
  seg.style.left = Math.min(x1, x2) + 'px';
  seg.style.width = Math.max(Math.abs(x2 - x1), 12) + 'px';
  seg.style.top = y + 'px';
  seg.innerHTML = '<div class="shaft"></div><div class="head"></div>';
  const label = document.createElement('span');
  label.className = 'label';
  label.textContent = text;
  seg.appendChild(label);
  return seg;
}

// rowFor draws one call the way diagram.arrow does: the arrow from caller to callee labelled with
// the method (CNI: the verb) and duration, the error under a failed one, then one dashed arrow per
// plugin chained after the callee.
function rowFor(c) {
  const row = document.createElement('div');
  const failed = c.code && c.code !== 'OK';
  row.className = 'call iface-' + c.iface + (failed ? ' failed' : '') + (c.poll ? ' poll' : '') + (selected === c.id ? ' selected' : '');
  row.dataset.id = c.id;
  row.dataset.method = c.method;
  row.dataset.iface = c.iface;
  row.dataset.code = c.code;
  if (c.pod) row.dataset.pod = c.pod;
  row.title = c.time + '  ' + c.line;
  const time = document.createElement('span');
  time.className = 'time';
  time.textContent = c.time;
  row.appendChild(time);
  const from = laneX.get(c.from), to = laneX.get(c.to);
  const label = (c.iface === 'CNI' ? 'CNI ' + c.method : c.iface === 'OCI' ? 'runc ' + c.method : c.method) + '  ' + c.dur;
  row.appendChild(segment('main', from, to, 0, label, c.iface === 'CNI' || c.iface === 'OCI'));
  let h = ROW_H;
  if (failed) {
    const err = document.createElement('div');
    err.className = 'errline';
    err.style.left = (Math.min(from, to) + 4) + 'px';
    err.style.top = '30px';
    let msg = c.code + (c.error ? ': ' + c.error : '');
    if (msg.length > 80) msg = msg.slice(0, 79) + '…';
    err.textContent = '✗ ' + msg;
    row.appendChild(err);
    h += ERR_H;
  }
  let prev = to;
  for (const p of c.chain || []) {
    const x = laneX.get(p);
    const seg = segment('chained iface-CNI', prev, x, h, 'CNI ' + c.method + '  (chained)', true);
    row.appendChild(seg);
    prev = x;
    h += ROW_H;
  }
  row.style.height = h + 'px';
  return row;
}

// rebuild draws the newest MAX_ROWS calls that pass the filters, lanes in first-appearance order
// among them, as the exported SVG of the same calls orders its participants.
function rebuild() {
  const f = filters();
  if (follow !== null) {
    followSandboxes = new Set(); followVolumes = new Set();
    for (const c of calls) learnFollowed(c);
  }
  const match = [];
  for (let i = calls.length - 1; i >= 0 && match.length < MAX_ROWS; i--) if (passes(calls[i], f)) match.push(calls[i]);
  match.reverse();
  lanes = []; laneX = new Map();
  for (const c of match) addLanesOf(c);
  drawLanes();
  const box = $('rows');
  for (const r of rows) r.remove();
  shown = match;
  rows = match.map(rowFor);
  const frag = document.createDocumentFragment();
  for (const r of rows) frag.appendChild(r);
  box.appendChild(frag);
  afterDraw(true);
}

function afterDraw(scroll) {
  $('count-shown').textContent = shown.length;
  $('count-housekeeping').textContent = housekeepingFolded;
  $('empty').hidden = calls.length > 0;
  if (scroll && !paused) { const v = $('view'); v.scrollTop = v.scrollHeight; }
}

// ingest takes a batch: keeps it, and draws the calls that pass the filters where their start
// time puts them (a CNI ADD, recorded before the RunPodSandbox that ran it returned, still goes
// after it).
function ingest(batch) {
  const f = filters();
  let grew = false, lanesAdded = false;
  const add = [];
  for (const c of batch) {
    insertSorted(calls, c);
    if (c.poll) housekeepingFolded++;
    grew = learnFollowed(c) || grew;
    if (passes(c, f)) add.push(c);
  }
  if (calls.length > MAX_CALLS) calls.splice(0, calls.length - MAX_CALLS);
  if (grew) { rebuild(); return; }
  if (add.length === 0) { afterDraw(false); return; }
  for (const c of add) lanesAdded = addLanesOf(c) || lanesAdded;
  if (lanesAdded) drawLanes();
  const box = $('rows');
  for (const c of add) {
    const i = insertSorted(shown, c);
    const row = rowFor(c);
    if (i === rows.length) { box.appendChild(row); rows.push(row); }
    else { box.insertBefore(row, rows[i]); rows.splice(i, 0, row); }
  }
  if (shown.length > MAX_ROWS) {
    const n = shown.length - MAX_ROWS;
    for (const r of rows.slice(0, n)) r.remove();
    rows.splice(0, n); shown.splice(0, n);
  }
  afterDraw(true);
}

let pendingBatches = [];
let frame = 0;
function schedule(batch) {
  pendingBatches.push(batch);
  if (!frame) frame = requestAnimationFrame(() => {
    frame = 0;
    const all = pendingBatches.flat();
    pendingBatches = [];
    ingest(all);
  });
}

function rateTick() {
  const st = window.plugsimStats;
  const now = performance.now();
  const n = st.received - (rateTick.prev || 0);
  const dt = (now - (rateTick.at || now)) / 1000;
  if (dt > 0) $('rate').textContent = Math.round(n / dt);
  rateTick.prev = st.received; rateTick.at = now;
  $('count-received').textContent = st.received;
  if (st.lost || st.missed) {
    const el = $('count-lost');
    el.hidden = false;
    el.textContent = '· lost ' + (st.lost + queuedDropped) + ' (page behind), missed ' + st.missed + ' (fakes skipped)';
  }
}

function connect() {
  // EventSource cannot send a header: the stream takes the token as a parameter.
  const es = new EventSource('api/events?token=' + encodeURIComponent(TOKEN));
  es.addEventListener('open', () => setStatus());
  es.addEventListener('error', () => setStatus('down'));
  es.addEventListener('calls', (e) => {
    const msg = JSON.parse(e.data);
    const st = window.plugsimStats;
    st.batches++;
    st.lost = msg.lost; st.missed = msg.missed;
    if (msg.calls.length === 0) return;
    const now = performance.now();
    if (!st.first) st.first = now;
    st.last = now;
    st.received += msg.calls.length;
    if (paused) {
      for (const c of msg.calls) queued.push(c);
      if (queued.length > MAX_CALLS) { queuedDropped += queued.length - MAX_CALLS; queued.splice(0, queued.length - MAX_CALLS); }
      $('pause').textContent = 'resume (' + queued.length + ' new)';
      return;
    }
    schedule(msg.calls);
  });
}

function setStatus(down) {
  const s = $('status');
  if (down) { s.className = 'status down'; s.textContent = 'disconnected: retrying'; return; }
  s.className = 'status ' + (paused ? 'paused' : 'live');
  s.textContent = paused ? 'paused' : 'live';
}

async function showDetail(id) {
  selected = id;
  for (const r of rows) r.classList.toggle('selected', Number(r.dataset.id) === id);
  const d = $('detail');
  d.hidden = false;
  $('detail-id').textContent = '#' + id;
  const resp = await api('api/events/' + id);
  if (!resp.ok) {
    $('detail-line').textContent = await resp.text();
    for (const k of ['detail-request', 'detail-response', 'detail-attrs']) $(k).textContent = '';
    return;
  }
  const { summary, event } = await resp.json();
  $('detail-line').textContent = summary.time + '  ' + summary.line;
  const failed = event.code && event.code !== 'OK';
  $('detail-error').hidden = !failed;
  $('detail-error').textContent = failed ? '✗ ' + event.code + (event.error ? ': ' + event.error : '') : '';
  $('detail-request').textContent = event.request === undefined ? '(none)' : JSON.stringify(event.request, null, 2);
  $('detail-response').textContent = event.response === undefined ? '(none)' : JSON.stringify(event.response, null, 2);
  $('detail-attrs').textContent = JSON.stringify(Object.assign({ caller: event.caller, callee: event.callee, service: event.service, durationNs: event.durationNs }, event.attrs || {}), null, 2);
  const fb = $('follow');
  fb.hidden = !summary.pod;
  fb.textContent = 'follow pod ' + (summary.pod || '');
  fb.dataset.pod = summary.pod || '';
}

function startFollow(pod) {
  follow = pod;
  $('follow-pod').textContent = pod;
  $('follow-banner').hidden = false;
  rebuild();
}

function stopFollow() {
  follow = null;
  $('follow-banner').hidden = true;
  rebuild();
}

async function exportShown(format) {
  const resp = await api('api/export?format=' + format, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ ids: shown.map((c) => c.id), title: meta.title + (follow ? ': pod ' + follow : '') }),
  });
  const blob = await resp.blob();
  window.plugsimLastExport = { format, status: resp.status, size: blob.size, text: await blob.text() };
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob);
  a.download = 'boundary-trace.' + format;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}

async function loadFaults() {
  const resp = await api('api/faults');
  if (!resp.ok) return;
  const { targets } = await resp.json();
  const box = $('fault-rules');
  box.replaceChildren();
  for (const t of targets) {
    const h = document.createElement('h3');
    h.textContent = t.name + ' ';
    const clear = document.createElement('button');
    clear.textContent = 'clear';
    clear.className = 'fault-clear';
    clear.dataset.target = t.name;
    clear.hidden = t.rules.length === 0;
    h.appendChild(clear);
    box.appendChild(h);
    if (t.error) { const p = document.createElement('p'); p.className = 'err'; p.textContent = t.error; box.appendChild(p); continue; }
    if (t.rules.length === 0) { const p = document.createElement('p'); p.className = 'note'; p.textContent = 'no rules'; box.appendChild(p); continue; }
    const table = document.createElement('table');
    table.className = 'rules';
    table.dataset.target = t.name;
    table.innerHTML = '<tr><th>id</th><th>method</th><th>match</th><th>code</th><th>times</th><th>matched</th><th>hits</th></tr>';
    for (const r of t.rules) {
      const tr = document.createElement('tr');
      tr.dataset.rule = r.id;
      if (r.times && r.hits >= r.times) tr.className = 'used-up';
      const match = Object.entries(r.match || {}).map(([k, v]) => k + '=' + v).join(', ');
      for (const v of [r.id, r.method, match, (r.code || '') + (r.delay ? ' +' + r.delay : ''), r.times || '∞', r.matched || 0, r.hits || 0]) {
        const td = document.createElement('td');
        td.textContent = v;
        tr.appendChild(td);
      }
      table.appendChild(tr);
    }
    box.appendChild(table);
  }
}

async function addFault(ev) {
  ev.preventDefault();
  const rule = { method: $('fault-method').value.trim() };
  const match = $('fault-match').value.trim();
  if (match) {
    rule.match = {};
    for (const kv of match.split(',')) {
      const i = kv.indexOf('=');
      if (i > 0) rule.match[kv.slice(0, i).trim()] = kv.slice(i + 1).trim();
    }
  }
  for (const [k, id] of [['code', 'fault-code'], ['message', 'fault-message'], ['delay', 'fault-delay']]) {
    const v = $(id).value.trim();
    if (v) rule[k] = v;
  }
  for (const [k, id] of [['times', 'fault-times'], ['after', 'fault-after']]) {
    const v = parseInt($(id).value, 10);
    if (v > 0) rule[k] = v;
  }
  const target = $('fault-target').value;
  const resp = await api('api/faults/' + encodeURIComponent(target), {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(rule),
  });
  const out = $('fault-result');
  if (resp.ok) {
    const { added } = await resp.json();
    out.className = 'note';
    out.textContent = 'added ' + added.join(', ') + ' to ' + target;
  } else {
    out.className = 'err';
    out.textContent = (await resp.text()).trim();
  }
  loadFaults();
}

async function clearFaults(target) {
  await api('api/faults/' + encodeURIComponent(target), { method: 'DELETE' });
  loadFaults();
}

async function start() {
  if (!TOKEN) {
    const st = $('status');
    st.className = 'status down';
    st.textContent = 'no token: open the URL the harness printed (it ends in #token=…)';
    return;
  }
  meta = await (await api('api/meta')).json();
  MAX_CALLS = meta.capacity || MAX_CALLS;
  $('title').textContent = meta.title;
  document.title = 'plugsim: ' + meta.title;
  const sel = $('fault-target');
  for (const n of meta.faultTargets) { const o = document.createElement('option'); o.textContent = n; sel.appendChild(o); }
  if (meta.faultTargets.length === 0) $('faults').hidden = true;
  for (const id of ['filter-iface', 'filter-pod', 'filter-volume', 'filter-method', 'show-housekeeping']) {
    $(id).addEventListener(id === 'filter-iface' || id === 'show-housekeeping' ? 'change' : 'input', rebuild);
  }
  $('pause').addEventListener('click', () => {
    paused = !paused;
    $('pause').textContent = paused ? 'resume (0 new)' : 'pause';
    setStatus();
    if (!paused && queued.length) { const q = queued; queued = []; ingest(q); }
  });
  $('clear-view').addEventListener('click', () => { calls.length = 0; housekeepingFolded = 0; rebuild(); });
  $('rows').addEventListener('click', (e) => {
    const row = e.target.closest('.call');
    if (row) showDetail(Number(row.dataset.id));
  });
  $('detail-close').addEventListener('click', () => { $('detail').hidden = true; selected = null; for (const r of rows) r.classList.remove('selected'); });
  $('follow').addEventListener('click', (e) => startFollow(e.target.dataset.pod));
  $('unfollow').addEventListener('click', stopFollow);
  $('export-svg').addEventListener('click', () => exportShown('svg'));
  $('export-jsonl').addEventListener('click', () => exportShown('jsonl'));
  $('fault-form').addEventListener('submit', addFault);
  $('fault-rules').addEventListener('click', (e) => { if (e.target.classList.contains('fault-clear')) clearFaults(e.target.dataset.target); });
  drawLanes();
  afterDraw(false);
  connect();
  loadFaults();
  setInterval(() => { if (!$('faults').hidden) loadFaults(); }, 2000);
  setInterval(rateTick, 1000);
}

start();
