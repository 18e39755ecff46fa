// Model catalog of the inference plane, through the pass-through: hub search with filters,
// a repository's variants with RAM fit badges, install as a logical id, and the download jobs
// (polled while any is live, cancellable).
import { h, replace, link, code, badge, table, form, section, kv, fmtTime, fmtBytes, compact, navigate, pageHead, action, errorBox } from '../lib/dom.js';
import { inference, enc, query } from '../lib/api.js';

const ENGINES = ['llama.cpp', 'whisper.cpp', 'stable-diffusion.cpp'];
const MODALITIES = ['chat', 'embeddings', 'transcription', 'speech', 'images'];
const SIZES = [['', 'any size'], ['tiny', 'tiny (< 1B)'], ['small', 'small (1–4B)'], ['medium', 'medium (4–14B)'], ['large', 'large (≥ 14B)']];
const LIVE = new Set(['queued', 'downloading', 'verifying']);
const POLL_MS = 2000;

// repoHash is the detail route of an owner/name repository id.
const repoHash = (id) => `#/catalog/${id.split('/').map(enc).join('/')}`;

export async function render(view, { query: q, onLeave }) {
  const filters = Object.fromEntries(['search', 'sort', 'engines', 'size', 'modality'].map((k) => [k, q.get(k) || '']));
  const results = h('div', {}, h('p', { class: 'muted' }, 'Searching…'));
  view.append(
    pageHead('Model catalog'),
    section('Search', form({
      cls: 'inline',
      fields: [
        { name: 'search', label: 'Text', value: filters.search, placeholder: 'qwen, whisper, …' },
        { name: 'sort', label: 'Sort by', type: 'select', value: filters.sort, options: [['', 'downloads'], ['likes', 'likes'], ['lastModified', 'last modified']] },
        { name: 'engines', label: 'Engine', type: 'select', value: filters.engines, options: [['', 'any engine'], ...ENGINES] },
        { name: 'modality', label: 'Modality', type: 'select', value: filters.modality, options: [['', 'any modality'], ...MODALITIES] },
        { name: 'size', label: 'Size', type: 'select', value: filters.size, options: SIZES },
      ],
      submit: 'Search',
      onSubmit: async (v) => navigate(`#/catalog${query(v)}`),
    }), results),
    section('Downloads', downloads(onLeave)));
  try {
    const r = await inference('GET', `/admin/catalog/models${query({ ...filters, limit: 50 })}`);
    replace(results,
      r.source === 'curated' ? h('div', { class: 'note' }, `The hub is unreachable (${r.hubError || 'no answer'}): showing the curated list. Installing needs the hub.`) : '',
      table([
        { title: 'Repository', cell: (m) => [link(repoHash(m.id), m.id), m.description ? h('div', { class: 'muted' }, m.description) : ''] },
        { title: 'Engine', cell: (m) => code(m.engine) },
        { title: 'Modality', cell: (m) => m.modality },
        { title: 'Size', cell: (m) => m.size || '—' },
        { title: 'Downloads', cls: 'num', cell: (m) => String(m.downloads ?? 0) },
        { title: 'Likes', cls: 'num', cell: (m) => String(m.likes ?? 0) },
        { title: 'Updated', cell: (m) => fmtTime(m.lastModified) },
      ], r.models || [], 'No installable model matches.'));
  } catch (err) {
    replace(results, errorBox(err));
  }
}

// downloads lists the jobs and polls while one is live; leaving the page stops the polling.
function downloads(onLeave) {
  const wrap = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  let timer = null;
  let gone = false;
  onLeave(() => { gone = true; clearTimeout(timer); });
  const load = async () => {
    timer = null;
    let list;
    try {
      list = (await inference('GET', '/admin/catalog/downloads')).downloads || [];
    } catch (err) {
      if (!gone) replace(wrap, errorBox(err), action('Retry', load));
      return;
    }
    if (gone) return;
    replace(wrap, jobsTable(list, load));
    if (list.some((j) => LIVE.has(j.state))) timer = setTimeout(load, POLL_MS);
  };
  load();
  return wrap;
}

function jobsTable(list, reload) {
  return table([
    { title: 'Logical id', cell: (j) => h('strong', {}, j.logicalId) },
    { title: 'Repository', cell: (j) => [link(repoHash(j.repo), j.repo), h('div', { class: 'muted' }, `${j.variantId} · ${j.engine}`)] },
    { title: 'State', cell: (j) => [badge(j.state), j.error ? h('div', { class: 'muted' }, j.error) : ''] },
    { title: 'Progress', cell: (j) => progress(j) },
    { title: 'Started', cell: (j) => fmtTime(j.createdAt) },
    { title: '', cls: 'actions', cell: (j) => (LIVE.has(j.state) ? action('Cancel', async () => {
      if (!confirm(`Cancel the download of ${j.logicalId}? Its partial file is removed.`)) return;
      await inference('POST', `/admin/catalog/downloads/${enc(j.job_id)}:cancel`);
      await reload();
    }, 'small danger') : '') },
  ], list, 'No downloads yet.');
}

function progress(j) {
  const total = j.bytesTotal || 0;
  const pct = total ? Math.floor((j.bytesDone / total) * 100) : 0;
  return h('span', {},
    h('progress', { max: total || 1, value: j.bytesDone || 0 }), ' ',
    `${fmtBytes(j.bytesDone || 0)} / ${fmtBytes(total)} (${pct}%)`,
    j.bytesPerSecond ? h('div', { class: 'muted' }, `${fmtBytes(j.bytesPerSecond)}/s`) : '',
    j.modelPath ? h('div', { class: 'muted mono' }, j.modelPath) : '');
}

export async function detail(view, { params }) {
  const repo = `${params.owner}/${params.name}`;
  view.append(pageHead(repo, link('#/catalog', 'Back to search', 'button')));
  const m = await inference('GET', `/admin/catalog/models/${enc(params.owner)}/${enc(params.name)}`);
  const variants = m.variants || [];
  view.append(
    m.source === 'curated' ? h('div', { class: 'note' }, `The hub is unreachable (${m.hubError || 'no answer'}): no variants can be listed or installed now.`) : '',
    section('Model', kv([
      ['Engine', code(m.engine)],
      ['Modality', m.modality],
      ['Pipeline', m.pipelineTag],
      ['Downloads', String(m.downloads ?? 0)],
      ['Likes', String(m.likes ?? 0)],
      ['Tags', (m.tags || []).join(', ')],
      ['Memory (RAM)', m.ramBytes ? fmtBytes(m.ramBytes) : 'unknown'],
      ['Recommended', variants.length ? (m.recommended ? code(m.recommended) : 'none fits comfortably') : undefined],
      ['Description', m.description],
    ])),
    section('Variants', table([
      { title: 'Variant', cell: (v) => [h('strong', {}, v.id), v.recommended ? [' ', badge('recommended')] : ''] },
      { title: 'Files', cell: (v) => (v.files || []).map((f) => h('div', { class: 'mono' }, `${f.name} (${fmtBytes(f.size)})`)) },
      { title: 'Size', cls: 'num', cell: (v) => fmtBytes(v.sizeBytes) },
      { title: 'Estimated memory', cls: 'num', cell: (v) => fmtBytes(v.estimatedMemoryBytes) },
      { title: 'Fit', cell: (v) => badge(v.fit) },
    ], variants, 'No variants listed.', (v) => (v.recommended ? 'recommended' : undefined)),
    h('p', { class: 'muted' }, 'Fit: the estimate (size × 1.10 + 512 MiB) against this machine\'s RAM — fits ≤ 60%, tight ≤ 75%.')),
    variants.length ? section('Install', form({
      fields: [
        { name: 'variantId', label: 'Variant', type: 'select', value: m.recommended || variants[0].id,
          options: variants.map((v) => [v.id, `${v.id} — ${fmtBytes(v.sizeBytes)}, ${v.fit}${v.recommended ? ' (recommended)' : ''}`]) },
        { name: 'engine', label: 'Engine', type: 'select', value: m.engine, options: ENGINES },
        { name: 'logicalId', label: 'Logical id', placeholder: suggestId(params.name), value: suggestId(params.name),
          hint: 'The id agents and /v1 requests use; registered when the download completes.' },
      ],
      submit: 'Install',
      onSubmit: async (v) => {
        const job = await inference('POST', '/admin/catalog/install', compact({ repo, ...v }));
        navigate('#/catalog', `Installing ${job.logicalId} (${job.variantId}): job ${job.job_id} is ${job.state}.`);
      },
    })) : '');
}

// suggestId proposes a logical id from the repository name: lowercase, without the GGUF suffix.
function suggestId(name) {
  return name.replace(/[-_.]?gguf$/i, '').toLowerCase();
}
