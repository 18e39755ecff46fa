// Models, credentials and engines of the inference plane, through the pass-through.
import { h, replace, code, badge, table, form, section, json, kv, compact, navigate, pageHead, action, errorBox } from '../lib/dom.js';
import { inference, enc } from '../lib/api.js';

const MODALITIES = ['chat', 'embeddings', 'transcription', 'speech', 'images'];
const reload = (note) => navigate('#/models', note);

export async function render(view) {
  const caps = h('div');
  view.append(pageHead('Models'));
  const [models, creds, engines] = await Promise.allSettled([
    inference('GET', '/admin/models'),
    inference('GET', '/admin/credentials'),
    inference('GET', '/admin/engines'),
  ]);
  const or = (r, fn) => (r.status === 'fulfilled' ? fn(r.value) : errorBox(r.reason));
  view.append(
    section('Registered models', or(models, (m) => table([
      { title: 'Id', cell: (x) => h('strong', {}, x.id) },
      { title: 'Binding', cell: (x) => x.binding },
      { title: 'Upstream', cell: (x) => [code(x.model), h('div', { class: 'muted' }, x.baseUrl)] },
      { title: 'Credential', cell: (x) => (x.credentialRef ? code(x.credentialRef) : '—') },
      { title: 'State', cell: (x) => [badge(x.state), x.stateDetail ? h('div', { class: 'muted' }, x.stateDetail) : ''] },
      { title: 'Modalities', cell: (x) => (x.modalities || []).join(', ') || 'any' },
      { title: 'Rev', cell: (x) => String(x.revision) },
      { title: '', cls: 'actions', cell: (x) => [
        action('Capabilities', () => probe(caps, x.id, false), 'small'),
        action('Delete', async () => {
          if (!confirm(`Delete model ${x.id}?`)) return;
          await inference('DELETE', `/admin/models/${enc(x.id)}`);
          reload(`Deleted ${x.id}.`);
        }, 'small danger'),
      ] },
    ], m.models, 'No models registered.')), caps),
    h('div', { class: 'grid2' },
      section('Register a hosted-compatible model', registerForm()),
      section('Credentials', or(creds, (list) => table([
        { title: 'Name', cell: (c) => code(c.name) },
        { title: 'Value', cell: (c) => badge(c.hasValue ? 'set' : 'undecryptable') },
        { title: '', cls: 'actions', cell: (c) => action('Remove', async () => {
          if (!confirm(`Remove credential ${c.name}?`)) return;
          await inference('DELETE', `/admin/credentials/${enc(c.name)}`);
          reload(`Removed ${c.name}.`);
        }, 'small danger') },
      ], list, 'No stored credentials (secret:// refs then resolve from the environment).')),
      h('h3', {}, 'Set a credential'),
      form({
        cls: 'inline',
        fields: [
          { name: 'name', label: 'Name', placeholder: 'OPENAI_API_KEY' },
          { name: 'value', label: 'Value', type: 'password' },
        ],
        submit: 'Store',
        onSubmit: async (v) => {
          await inference('PUT', `/admin/credentials/${enc(v.name)}`, { value: v.value });
          reload(`Stored ${v.name}; use it as secret://${v.name}.`);
        },
      }))),
    section('Engines', or(engines, enginesView)));
}

function registerForm() {
  return form({
    fields: [
      { name: 'id', label: 'Logical id', placeholder: 'gpt-4o-mini' },
      { name: 'baseUrl', label: 'Base URL', placeholder: 'https://api.openai.com/v1', hint: 'Including the API prefix, usually /v1.' },
      { name: 'model', label: 'Provider model', placeholder: 'gpt-4o-mini' },
      { name: 'credentialRef', label: 'Credential ref', placeholder: 'secret://OPENAI_API_KEY', hint: 'A name, never the key itself: store the key under Credentials.' },
      { name: 'maxTokens', label: 'Max tokens', type: 'number', placeholder: 'no cap' },
      { name: 'modalities', label: 'Modalities', type: 'checks', options: MODALITIES, hint: 'None checked: the upstream decides.' },
    ],
    submit: 'Register',
    onSubmit: async (v) => {
      const body = compact({ ...v, binding: 'hosted-compatible', modalities: v.modalities.length ? v.modalities : undefined });
      const m = await inference('PUT', `/admin/models/${enc(v.id)}`, body);
      reload(`Registered ${m.id} (revision ${m.revision}).`);
    },
  });
}

async function probe(target, id, refresh) {
  replace(target, section(`Capabilities of ${id}`, h('p', { class: 'muted' }, 'Probing the upstream… (up to a few requests of 30 s each)')));
  try {
    const c = await inference('GET', `/admin/models/${enc(id)}/capabilities${refresh ? '?refresh=true' : ''}`);
    const yes = (b) => (b === null || b === undefined ? badge('unknown') : badge(b ? 'supported' : 'unsupported'));
    replace(target, section(`Capabilities of ${id}`,
      kv([
        ['Modalities', (c.modalities || []).join(', ') || '—'],
        ['Max context', c.maxContext ?? 'unknown'],
        ['Tool calling', yes(c.toolCalling)],
        ['Vision', yes(c.vision)],
        ['Reasoning', yes(c.reasoning)],
        ['Cached', c.cached ? 'yes' : 'no'],
      ]),
      h('h3', {}, 'Probes'),
      table([
        { title: 'Probe', cell: (p) => p.name },
        { title: 'Result', cell: (p) => badge(p.result) },
        { title: 'Status', cell: (p) => (p.status ? String(p.status) : '') },
        { title: 'Note', cell: (p) => p.note || '' },
      ], c.probes || []),
      h('div', { class: 'button-row' }, action('Probe again', () => probe(target, id, true)), action('Close', () => replace(target)))));
  } catch (err) {
    replace(target, section(`Capabilities of ${id}`, errorBox(err), action('Close', () => replace(target))));
  }
}

function enginesView(e) {
  return [
    kv([
      ['Resident slots', String(e.maxResident)],
      ['Resident now', (e.engines || []).length ? json(e.engines) : 'none'],
    ]),
    h('h3', {}, 'Readiness'),
    table([
      { title: 'Engine', cell: (s) => code(s.engine) },
      { title: 'Modality', cell: (s) => s.modality },
      { title: 'Ready', cell: (s) => badge(s.ready ? 'ready' : 'unavailable') },
      { title: 'Reason', cell: (s) => [s.reason || '', s.installHint ? h('div', { class: 'muted' }, s.installHint) : ''] },
    ], e.readiness || []),
  ];
}
