// The UI's entry point: hash routing to the page modules. Every page renders into a fresh
// container, so a slow page that finishes after the user moved on writes nowhere visible.
import { h, replace, flash, errorBox, takeNote } from './lib/dom.js';
import * as agents from './pages/agents.js';
import * as runs from './pages/runs.js';
import * as playground from './pages/playground.js';
import * as sessions from './pages/sessions.js';
import * as triggers from './pages/triggers.js';
import * as connections from './pages/connections.js';
import * as models from './pages/models.js';
import * as catalog from './pages/catalog.js';
import * as mcp from './pages/mcp.js';
import * as bench from './pages/bench.js';
import * as artifacts from './pages/artifacts.js';

const routes = [
  ['agents', agents.list],
  ['agents/new', agents.create],
  ['agents/:id', agents.detail],
  ['agents/:id/versions/:version', agents.version],
  ['run', runs.start],
  ['runs', runs.list],
  ['runs/:id', runs.detail],
  ['playground', playground.render],
  ['sessions', sessions.list],
  ['sessions/:id', sessions.detail],
  ['triggers', triggers.list],
  ['connections', connections.list],
  ['models', models.render],
  ['catalog', catalog.render],
  ['catalog/:owner/:name', catalog.detail],
  ['mcp', mcp.list],
  ['bench', bench.results],
  ['bench/compare', bench.compare],
  ['bench/presets', bench.presets],
  ['bench/suites', bench.suites],
  ['bench/suites/:id', bench.suite],
  ['artifacts', artifacts.render],
].map(([pattern, page]) => ({ parts: pattern.split('/'), page }));

function match(path) {
  const segs = path.split('/');
  for (const { parts, page } of routes) {
    if (parts.length !== segs.length) continue;
    const params = {};
    const ok = parts.every((p, i) => {
      if (p.startsWith(':')) {
        params[p.slice(1)] = decodeURIComponent(segs[i]);
        return segs[i] !== '';
      }
      return p === segs[i];
    });
    if (ok) return { page, params };
  }
  return null;
}

let leaving = [];

async function render() {
  for (const fn of leaving) fn();
  leaving = [];
  const raw = location.hash.replace(/^#\/?/, '') || 'agents';
  const [pathPart, qs] = raw.split('?');
  const path = pathPart.replace(/\/+$/, '');
  const section = path.split('/')[0];
  for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('active', a.dataset.section === section);
  flash(takeNote());
  const view = h('div', { class: 'page' });
  replace(document.getElementById('view'), view);
  const m = match(path);
  if (!m) {
    view.append(h('h1', {}, 'Not found'), h('p', {}, `No page at #/${path}.`));
    return;
  }
  try {
    await m.page(view, { params: m.params, query: new URLSearchParams(qs || ''), onLeave: (fn) => leaving.push(fn) });
  } catch (err) {
    view.append(errorBox(err));
  }
}

async function showPlanes() {
  try {
    const cfg = await (await fetch('config.json')).json();
    replace(document.getElementById('planes'), 'control: this origin', h('br'), `inference: ${cfg.inferenceUrl}`);
  } catch {
    // the footer is informative only
  }
}

window.addEventListener('hashchange', render);
render();
showPlanes();
