// Tool servers (MCP) of the control plane: list, register (stdio or streamable HTTP), the
// tools of one, warm/close its session, delete. Environment and header values are secrets:
// typed into password inputs, sent once, never shown back (the API lists only their names).
import { h, replace, code, badge, table, form, section, json, compact, navigate, pageHead, action, errorBox } from '../lib/dom.js';
import { api, enc } from '../lib/api.js';

const reload = (note) => navigate('#/mcp', note);

export async function list(view) {
  const tools = h('div');
  const { servers } = await api('GET', '/admin/mcp/servers');
  view.append(
    pageHead('Tool servers (MCP)'),
    h('p', { class: 'muted' }, 'Model Context Protocol servers called by tool nodes of type mcp ({"type":"mcp","server","name"}). Sessions connect lazily on the first call.'),
    section('Registered servers', table([
      { title: 'Name', cell: (s) => h('strong', {}, s.name) },
      { title: 'Transport', cell: (s) => [s.transport, h('div', { class: 'muted' }, s.timeoutMs ? `timeout ${s.timeoutMs} ms` : 'default timeout')] },
      { title: 'Target', cls: 'wide', cell: (s) => (s.transport === 'stdio'
        ? code([s.command, ...(s.args || [])].join(' '))
        : code(s.url)) },
      { title: 'Secret names', cell: (s) => secretNames(s) },
      { title: 'Connection', cell: (s) => (s.connection ? code(s.connection) : '—') },
      { title: 'State', cell: (s) => [badge(s.state), s.lastError ? h('div', { class: 'muted' }, s.lastError) : ''] },
      { title: '', cls: 'actions', cell: (s) => [
        action('Tools', () => showTools(tools, s.name), 'small'),
        action('Warm', async () => {
          await api('POST', `/admin/mcp/servers/${enc(s.name)}:warm`);
          reload(`${s.name} is connected.`);
        }, 'small'),
        action('Close', async () => {
          await api('POST', `/admin/mcp/servers/${enc(s.name)}:close`);
          reload(`Closed the session of ${s.name}.`);
        }, 'small'),
        action('Delete', async () => {
          if (!confirm(`Delete tool server ${s.name}? Tool nodes using it will fail with mcp_server_not_found.`)) return;
          await api('DELETE', `/admin/mcp/servers/${enc(s.name)}`);
          reload(`Deleted ${s.name}.`);
        }, 'small danger'),
      ] },
    ], servers, 'No tool servers registered.')),
    tools,
    section('Register a tool server', registerForm()));
}

// secretNames lists the names of the write-only values; the values never come back.
function secretNames(s) {
  const env = (s.envKeys || []).map((k) => `${k}=***`);
  const hdr = (s.headerKeys || []).map((k) => `${k}: ***`);
  const all = [...env, ...hdr];
  return all.length ? all.map((t) => h('div', { class: 'nowrap' }, code(t))) : '—';
}

async function showTools(target, name) {
  replace(target, section(`Tools of ${name}`, h('p', { class: 'muted' }, 'Connecting…')));
  const close = action('Close', () => replace(target));
  try {
    const r = await api('GET', `/admin/mcp/servers/${enc(name)}/tools`);
    replace(target, section(`Tools of ${name}`,
      table([
        { title: 'Tool', cell: (t) => h('strong', {}, t.name) },
        { title: 'Description', cell: (t) => t.description || '' },
        { title: 'Input schema', cell: (t) => (t.inputSchema ? h('details', {}, h('summary', {}, 'schema'), json(t.inputSchema)) : '—') },
      ], r.tools || [], 'The server offers no tools.'),
      h('div', { class: 'button-row' }, close)));
  } catch (err) {
    replace(target, section(`Tools of ${name}`, errorBox(err), close));
  }
}

function registerForm() {
  const f = form({
    fields: [
      { name: 'name', label: 'Name', placeholder: 'github', hint: 'Letters, digits, _ . - (up to 64). An existing name is replaced.' },
      { name: 'transport', label: 'Transport', type: 'select', options: [['stdio', 'stdio (a child process)'], ['http', 'http (streamable HTTP)']] },
      { name: 'command', label: 'Command', placeholder: '/usr/local/bin/mcp-server', hint: 'stdio: the program svc starts.' },
      { name: 'args', label: 'Arguments (one per line)', type: 'textarea', rows: 3 },
      { name: 'env', label: 'Environment', type: 'secrets', keyPlaceholder: 'GITHUB_TOKEN', hint: 'stdio: variables for the process. Values are encrypted at rest and never shown again.' },
      { name: 'url', label: 'URL', placeholder: 'https://mcp.example.com/mcp', hint: 'http: the streamable HTTP endpoint.' },
      { name: 'headers', label: 'Headers', type: 'secrets', keyPlaceholder: 'Authorization', hint: 'http: sent on every request. Values are encrypted at rest and never shown again.' },
      { name: 'connection', label: 'Connection', placeholder: 'an mcp_server connection (optional)', hint: 'Its secret is applied at connect time: a header for http, a variable for stdio.' },
      { name: 'timeoutMs', label: 'Timeout (ms)', type: 'number', placeholder: '30000', hint: 'Connecting and each call; 0–600000.' },
    ],
    submit: 'Register',
    onSubmit: async (v) => {
      const stdio = v.transport === 'stdio';
      const body = compact({
        transport: v.transport,
        command: stdio ? v.command : undefined,
        args: stdio && v.args ? v.args.split('\n').map((a) => a.trim()).filter(Boolean) : undefined,
        env: stdio ? v.env : undefined,
        url: stdio ? undefined : v.url,
        headers: stdio ? undefined : v.headers,
        connection: v.connection,
        timeoutMs: v.timeoutMs,
      });
      const s = await api('PUT', `/admin/mcp/servers/${enc(v.name)}`, body);
      reload(`Registered ${s.name} (${s.transport}).`);
    },
  });
  // Show only the fields of the chosen transport.
  const byTransport = { stdio: ['command', 'args', 'env'], http: ['url', 'headers'] };
  const sync = () => {
    const t = f.inputs.transport.value;
    for (const [kind, names] of Object.entries(byTransport)) {
      for (const n of names) f.inputs[n].closest('.field').hidden = kind !== t;
    }
  };
  f.inputs.transport.addEventListener('change', sync);
  sync();
  return f;
}
