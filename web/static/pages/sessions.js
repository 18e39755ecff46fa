// Sessions: list, create, and a session's messages.
import { h, link, code, pagedTable, form, section, kv, fmtTime, compact, navigate, pageHead, action } from '../lib/dom.js';
import { api, enc, query } from '../lib/api.js';

const sessionHref = (id) => `#/sessions/${enc(id)}`;

export async function list(view) {
  view.append(
    pageHead('Sessions'),
    section('New session', form({
      cls: 'inline',
      fields: [
        { name: 'id', label: 'Id', placeholder: 'minted when blank' },
        { name: 'metadata', label: 'Metadata (JSON object)', type: 'json', rows: 1, placeholder: '{"user": "ada"}' },
      ],
      submit: 'Create',
      onSubmit: async (v) => {
        const s = await api('POST', '/sessions', compact(v));
        navigate(sessionHref(s.id), `Session ${s.id}.`);
      },
    })),
    pagedTable([
      { title: 'Session', cell: (s) => link(sessionHref(s.id), s.id, 'mono') },
      { title: 'Turns', cell: (s) => String(s.turns) },
      { title: 'Metadata', cell: (s) => (Object.keys(s.metadata || {}).length ? code(JSON.stringify(s.metadata)) : '') },
      { title: 'Last activity', cell: (s) => fmtTime(s.updated_at) },
    ], async (before) => {
      const r = await api('GET', `/sessions${query({ limit: 50, before })}`);
      return { items: r.sessions, next: r.next };
    }, 'No sessions yet.'));
}

export async function detail(view, { params }) {
  const s = await api('GET', `/sessions/${enc(params.id)}`);
  view.append(
    pageHead(s.id,
      link(`#/playground${query({ session: s.id })}`, 'Chat in the playground', 'button primary'),
      link(`#/runs${query({ session_id: s.id })}`, 'Runs', 'button'),
      action('Delete', async () => {
        if (!confirm(`Delete session ${s.id}? Its runs are kept.`)) return;
        await api('DELETE', `/sessions/${enc(s.id)}`);
        navigate('#/sessions', `Deleted session ${s.id}.`);
      }, 'danger')),
    section('Session', kv([
      ['Created', fmtTime(s.created_at)],
      ['Last activity', fmtTime(s.updated_at)],
      ['Turns', String(s.turns)],
      ['Metadata', Object.keys(s.metadata || {}).length ? code(JSON.stringify(s.metadata)) : ''],
    ])),
    section('Messages', s.messages.length
      ? h('div', { class: 'messages' }, s.messages.map((m) => h('div', { class: `msg ${m.role}` }, m.content, h('small', {}, `${m.role} · ${fmtTime(m.created_at)}`))))
      : h('p', { class: 'muted' }, 'No messages yet.')));
}
