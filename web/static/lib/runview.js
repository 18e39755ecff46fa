// The live view of a streamed run, shared by the Run and Playground pages: status, answer
// tokens per answer node as they arrive, reasoning apart, then output, note or error.
import { h, replace, badge, json, errorBox, link } from './dom.js';
import { stream } from './api.js';

export function streamPanel() {
  const status = h('div', { class: 'run-status' });
  const answers = h('div', { class: 'answers' });
  const reasoning = h('pre', { class: 'reasoning' });
  const reasoningBox = h('details', { class: 'reasoning-box', hidden: true, open: true }, h('summary', {}, 'Reasoning'), reasoning);
  const final = h('div', { class: 'final' });
  const stop = h('button', { type: 'button', hidden: true, onclick: () => ctrl && ctrl.abort() }, 'Stop');
  const el = h('div', { class: 'stream-panel' }, h('div', { class: 'row' }, status, stop), reasoningBox, answers, final);
  let ctrl = null;

  const setStatus = (s, runId) => replace(status, badge(s), runId ? [' ', link(`#/runs/${runId}`, runId, 'mono')] : '');
  const answerFor = (nodeId, named) => {
    let pre = answers.querySelector(`pre[data-node="${CSS.escape(nodeId)}"]`);
    if (!pre) {
      pre = h('pre', { class: 'deltas', 'data-node': nodeId });
      answers.append(named ? h('div', { class: 'muted' }, nodeId) : '', pre);
    }
    return pre;
  };

  async function run(path, body) {
    if (ctrl) ctrl.abort();
    ctrl = new AbortController();
    replace(answers);
    replace(final);
    reasoning.textContent = '';
    reasoningBox.hidden = true;
    replace(status, badge('starting'));
    stop.hidden = false;
    let runId = null;
    try {
      await stream(path, body, (event, d) => {
        runId = runId || d.runId;
        if (event === 'delta') {
          answerFor(d.nodeId || '', answers.childElementCount > 0).textContent += d.text;
        } else if (event === 'reasoning') {
          reasoningBox.hidden = false;
          reasoning.textContent += d.text;
        } else if (event === 'run') {
          setStatus(d.status, runId);
          if (d.status === 'completed' || d.status === 'failed') showFinal(d);
        }
      }, ctrl.signal);
    } catch (err) {
      if (err.name === 'AbortError') {
        replace(status, badge('stopped'), ' the run was cancelled with its request', runId ? [' ', link(`#/runs/${runId}`, runId, 'mono')] : '');
      } else {
        replace(status, badge('failed'));
        replace(final, errorBox(err));
      }
    } finally {
      stop.hidden = true;
      ctrl = null;
    }
  }

  function showFinal(d) {
    replace(final,
      d.status === 'completed' ? [h('h3', {}, 'Output'), json(d.output)] : '',
      d.note ? h('div', { class: 'note' }, h('strong', {}, 'note '), d.note) : '',
      d.error ? errorBox(d.error) : '');
  }

  return { el, run, abort: () => ctrl && ctrl.abort() };
}
