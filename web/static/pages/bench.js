// Bench store of the control plane: results (filter, record, compare two), parameter
// presets and golden-case suites. Bodies are snake_case like every control-plane record.
import { h, link, code, table, pagedTable, form, section, json, kv, fmtTime, short, compact, navigate, pageHead, action } from '../lib/dom.js';
import { api, enc, query } from '../lib/api.js';

const FILTERS = ['logical_id', 'agent_id', 'suite_id', 'case_id'];

function subnav(active) {
  return h('div', { class: 'subnav' }, [['bench', 'Results'], ['bench/compare', 'Compare'], ['bench/presets', 'Presets'], ['bench/suites', 'Suites']]
    .map(([p, t]) => link(`#/${p}`, t, `button small${p === active ? ' active' : ''}`)));
}

const metricsText = (m) => Object.entries(m || {}).map(([k, v]) => `${k}=${v}`).join(', ');

export async function results(view, { query: q }) {
  const filters = Object.fromEntries(FILTERS.map((k) => [k, q.get(k) || '']));
  const compareForm = pickForm('', '');
  view.append(
    pageHead('Bench'), subnav('bench'),
    section('Filter results', form({
      cls: 'inline',
      fields: FILTERS.map((name) => ({ name, label: name, value: filters[name] })),
      submit: 'Filter',
      onSubmit: async (v) => navigate(`#/bench${query(v)}`),
    })),
    pagedTable([
      { title: 'Result', cell: (r) => h('span', { class: 'mono', title: r.id }, short(r.id, 16)) },
      { title: 'Subject', cell: (r) => [r.logical_id ? h('div', {}, 'model ', code(r.logical_id)) : '', r.agent_id ? h('div', {}, 'agent ', link(`#/agents/${enc(r.agent_id)}`, r.agent_id)) : ''] },
      { title: 'Suite / case', cell: (r) => (r.suite_id ? [link(`#/bench/suites/${enc(r.suite_id)}`, r.suite_id), r.case_id ? ` / ${r.case_id}` : ''] : '—') },
      { title: 'Preset', cell: (r) => r.preset || '—' },
      { title: 'Metrics', cell: (r) => code(metricsText(r.metrics)) },
      { title: 'Labels', cell: (r) => code(metricsText(r.labels)) },
      { title: 'Recorded', cell: (r) => fmtTime(r.created_at) },
      { title: 'Compare', cls: 'actions', cell: (r) => [
        action('as A', async () => { compareForm.inputs.a.value = r.id; compareForm.scrollIntoView({ block: 'nearest' }); }, 'small'),
        action('as B', async () => { compareForm.inputs.b.value = r.id; compareForm.scrollIntoView({ block: 'nearest' }); }, 'small'),
      ] },
    ], async (before) => {
      const r = await api('GET', `/bench/runs${query({ ...filters, limit: 50, before })}`);
      return { items: r.results, next: r.next };
    }, 'No results match.'),
    h('div', { class: 'grid2' },
      section('Compare two results', compareForm),
      section('Record a result', recordForm())));
}

function pickForm(a, b) {
  return form({
    fields: [
      { name: 'a', label: 'A (baseline)', value: a, placeholder: 'bres_…' },
      { name: 'b', label: 'B', value: b, placeholder: 'bres_…', hint: 'Pick rows with "as A" / "as B", or paste ids.' },
    ],
    submit: 'Compare',
    onSubmit: async (v) => navigate(`#/bench/compare${query(v)}`),
  });
}

function recordForm() {
  return form({
    fields: [
      { name: 'logical_id', label: 'Logical id (model)', placeholder: 'llama-3-8b', hint: 'At least one of model and agent.' },
      { name: 'agent_id', label: 'Agent id' },
      { name: 'suite_id', label: 'Suite id' },
      { name: 'case_id', label: 'Case id', hint: 'Needs the suite.' },
      { name: 'preset', label: 'Preset (a label)' },
      { name: 'metrics', label: 'Metrics (JSON object of numbers)', type: 'json', rows: 3, value: '{"accuracy": 0.75, "latency_ms": 120.5}' },
      { name: 'params', label: 'Params (JSON object)', type: 'json', rows: 2, placeholder: '{"temperature": 0}' },
      { name: 'labels', label: 'Labels (JSON object of strings)', type: 'json', rows: 2, placeholder: '{"commit": "abc123"}' },
      { name: 'notes', label: 'Notes', type: 'textarea', rows: 2 },
    ],
    submit: 'Record',
    onSubmit: async (v) => {
      const r = await api('POST', '/bench/runs', compact(v));
      navigate('#/bench', `Recorded ${r.id}.`);
    },
  });
}

export async function compare(view, { query: q }) {
  const a = q.get('a') || '';
  const b = q.get('b') || '';
  view.append(pageHead('Bench: compare'), subnav('bench/compare'), section('Results to compare', pickForm(a, b)));
  if (!a || !b) return;
  const c = await api('GET', `/bench/compare${query({ a, b })}`);
  const num = (x) => (x === null || x === undefined ? '—' : String(+x.toPrecision(6)));
  const tone = (d) => (d === null || d === undefined || d === 0 ? 'delta' : d > 0 ? 'delta up' : 'delta down');
  view.append(
    section('Per-metric deltas (B − A)',
      h('p', { class: 'muted' }, 'Positive means B is higher; whether higher is better depends on the metric.'),
      table([
        { title: 'Metric', cell: (m) => code(m.name) },
        { title: 'A', cls: 'num', cell: (m) => num(m.a) },
        { title: 'B', cls: 'num', cell: (m) => num(m.b) },
        // No green/red: whether higher is better depends on the metric (accuracy vs latency).
        { title: 'Delta', cls: 'num', cell: (m) => h('span', { class: tone(m.delta) }, m.delta > 0 ? `+${num(m.delta)}` : num(m.delta)) },
        { title: 'Delta %', cls: 'num', cell: (m) => (m.delta_pct === null || m.delta_pct === undefined ? '—' : `${m.delta_pct > 0 ? '+' : ''}${m.delta_pct.toFixed(2)}%`) },
      ], c.metrics || [], 'Neither result has metrics.')),
    h('div', { class: 'grid2' }, section('A', resultView(c.a)), section('B', resultView(c.b))));
}

function resultView(r) {
  return kv([
    ['Id', code(r.id)],
    ['Model', r.logical_id],
    ['Agent', r.agent_id],
    ['Suite', r.suite_id],
    ['Case', r.case_id],
    ['Preset', r.preset],
    ['Params', r.params ? json(r.params) : ''],
    ['Labels', Object.keys(r.labels || {}).length ? json(r.labels) : ''],
    ['Notes', r.notes],
    ['Recorded', fmtTime(r.created_at)],
  ]);
}

export async function presets(view) {
  const reload = (note) => navigate('#/bench/presets', note);
  view.append(
    pageHead('Bench: presets'), subnav('bench/presets'),
    pagedTable([
      { title: 'Name', cell: (p) => h('strong', {}, p.name) },
      { title: 'Description', cell: (p) => p.description || '' },
      { title: 'Params', cell: (p) => code(JSON.stringify(p.params)) },
      { title: 'Created', cell: (p) => fmtTime(p.created_at) },
      { title: '', cls: 'actions', cell: (p) => action('Delete', async () => {
        if (!confirm(`Delete preset ${p.name}? Results keep it as a label.`)) return;
        await api('DELETE', `/bench/presets/${enc(p.name)}`);
        reload(`Deleted ${p.name}.`);
      }, 'small danger') },
    ], async (before) => {
      const r = await api('GET', `/bench/presets${query({ limit: 50, before })}`);
      return { items: r.presets, next: r.next };
    }, 'No presets yet.'),
    section('New preset', form({
      fields: [
        { name: 'name', label: 'Name', placeholder: 'greedy', hint: 'A name in use is refused: delete and create again to change a preset.' },
        { name: 'description', label: 'Description' },
        { name: 'params', label: 'Params (JSON object)', type: 'json', rows: 4, value: '{"temperature": 0}' },
      ],
      submit: 'Create',
      onSubmit: async (v) => {
        const p = await api('POST', '/bench/presets', compact(v));
        reload(`Created preset ${p.name}.`);
      },
    })));
}

const SUITE_EXAMPLE = {
  id: 'qa-golden',
  name: 'QA golden set',
  description: 'Short factual questions',
  cases: [{ id: 'q1', input: { question: '2+2?' }, expected: '4', tags: ['math'] }],
};

export async function suites(view) {
  view.append(
    pageHead('Bench: suites'), subnav('bench/suites'),
    pagedTable([
      { title: 'Suite', cell: (s) => [link(`#/bench/suites/${enc(s.id)}`, s.id), h('div', {}, s.name)] },
      { title: 'Description', cell: (s) => s.description || '' },
      { title: 'Cases', cls: 'num', cell: (s) => String(s.case_count) },
      { title: 'Created', cell: (s) => fmtTime(s.created_at) },
    ], async (before) => {
      const r = await api('GET', `/bench/suites${query({ limit: 50, before })}`);
      return { items: r.suites, next: r.next };
    }, 'No suites yet.'),
    section('New suite', form({
      fields: [{ name: 'suite', label: 'Suite (JSON: {id?, name, description?, cases: [{id, input, expected?, tags?}]})', type: 'json', rows: 12, value: SUITE_EXAMPLE }],
      submit: 'Create',
      onSubmit: async (v) => {
        const s = await api('POST', '/bench/suites', v.suite);
        navigate(`#/bench/suites/${enc(s.id)}`, `Created suite ${s.id}.`);
      },
    })));
}

export async function suite(view, { params }) {
  const s = await api('GET', `/bench/suites/${enc(params.id)}`);
  view.append(
    pageHead(s.name, link(`#/bench${query({ suite_id: s.id })}`, 'Results of this suite', 'button')), subnav('bench/suites'),
    section('Suite', kv([['Id', code(s.id)], ['Description', s.description], ['Cases', String((s.cases || []).length)], ['Created', fmtTime(s.created_at)]])),
    section('Cases', table([
      { title: 'Case', cell: (c) => h('strong', {}, c.id) },
      { title: 'Input', cell: (c) => json(c.input) },
      { title: 'Expected', cell: (c) => (c.expected === undefined ? h('span', { class: 'muted' }, 'none') : json(c.expected)) },
      { title: 'Tags', cell: (c) => (c.tags || []).join(', ') },
    ], s.cases || [], 'No cases.')));
}
