// Triggers: list (optionally of one agent), create schedule and webhook triggers,
// enable/disable, delete. Webhook secrets are typed into password inputs and never shown.
import { h, link, code, badge, pagedTable, form, section, fmtTime, short, compact, navigate, pageHead, action } from '../lib/dom.js';
import { api, enc, query } from '../lib/api.js';

export async function list(view, { query: q }) {
  const agentId = q.get('agent_id') || '';
  const { agents } = await api('GET', '/agents?limit=200');
  const here = `#/triggers${query({ agent_id: agentId })}`;
  const reload = (note) => navigate(here, note);
  const pinFields = [
    { name: 'agent_id', label: 'Agent', type: 'select', options: agents.map((a) => a.id), value: agentId },
    { name: 'version', label: 'Version', placeholder: 'e.g. 1', hint: 'Pin exactly one: a version or a content hash.' },
    { name: 'content_hash', label: 'Content hash', placeholder: 'sha256:…' },
  ];
  const submit = (kind, configOf) => async (v) => {
    const t = await api('POST', '/triggers', compact({
      agent_id: v.agent_id, kind, version: v.version, content_hash: v.content_hash, config: configOf(v), enabled: v.enabled,
    }));
    reload(`Created ${t.kind} trigger ${t.id}.`);
  };
  view.append(
    pageHead(agentId ? `Triggers of ${agentId}` : 'Triggers', agentId ? link('#/triggers', 'All triggers', 'button') : ''),
    pagedTable([
      { title: 'Trigger', cell: (t) => code(short(t.id, 16)) },
      { title: 'Agent', cell: (t) => link(`#/agents/${enc(t.agent_id)}`, t.agent_id) },
      { title: 'Pin', cell: (t) => (t.version ? `version ${t.version}` : code(short(t.content_hash, 20))) },
      { title: 'Kind', cell: (t) => t.kind },
      { title: 'Config', cell: (t) => (t.kind === 'schedule'
        ? [code(t.config.cron), ` ${t.config.timezone || 'UTC'}`, t.config.input !== undefined ? h('div', { class: 'muted' }, `input ${JSON.stringify(t.config.input)}`) : '']
        : [code(`POST ${location.origin}${t.hook_path}`), h('div', { class: 'muted' }, 'secret ***')]) },
      { title: 'State', cell: (t) => badge(t.enabled ? 'enabled' : 'disabled') },
      { title: 'Last fired', cell: (t) => fmtTime(t.last_fired_at) },
      { title: '', cls: 'actions', cell: (t) => [
        link(`#/runs${query({ trigger_id: t.id })}`, 'Runs', 'button small'),
        action(t.enabled ? 'Disable' : 'Enable', async () => {
          await api('PATCH', `/triggers/${enc(t.id)}`, { enabled: !t.enabled });
          reload(`${t.enabled ? 'Disabled' : 'Enabled'} ${t.id}.`);
        }, 'small'),
        action('Delete', async () => {
          if (!confirm(`Delete trigger ${t.id}?`)) return;
          await api('DELETE', `/triggers/${enc(t.id)}`);
          reload(`Deleted ${t.id}.`);
        }, 'small danger'),
      ] },
    ], async (before) => {
      const r = await api('GET', `/triggers${query({ agent_id: agentId, limit: 50, before })}`);
      return { items: r.triggers, next: r.next };
    }, 'No triggers.'),
    agents.length ? h('div', { class: 'grid2' },
      section('New schedule', form({
        fields: [...pinFields,
          { name: 'cron', label: 'Cron', placeholder: '0 9 * * 1-5', hint: '5 fields, or @daily / @hourly / …' },
          { name: 'timezone', label: 'Time zone', placeholder: 'UTC', hint: 'An IANA zone such as Europe/Paris.' },
          { name: 'input', label: 'Input of every run (JSON)', type: 'json', rows: 3, placeholder: '{}' },
          { name: 'enabled', label: 'Enabled', type: 'checkbox', value: true }],
        submit: 'Create schedule',
        onSubmit: submit('schedule', (v) => compact({ cron: v.cron, timezone: v.timezone, input: v.input })),
      })),
      section('New webhook', form({
        fields: [...pinFields,
          { name: 'secret', label: 'Signing secret', type: 'password', hint: '16 to 1024 bytes; the HMAC-SHA256 key of X-Service-Signature. Never shown again.' },
          { name: 'enabled', label: 'Enabled', type: 'checkbox', value: true }],
        submit: 'Create webhook',
        onSubmit: submit('webhook', (v) => ({ secret: v.secret })),
      }))) : section('No agents', h('p', {}, 'Triggers run a pinned agent version: ', link('#/agents/new', 'publish an agent'), ' first.')));
}
