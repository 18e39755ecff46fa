// DOM helpers shared by every page: element building (never innerHTML, so API data is
// always text), tables, forms, error display and small formatters.

// h builds an element. attrs: class, text, on<event> handlers, boolean and string attributes.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else if (k === 'value') el.value = v;
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
}

// replace empties el and fills it with children.
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

export const link = (href, text, cls) => h('a', { href, class: cls }, text);
export const code = (text) => h('code', {}, text);

export function fmtTime(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  return isNaN(d) ? iso : d.toLocaleString();
}

export function fmtMs(ms) {
  if (ms === undefined || ms === null || isNaN(ms)) return '';
  if (ms < 1) return `${Math.round(ms * 1000)} µs`;
  return ms < 1000 ? `${+ms.toFixed(1)} ms` : `${(ms / 1000).toFixed(2)} s`;
}

// fmtBytes shows a byte count in binary units.
export function fmtBytes(n) {
  if (n === undefined || n === null || isNaN(n)) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${i ? n.toFixed(1) : n} ${units[i]}`;
}

// preciseMs parses an RFC 3339 time keeping its sub-millisecond digits (Date.parse drops
// them, and most nodes of a small graph take microseconds).
export function preciseMs(iso) {
  const frac = /\.(\d+)/.exec(iso);
  const whole = Date.parse(iso.replace(/\.\d+/, ''));
  return frac ? whole + Number(`0.${frac[1]}`) * 1000 : whole;
}

export const short = (s, n = 18) => (s && s.length > n ? s.slice(0, n) + '…' : s || '');

// badge shows a status-like word, coloured by its meaning.
export function badge(word) {
  const tone = {
    completed: 'ok', ok: 'ok', fits: 'ok', connected: 'ok', recommended: 'ok', set: 'ok', usable: 'ok', supported: 'ok', true: 'ok', remote: 'ok', resident: 'ok', ready: 'ok', enabled: 'ok',
    failed: 'bad', error: 'bad', too_large: 'bad', false: 'bad', undecryptable: 'bad', unavailable: 'bad',
    streaming: 'busy', running: 'busy', created: 'busy', loading: 'busy', queued: 'busy', downloading: 'busy', verifying: 'busy',
    waiting: 'warn', disabled: 'warn', tight: 'warn', canceled: 'muted', unusable: 'warn', unsupported: 'warn', none: 'muted', skipped: 'muted', idle: 'muted',
  }[String(word)] || 'muted';
  return h('span', { class: `badge ${tone}` }, String(word));
}

// json renders any value as indented JSON text.
export function json(value, cls = '') {
  const text = typeof value === 'string' ? value : JSON.stringify(value, null, 2);
  return h('pre', { class: `json ${cls}` }, text === undefined ? 'undefined' : text);
}

// kv renders [label, value] pairs as a definition list, skipping empty values.
export function kv(pairs) {
  return h('dl', { class: 'kv' }, pairs
    .filter(([, v]) => v !== undefined && v !== null && v !== '')
    .map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}

export const section = (title, ...children) => h('section', { class: 'card' }, h('h2', {}, title), ...children);

// errorBox shows an API error: its code, message and, for invalid_ir, every problem with
// its JSON pointer; other details as JSON.
export function errorBox(err) {
  const codeText = err.code || 'error';
  const box = h('div', { class: 'error', role: 'alert' },
    h('div', {}, h('strong', { class: 'code' }, codeText), ' ', err.message || String(err)));
  const problems = err.details && err.details.problems;
  if (Array.isArray(problems)) {
    box.append(h('ul', { class: 'problems' }, problems.map((p) =>
      h('li', {}, code(p.path || '/'), p.node ? h('span', { class: 'muted' }, ` node ${p.node}`) : '', ' — ', p.message))));
  } else if (err.details && Object.keys(err.details).length) {
    box.append(h('details', {}, h('summary', {}, 'details'), json(err.details)));
  }
  return box;
}

// flash shows a message (or an error) at the top of the page until the next navigation.
export function flash(msg) {
  const el = document.getElementById('flash');
  if (msg instanceof Error) replace(el, errorBox(msg));
  else replace(el, msg ? h('div', { class: 'info' }, msg) : '');
  if (msg) el.scrollIntoView({ block: 'nearest' });
}

// action makes a button that runs an async fn, disabled while it runs; errors are flashed.
export function action(label, fn, cls = '') {
  const b = h('button', { type: 'button', class: cls });
  b.textContent = label;
  b.addEventListener('click', async () => {
    b.disabled = true;
    try {
      await fn();
    } catch (err) {
      flash(err);
    } finally {
      b.disabled = false;
    }
  });
  return b;
}

// table renders rows with columns [{title, cell(row) -> node|string}]; rowClass(row), when
// given, names a class for a row (a highlighted one).
export function table(columns, rows, empty = 'Nothing yet.', rowClass) {
  if (!rows.length) return h('p', { class: 'muted empty' }, empty);
  return h('table', {},
    h('thead', {}, h('tr', {}, columns.map((c) => h('th', { class: c.cls }, c.title)))),
    h('tbody', {}, rows.map((r) => tableRow(columns, r, rowClass))));
}

function tableRow(columns, row, rowClass) {
  return h('tr', { class: rowClass ? rowClass(row) : undefined }, columns.map((c) => h('td', { class: c.cls }, c.cell(row))));
}

// pagedTable loads pages with load(before) -> {items, next} and appends them on "More".
export function pagedTable(columns, load, empty) {
  const wrap = h('div', { class: 'paged' });
  const more = h('div', { class: 'more' });
  let tbody = null;
  const page = async (before) => {
    const { items, next } = await load(before);
    if (!tbody) {
      const t = table(columns, items, empty);
      tbody = t.querySelector('tbody');
      wrap.prepend(t);
    } else {
      tbody.append(...items.map((r) => tableRow(columns, r)));
    }
    replace(more, next ? action('More', () => page(next)) : '');
  };
  wrap.append(more);
  page(undefined).catch((err) => replace(wrap, errorBox(err)));
  return wrap;
}

// form builds a form from field specs and calls onSubmit(values). Field types: text,
// password (write-only: cleared after every submit), number, textarea, json (parsed; blank is
// undefined), select, checkbox, checks (several values), file (the chosen File or undefined),
// secrets (name → write-only value pairs, an object; values cleared after every submit). The submit's error, including
// invalid_ir problems, shows under the button; a returned string shows as a success note.
export function form({ fields, submit = 'Save', onSubmit, cls = '' }) {
  const inputs = {};
  const out = h('div', { class: 'form-result' });
  const rows = fields.map((f) => {
    const input = fieldInput(f);
    inputs[f.name] = { f, input };
    const label = h('label', { class: `field ${f.type || 'text'}` },
      h('span', { class: 'label' }, f.label || f.name), input,
      f.hint ? h('small', { class: 'hint' }, f.hint) : '');
    return label;
  });
  const button = h('button', { type: 'submit', class: 'primary' }, submit);
  const el = h('form', { class: `form ${cls}`, novalidate: true }, rows, h('div', { class: 'button-row' }, button), out);
  el.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    replace(out);
    let values;
    try {
      values = readValues(inputs);
    } catch (err) {
      replace(out, errorBox(err));
      return;
    }
    button.disabled = true;
    try {
      const note = await onSubmit(values);
      if (typeof note === 'string') replace(out, h('div', { class: 'info' }, note));
      else if (note instanceof Node) replace(out, note);
    } catch (err) {
      replace(out, errorBox(err));
    } finally {
      button.disabled = false;
      for (const { f, input } of Object.values(inputs)) {
        if (f.type === 'password') input.value = '';
        if (f.type === 'secrets') for (const i of input.querySelectorAll('input[type=password]')) i.value = '';
      }
    }
  });
  el.inputs = Object.fromEntries(Object.entries(inputs).map(([k, v]) => [k, v.input]));
  return el;
}

function fieldInput(f) {
  const common = { name: f.name, placeholder: f.placeholder, required: f.required };
  switch (f.type) {
    case 'textarea':
    case 'json': {
      const v = f.type === 'json' && f.value !== undefined && typeof f.value !== 'string'
        ? JSON.stringify(f.value, null, 2) : f.value;
      return h('textarea', { ...common, rows: f.rows || 6, spellcheck: 'false', class: f.type === 'json' ? 'mono' : '' }, v ?? '');
    }
    case 'select':
      return h('select', common, (f.options || []).map((o) => {
        const [value, text] = Array.isArray(o) ? o : [o, o];
        return h('option', { value, selected: value === f.value }, text);
      }));
    case 'checkbox':
      return h('input', { ...common, type: 'checkbox', checked: !!f.value });
    case 'checks':
      return h('span', { class: 'checks' }, (f.options || []).map((o) =>
        h('label', {}, h('input', { type: 'checkbox', value: o, checked: (f.value || []).includes(o) }), o)));
    case 'password':
      return h('input', { ...common, type: 'password', autocomplete: 'new-password' });
    case 'file':
      return h('input', { name: f.name, type: 'file', accept: f.accept });
    case 'secrets':
      return secretPairs(f);
    default:
      return h('input', { ...common, type: f.type === 'number' ? 'number' : 'text', value: f.value ?? '', list: f.list });
  }
}

function readValues(inputs) {
  const values = {};
  for (const [name, { f, input }] of Object.entries(inputs)) {
    switch (f.type) {
      case 'checkbox': values[name] = input.checked; break;
      case 'checks': values[name] = [...input.querySelectorAll('input:checked')].map((i) => i.value); break;
      case 'number': values[name] = input.value === '' ? undefined : Number(input.value); break;
      case 'json': values[name] = parseJSON(input.value, f.label || name); break;
      case 'password': values[name] = input.value; break;
      case 'file': values[name] = input.files[0]; break;
      case 'secrets': values[name] = readSecretPairs(input, f.label || name); break;
      default: values[name] = input.value.trim();
    }
  }
  return values;
}

// secretPairs edits name → value pairs whose values are secrets: names are plain text,
// values password inputs; "Add" appends a row.
function secretPairs(f) {
  const rows = h('div', { class: 'pairs' });
  const addRow = () => rows.append(h('div', { class: 'pair' },
    h('input', { type: 'text', class: 'pair-key', placeholder: f.keyPlaceholder || 'NAME', 'aria-label': `${f.label || f.name} name` }),
    h('input', { type: 'password', class: 'pair-value', autocomplete: 'new-password', placeholder: 'value', 'aria-label': `${f.label || f.name} value` })));
  addRow();
  const add = h('button', { type: 'button', class: 'small', onclick: addRow }, 'Add');
  return h('span', { class: 'secrets' }, rows, add);
}

// readSecretPairs gives the pairs as an object (undefined when none is named); a value
// without a name, or a name given twice, is an error naming the field.
function readSecretPairs(el, label) {
  const out = {};
  for (const row of el.querySelectorAll('.pair')) {
    const k = row.querySelector('.pair-key').value.trim();
    const v = row.querySelector('.pair-value').value;
    if (!k && !v) continue;
    const bad = !k ? 'a value has no name' : Object.hasOwn(out, k) ? `${k} is given twice` : '';
    if (bad) throw Object.assign(new Error(`${label}: ${bad}`), { code: 'invalid_request' });
    out[k] = v;
  }
  return Object.keys(out).length ? out : undefined;
}

// parseJSON parses a text field; blank is undefined; a syntax error names the field.
export function parseJSON(text, label) {
  if (!text.trim()) return undefined;
  try {
    return JSON.parse(text);
  } catch (err) {
    const e = new Error(`${label}: ${err.message}`);
    e.code = 'invalid_json';
    throw e;
  }
}

// compact drops undefined and '' members, so that optional fields are omitted from bodies.
export function compact(obj) {
  return Object.fromEntries(Object.entries(obj).filter(([, v]) => v !== undefined && v !== ''));
}

// A note to show on the next page (set by navigate, read once by the router).
let pendingNote = null;

// navigate moves to hash and shows note there (a success message after a create).
export function navigate(hash, note) {
  pendingNote = note || null;
  if (location.hash === hash) window.dispatchEvent(new HashChangeEvent('hashchange'));
  else location.hash = hash;
}

// takeNote returns the pending note once.
export function takeNote() {
  const n = pendingNote;
  pendingNote = null;
  return n;
}

// pageHead is a page title with actions on the right.
export const pageHead = (title, ...actions) => h('div', { class: 'page-head' }, h('h1', {}, title), h('div', { class: 'head-actions' }, actions));
