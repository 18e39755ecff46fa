// Agents: list, publish (new agent or version) from a JSON editor, versions, IR, I/O policy.
import { link, code, table, pagedTable, form, section, json, kv, fmtTime, short, compact, navigate, pageHead } from '../lib/dom.js';
import { api, enc, query } from '../lib/api.js';

// The greeter of IR.md: a working starting point for the editor.
const EXAMPLE_IR = {
  id: 'greeter',
  nodes: [
    { id: 'shape', kind: 'transform', expr: '{greeting: "Hello, " + $in.in.name}' },
    { id: 'out', kind: 'output', value: '$in.in.greeting' },
  ],
  edges: [{ source: 'shape', target: 'out' }],
};

const agentHref = (id) => `#/agents/${enc(id)}`;
const versionHref = (id, v) => `${agentHref(id)}/versions/${enc(v)}`;
const runHref = (id, v) => `#/run${query({ agent: id, version: v })}`;

export async function list(view) {
  view.append(
    pageHead('Agents', link('#/agents/new', 'Publish an agent', 'button primary')),
    pagedTable([
      { title: 'Agent', cell: (a) => link(agentHref(a.id), a.id) },
      { title: 'Name', cell: (a) => a.name || '—' },
      { title: 'Latest version', cell: (a) => (a.latest ? link(versionHref(a.id, a.latest.version), a.latest.version) : '—') },
      { title: 'Content hash', cell: (a) => (a.latest ? code(short(a.latest.content_hash, 24)) : '') },
      { title: 'Updated', cell: (a) => fmtTime(a.updated_at) },
      { title: '', cls: 'actions', cell: (a) => link(runHref(a.id), 'Run', 'button small') },
    ], async (before) => {
      const r = await api('GET', `/agents${query({ limit: 50, before })}`);
      return { items: r.agents, next: r.next };
    }, 'No agents yet: publish one.'));
}

export async function create(view) {
  view.append(pageHead('Publish an agent'), section('Graph document', form({
    fields: [
      { name: 'ir', label: 'IR (JSON)', type: 'json', value: EXAMPLE_IR, rows: 16, hint: 'The agent id is ir.id. Problems are listed with JSON pointers into the IR.' },
      { name: 'name', label: 'Name', placeholder: 'defaults to ir.name' },
      { name: 'version', label: 'Version', placeholder: '1' },
    ],
    submit: 'Publish',
    onSubmit: async (v) => {
      const a = await api('POST', '/agents', compact(v));
      navigate(agentHref(a.id), `Published ${a.id} version ${a.version}.`);
    },
  })));
}

export async function detail(view, { params }) {
  const a = await api('GET', `/agents/${enc(params.id)}`);
  const latest = a.latest ? await api('GET', `/agents/${enc(a.id)}/versions/${enc(a.latest.version)}`) : null;
  view.append(
    pageHead(a.id,
      link(runHref(a.id), 'Run', 'button primary'),
      link(`#/runs${query({ agent_id: a.id })}`, 'Runs', 'button'),
      link(`#/triggers${query({ agent_id: a.id })}`, 'Triggers', 'button')),
    section('Agent', kv([
      ['Name', a.name || '—'],
      ['Created', fmtTime(a.created_at)],
      ['Updated', fmtTime(a.updated_at)],
      ['Latest', a.latest && code(`${a.latest.version}  ${a.latest.content_hash}`)],
    ])),
    section('Versions', table([
      { title: 'Version', cell: (v) => link(versionHref(a.id, v.version), v.version) },
      { title: 'Content hash', cell: (v) => code(v.content_hash) },
      { title: 'Published', cell: (v) => fmtTime(v.created_at) },
      { title: '', cls: 'actions', cell: (v) => link(runHref(a.id, v.version), 'Run', 'button small') },
    ], a.versions)),
    section('Publish a new version', form({
      fields: [
        { name: 'ir', label: 'IR (JSON)', type: 'json', value: latest ? latest.ir : { id: a.id, nodes: [], edges: [] }, rows: 14, hint: `ir.id must be "${a.id}".` },
        { name: 'version', label: 'Version', placeholder: 'the next integer when blank' },
      ],
      submit: 'Publish version',
      onSubmit: async (v) => {
        const r = await api('POST', `/agents/${enc(a.id)}/versions`, compact(v));
        navigate(versionHref(a.id, r.version), `Version ${r.version} of ${a.id}: ${r.content_hash}.`);
      },
    })),
    section('I/O capture policy', policyForm(a)));
}

function policyForm(a) {
  const p = a.io_policy || {};
  return form({
    fields: [
      { name: 'io_capture', label: 'Capture', type: 'select', value: p.io_capture || 'metadata', options: [
        ['off', 'off: nothing beyond status'], ['metadata', 'metadata: types, sizes, timings'], ['full', 'full: inputs and outputs after redaction']] },
      { name: 'io_retention_seconds', label: 'Retention (seconds)', type: 'number', value: p.io_retention_seconds ?? '', placeholder: 'as long as the run record' },
      { name: 'redact_rules', label: 'Redact rules (JSON list)', type: 'json', value: p.redact_rules || [], rows: 4,
        hint: 'Each rule is {"path": "in.password"} or {"pattern": "sk-[A-Za-z0-9]+"}, with an optional "replacement".' },
    ],
    submit: 'Save policy',
    onSubmit: async (v) => {
      await api('PUT', `/agents/${enc(a.id)}/io-policy`, {
        io_capture: v.io_capture,
        io_retention_seconds: v.io_retention_seconds ?? null,
        redact_rules: v.redact_rules || [],
      });
      return 'Policy saved. It applies to runs recorded from now on.';
    },
  });
}

export async function version(view, { params }) {
  const v = await api('GET', `/agents/${enc(params.id)}/versions/${enc(params.version)}`);
  view.append(
    pageHead(`${v.agent_id} · version ${v.version}`,
      link(runHref(v.agent_id, v.version), 'Run this version', 'button primary'),
      link(agentHref(v.agent_id), 'Agent', 'button')),
    section('Version', kv([
      ['Agent', link(agentHref(v.agent_id), v.agent_id)],
      ['Content hash', code(v.content_hash)],
      ['Published', fmtTime(v.created_at)],
    ])),
    section('IR', json(v.ir)),
    v.canvas ? section('Canvas', json(v.canvas)) : '');
}
