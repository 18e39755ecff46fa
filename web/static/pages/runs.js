// Runs: start an agent run (streamed, or durable), the runs list with filters, and a run's
// record, trace timeline, per-node I/O and the resume form of a waiting durable run.
import { h, replace, link, code, badge, pagedTable, form, section, json, kv, fmtTime, fmtMs, preciseMs, short, compact, navigate, pageHead, errorBox } from '../lib/dom.js';
import { api, enc, query } from '../lib/api.js';
import { streamPanel } from '../lib/runview.js';

const STATUSES = ['created', 'streaming', 'waiting', 'completed', 'failed'];
const runHref = (id) => `#/runs/${enc(id)}`;

export async function start(view, { query: q, onLeave }) {
  const { agents } = await api('GET', '/agents?limit=200');
  view.append(pageHead('Run an agent'));
  if (!agents.length) {
    view.append(section('No agents', h('p', {}, 'Publish an agent first: ', link('#/agents/new', 'Publish an agent'), '.')));
    return;
  }
  const panel = streamPanel();
  onLeave(panel.abort);
  const wanted = q.get('agent');
  const f = form({
    fields: [
      { name: 'agent', label: 'Agent', type: 'select', options: agents.map((a) => a.id), value: wanted || agents[0].id },
      { name: 'version', label: 'Version', type: 'select', options: [['', 'latest']] },
      { name: 'input', label: 'Input (JSON)', type: 'json', value: q.get('input') || '{}', rows: 6 },
      { name: 'session_id', label: 'Session', placeholder: 'optional: a session id', value: q.get('session') || '' },
      { name: 'durable', label: 'Durable run (checkpointed; polls instead of streaming; needs SERVICE_DURABLE=1)', type: 'checkbox', value: q.get('durable') === '1' },
    ],
    submit: 'Run',
    onSubmit: async (v) => {
      const body = compact({ input: v.input, version: v.version, session_id: v.session_id });
      if (v.durable) {
        const r = await api('POST', `/agents/${enc(v.agent)}/durable-runs`, body);
        navigate(runHref(r.run_id), 'Durable run started.');
        return;
      }
      await panel.run(`/agents/${enc(v.agent)}/runs`, body);
    },
  });
  const versions = f.inputs.version;
  const loadVersions = async (pick) => {
    const a = await api('GET', `/agents/${enc(f.inputs.agent.value)}`);
    replace(versions, h('option', { value: '' }, 'latest'), a.versions.map((v) => h('option', { value: v.version }, v.version)));
    versions.value = pick && a.versions.some((v) => v.version === pick) ? pick : '';
  };
  f.inputs.agent.addEventListener('change', () => loadVersions().catch((err) => f.append(errorBox(err))));
  await loadVersions(q.get('version'));
  view.append(h('div', { class: 'grid2' }, section('Request', f), section('Stream', panel.el)));
}

export async function list(view, { query: q }) {
  const filters = Object.fromEntries(['agent_id', 'status', 'session_id', 'trigger_id'].map((k) => [k, q.get(k) || '']));
  view.append(
    pageHead('Runs', link('#/run', 'Run an agent', 'button primary')),
    form({
      cls: 'inline',
      fields: [
        { name: 'agent_id', label: 'Agent', value: filters.agent_id },
        { name: 'status', label: 'Status', type: 'select', options: [['', 'any'], ...STATUSES], value: filters.status },
        { name: 'session_id', label: 'Session', value: filters.session_id },
        { name: 'trigger_id', label: 'Trigger', value: filters.trigger_id },
      ],
      submit: 'Filter',
      onSubmit: (v) => navigate(`#/runs${query(v)}`),
    }),
    pagedTable([
      { title: 'Run', cell: (r) => link(runHref(r.id), short(r.id, 22), 'mono') },
      { title: 'Status', cell: (r) => badge(r.status) },
      { title: 'Kind', cell: (r) => r.kind + (r.durable ? ' · durable' : '') },
      { title: 'Agent / model', cell: (r) => (r.agent_id ? link(`#/agents/${enc(r.agent_id)}`, `${r.agent_id} @ ${r.version}`) : r.model || '—') },
      { title: 'Started', cell: (r) => fmtTime(r.created_at) },
      { title: 'Took', cell: (r) => (r.completed_at ? fmtMs(preciseMs(r.completed_at) - preciseMs(r.created_at)) : '') },
      { title: 'Error', cell: (r) => (r.error ? code(r.error.code) : '') },
    ], async (before) => {
      const r = await api('GET', `/runs${query({ ...filters, limit: 50, before })}`);
      return { items: r.runs, next: r.next };
    }, 'No runs match.'));
}

export async function detail(view, { params, onLeave }) {
  const body = h('div');
  view.append(body);
  let timer = null;
  onLeave(() => clearTimeout(timer));
  const load = async () => {
    const [run, trace] = await Promise.all([
      api('GET', `/runs/${enc(params.id)}`),
      api('GET', `/runs/${enc(params.id)}/trace`),
    ]);
    replace(body, ...runPage(run, trace, load));
    // Runs in flight are polled until they settle (a waiting run waits for a person).
    if (run.status === 'created' || run.status === 'streaming') timer = setTimeout(() => load().catch((err) => body.append(errorBox(err))), 1500);
  };
  await load();
}

function runPage(run, trace, reload) {
  const again = run.agent_id
    ? link(`#/run${query({ agent: run.agent_id, version: run.version, input: JSON.stringify(run.input), session: run.session_id, durable: run.durable ? 1 : '' })}`, 'Run again', 'button')
    : run.model ? link(`#/playground${query({ model: run.model, prompt: run.input, session: run.session_id })}`, 'Open in playground', 'button') : '';
  return [
    pageHead(run.id, again),
    section('Run', kv([
      ['Status', badge(run.status)],
      ['Kind', run.kind + (run.durable ? ' (durable)' : '')],
      ['Agent', run.agent_id && link(`#/agents/${enc(run.agent_id)}/versions/${enc(run.version)}`, `${run.agent_id} @ ${run.version}`)],
      ['Model', run.model],
      ['Content hash', run.content_hash && code(run.content_hash)],
      ['Session', run.session_id && link(`#/sessions/${enc(run.session_id)}`, run.session_id)],
      ['Trigger', run.trigger_id && link(`#/runs${query({ trigger_id: run.trigger_id })}`, run.trigger_id)],
      ['Started', fmtTime(run.created_at)],
      ['Completed', run.completed_at && fmtTime(run.completed_at)],
    ])),
    run.status === 'waiting' ? resumeForm(run, reload) : '',
    h('div', { class: 'grid2' },
      section('Input', json(run.input)),
      section('Output', run.output === null && run.status !== 'completed'
        ? h('p', { class: 'muted' }, run.status === 'failed' ? 'No output.' : 'No output yet.') : json(run.output),
        run.note ? h('div', { class: 'note' }, h('strong', {}, 'note '), run.note) : '',
        run.error ? errorBox(run.error) : '')),
    section('Trace', traceView(run.id, trace)),
  ];
}

function resumeForm(run, reload) {
  return section(`Waiting at ${run.awaiting_node}`,
    run.prompt ? h('div', { class: 'note' }, run.prompt) : '',
    form({
      fields: [{ name: 'input', label: 'Answer (JSON; becomes the human node\'s output)', type: 'json', value: '{"approved": true}', rows: 4 }],
      submit: 'Resume',
      onSubmit: async (v) => {
        if (v.input === undefined) throw Object.assign(new Error('an answer is required'), { code: 'invalid_request' });
        await api('POST', `/runs/${enc(run.id)}/resume`, { input: v.input });
        await reload();
      },
    }));
}

// traceView draws the span tree as an indented timeline; clicking a node span shows its I/O.
function traceView(runId, trace) {
  if (!trace.root) return h('p', { class: 'muted' }, 'Nothing recorded yet.');
  const rows = [];
  const walk = (s, depth) => {
    rows.push([s, depth]);
    for (const c of s.children || []) walk(c, depth + 1);
  };
  walk(trace.root, 0);
  const t0 = preciseMs(trace.root.start);
  const spanEnd = (s) => (s.end ? preciseMs(s.end) : Date.now());
  const total = Math.max(1e-3, ...rows.map(([s]) => spanEnd(s) - t0));
  const el = h('div', { class: 'trace' },
    h('div', { class: 'span head' }, h('span', {}, 'Span'), h('span', {}, 'Kind'), h('span', {}, 'Status'), h('span', {}, 'Duration'), h('span', {}, 'Timeline')),
    rows.map(([s, depth]) => spanRow(runId, s, depth, t0, total)));
  return [h('p', { class: 'muted' }, `trace ${trace.trace_id} · ${trace.span_count} spans · click a node for its I/O`), el];
}

function spanRow(runId, s, depth, t0, total) {
  const start = preciseMs(s.start) - t0;
  const dur = (s.end ? preciseMs(s.end) : Date.now()) - preciseMs(s.start);
  const bar = h('div', { class: `bar ${s.status}`, title: `${fmtMs(dur)} from +${fmtMs(start)}` });
  bar.style.left = `${(100 * start) / total}%`;
  bar.style.width = `${(100 * Math.max(dur, 0)) / total}%`;
  const name = h('span', { class: 'name', title: s.name }, s.name);
  name.style.paddingLeft = `${depth * 18}px`;
  const attrs = Object.entries(s.attributes || {}).filter(([k]) => ['model', 'tokens_in', 'tokens_out', 'tool_name', 'tool_host', 'iterations', 'restored'].includes(k));
  const row = h('div', { class: `span${s.node_id ? ' clickable' : ''}` },
    h('span', {}, name, attrs.length ? h('div', { class: 'muted' }, attrs.map(([k, v]) => `${k}=${v}`).join(' ')) : ''),
    h('span', {}, s.kind), h('span', {}, badge(s.status)), h('span', {}, s.end ? fmtMs(dur) : '…'),
    h('div', { class: 'track' }, bar));
  const wrap = h('div', {}, row, s.error ? h('div', { class: 'io' }, errorBox(s.error)) : '');
  if (s.node_id) {
    let io = null;
    row.addEventListener('click', async () => {
      if (io) { io.remove(); io = null; return; }
      io = h('div', { class: 'io' }, 'loading…');
      wrap.append(io);
      try {
        replace(io, nodeIO(await api('GET', `/runs/${enc(runId)}/nodes/${enc(s.node_id)}/io`)));
      } catch (err) {
        replace(io, errorBox(err));
      }
    });
  }
  return wrap;
}

function nodeIO(r) {
  if (r.captured) {
    return h('div', { class: 'grid2' }, h('div', {}, h('h3', {}, 'Input'), json(r.input)), h('div', {}, h('h3', {}, 'Output'), json(r.output)));
  }
  return [
    h('p', {}, 'Not captured: ', badge(r.reason), r.reason === 'metadata_only' ? h('span', { class: 'muted' }, ' (set the agent\'s I/O capture to full to keep payloads)') : ''),
    r.input_meta || r.output_meta ? h('div', { class: 'grid2' },
      h('div', {}, h('h3', {}, 'Input ports'), json(r.input_meta || {})),
      h('div', {}, h('h3', {}, 'Output ports'), json(r.output_meta || {}))) : '',
  ];
}
