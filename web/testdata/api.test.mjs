// Tests of the UI's HTTP helpers under Node's test runner (run by js_test.go when node is
// installed): the SSE reader against awkwardly chunked streams, and error envelopes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { stream, api, upload, parseFrame, ApiError } from '../static/lib/api.js';

// fakeFetch answers every request with the given chunks as a streamed body.
function fakeFetch(chunks, { status = 200, headers = {} } = {}) {
  const calls = [];
  globalThis.fetch = async (path, init) => {
    calls.push({ path, init });
    const body = new ReadableStream({
      start(c) {
        for (const ch of chunks) c.enqueue(new TextEncoder().encode(ch));
        c.close();
      },
    });
    return new Response(body, { status, headers });
  };
  return calls;
}

test('stream reads frames split anywhere, skips comments, stops at [DONE]', async () => {
  const text = 'event: run\ndata: {"runId":"run_1","status":"streaming"}\n\n: keepalive\n\n'
    + 'event: delta\r\ndata: {"runId":"run_1","nodeId":"llm","text":"Hé"}\r\n\r\n'
    + 'event: reasoning\ndata: {"runId":"run_1","nodeId":"llm","text":"hmm"}\n\n'
    + 'event: run\ndata: {"runId":"run_1","status":"completed","output":"Hé"}\n\n'
    + 'data: [DONE]\n\nevent: delta\ndata: {"text":"after done"}\n\n';
  const bytes = new TextEncoder().encode(text);
  // one byte per chunk: frames, lines, CRLF pairs and the UTF-8 "é" are all split
  globalThis.fetch = async () => new Response(new ReadableStream({
    start(c) {
      for (const b of bytes) c.enqueue(new Uint8Array([b]));
      c.close();
    },
  }), { headers: { 'X-Run-Id': 'run_1' } });
  const events = [];
  const runId = await stream('/agents/a/runs', { input: {} }, (ev, d) => events.push([ev, d.text ?? d.status]));
  assert.equal(runId, 'run_1');
  assert.deepEqual(events, [['run', 'streaming'], ['delta', 'Hé'], ['reasoning', 'hmm'], ['run', 'completed']]);
});

test('stream sends a JSON POST asking for an event stream', async () => {
  const calls = fakeFetch(['data: [DONE]\n\n']);
  await stream('/runs', { model: 'm', input: 'hi' }, () => {});
  assert.equal(calls[0].path, '/runs');
  assert.equal(calls[0].init.method, 'POST');
  assert.equal(calls[0].init.headers.Accept, 'text/event-stream');
  assert.deepEqual(JSON.parse(calls[0].init.body), { model: 'm', input: 'hi' });
});

test('a refused stream becomes an ApiError with the envelope code', async () => {
  fakeFetch([JSON.stringify({ error: { code: 'invalid_ir', message: 'bad', details: { problems: [{ path: '/nodes/0' }] } } })], { status: 400 });
  await assert.rejects(stream('/graphs/runs', {}, () => {}), (err) => {
    assert.ok(err instanceof ApiError);
    assert.equal(err.code, 'invalid_ir');
    assert.equal(err.status, 400);
    assert.equal(err.details.problems[0].path, '/nodes/0');
    return true;
  });
});

test('api decodes answers, 204 and non-JSON failures', async () => {
  fakeFetch(['{"agents":[]}']);
  assert.deepEqual(await api('GET', '/agents'), { agents: [] });
  globalThis.fetch = async () => new Response(null, { status: 204 });
  assert.equal(await api('DELETE', '/sessions/x'), null);
  fakeFetch(['<html>bad gateway</html>'], { status: 502 });
  await assert.rejects(api('GET', '/agents'), { code: 'http_502' });
  globalThis.fetch = async () => { throw new TypeError('fetch failed'); };
  await assert.rejects(api('GET', '/agents'), { code: 'network_error' });
});

test('parseFrame joins data lines and ignores comments', () => {
  assert.deepEqual(parseFrame('event: x\ndata: a\ndata: b'), { event: 'x', data: 'a\nb' });
  assert.equal(parseFrame(': keepalive'), null);
  assert.deepEqual(parseFrame('data:{"a":1}'), { event: 'message', data: '{"a":1}' });
});

test('upload sends the raw blob with its own type, octet-stream when it has none', async () => {
  const calls = fakeFetch(['{"ref":"art_00000000000000000000000000000000","contentType":"image/svg+xml","bytes":5}'], { status: 201 });
  const a = await upload('/artifacts', new Blob(['<svg>'], { type: 'image/svg+xml' }));
  assert.equal(a.bytes, 5);
  assert.equal(calls[0].init.method, 'POST');
  assert.equal(calls[0].init.headers['Content-Type'], 'image/svg+xml');
  assert.equal(await calls[0].init.body.text(), '<svg>');
  const calls2 = fakeFetch(['{"ref":"art_00000000000000000000000000000000","contentType":"application/octet-stream","bytes":1}'], { status: 201 });
  await upload('/artifacts', new Blob(['x']));
  assert.equal(calls2[0].init.headers['Content-Type'], 'application/octet-stream');
  fakeFetch(['{"error":{"code":"payload_too_large","message":"over the limit"}}'], { status: 413 });
  await assert.rejects(upload('/artifacts', new Blob(['x'])), { code: 'payload_too_large', status: 413 });
});
