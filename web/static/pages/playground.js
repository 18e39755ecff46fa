// Prompt playground: POST /runs with a registered model and a prompt, streamed.
import { h, form, section, compact, pageHead, flash } from '../lib/dom.js';
import { inference } from '../lib/api.js';
import { streamPanel } from '../lib/runview.js';

export async function render(view, { query: q, onLeave }) {
  let ids = [];
  try {
    ids = (await inference('GET', '/v1/models')).data.map((m) => m.id);
  } catch (err) {
    flash(err); // the form still works with a typed id
  }
  const panel = streamPanel();
  onLeave(panel.abort);
  const modelList = h('datalist', { id: 'model-ids' }, ids.map((id) => h('option', { value: id })));
  const f = form({
    fields: [
      { name: 'model', label: 'Model', value: q.get('model') || ids[0] || '', list: 'model-ids', placeholder: 'a logical id registered on the inference plane',
        hint: ids.length ? `${ids.length} registered` : 'No models registered: see Models.' },
      { name: 'input', label: 'Prompt', type: 'textarea', value: q.get('prompt') || '', rows: 6 },
      { name: 'params', label: 'Params (JSON)', type: 'json', placeholder: '{"temperature": 0.2, "maxTokens": 256}', rows: 3 },
      { name: 'session_id', label: 'Session', value: q.get('session') || '', placeholder: 'optional: earlier turns are sent as history' },
    ],
    submit: 'Send',
    onSubmit: (v) => panel.run('/runs', compact(v)),
  });
  view.append(pageHead('Prompt playground'), modelList, h('div', { class: 'grid2' }, section('Prompt', f), section('Answer', panel.el)));
}
