// Connections: named credentials for tool nodes. The secret is write-only: it is typed into
// a password input, sent once, and only hasSecret / secretStatus are ever shown.
import { h, code, badge, pagedTable, form, section, fmtTime, compact, navigate, pageHead, action } from '../lib/dom.js';
import { api, enc, query } from '../lib/api.js';

export async function list(view) {
  const reload = (note) => navigate('#/connections', note);
  const { connections: all } = await api('GET', '/connections?limit=200');
  view.append(
    pageHead('Connections'),
    pagedTable([
      { title: 'Name', cell: (c) => h('span', {}, h('strong', {}, c.name), h('div', { class: 'muted mono' }, c.id)) },
      { title: 'Kind', cell: (c) => c.kind },
      { title: 'Config', cell: (c) => code(JSON.stringify(c.config)) },
      { title: 'Secret', cell: (c) => [badge(c.hasSecret ? 'set' : 'none'), ' ', c.hasSecret ? badge(c.secretStatus) : ''] },
      { title: 'State', cell: (c) => [badge(c.enabled ? 'enabled' : 'disabled'), ' ', badge(c.usable ? 'usable' : 'unusable')] },
      { title: 'Updated', cell: (c) => fmtTime(c.updatedAt) },
      { title: '', cls: 'actions', cell: (c) => [
        action(c.enabled ? 'Disable' : 'Enable', async () => {
          await api('PATCH', `/connections/${enc(c.id)}`, { enabled: !c.enabled });
          reload(`${c.enabled ? 'Disabled' : 'Enabled'} ${c.name}.`);
        }, 'small'),
        action('Delete', async () => {
          if (!confirm(`Delete connection ${c.name}? Tool nodes using it will get connection_not_found.`)) return;
          await api('DELETE', `/connections/${enc(c.id)}`);
          reload(`Deleted ${c.name}.`);
        }, 'small danger'),
      ] },
    ], async (before) => {
      const r = await api('GET', `/connections${query({ limit: 50, before })}`);
      return { items: r.connections, next: r.next };
    }, 'No connections yet.'),
    h('div', { class: 'grid2' },
      section('New connection', form({
        fields: [
          { name: 'name', label: 'Name', placeholder: 'github' },
          { name: 'kind', label: 'Kind', type: 'select', options: ['http_auth', 'mcp_server'] },
          { name: 'config', label: 'Config (JSON object)', type: 'json', value: '{"type": "header"}', rows: 3,
            hint: 'http_auth: {"type":"header"|"basic"|"query", …}; mcp_server: {"server", "header"?} or {"server", "env"}. Never put the secret here.' },
          { name: 'secret', label: 'Secret', type: 'password', hint: 'Encrypted at rest; never shown again.' },
          { name: 'enabled', label: 'Enabled', type: 'checkbox', value: true },
        ],
        submit: 'Create',
        onSubmit: async (v) => {
          const c = await api('POST', '/connections', compact(v));
          reload(`Created ${c.name} (secret ${c.secretStatus}).`);
        },
      })),
      section('Rotate a secret', all.length ? form({
        fields: [
          { name: 'id', label: 'Connection', type: 'select', options: all.map((c) => [c.id, c.name]) },
          { name: 'secret', label: 'New secret', type: 'password', hint: 'Replaces the stored secret in place: same id, same name.' },
        ],
        submit: 'Rotate',
        onSubmit: async (v) => {
          if (!v.secret) throw Object.assign(new Error('type the new secret'), { code: 'invalid_request' });
          const c = await api('PATCH', `/connections/${enc(v.id)}`, { secret: v.secret });
          reload(`Rotated the secret of ${c.name} (secret ${c.secretStatus}).`);
        },
      }) : h('p', { class: 'muted' }, 'No connections.'))));
}
