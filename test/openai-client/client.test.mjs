// Drives the inference plane's /v1 API with the official openai client. Run by the Go test
// TestOpenAINodeClient (modules/dataplane), which starts the plane in front of a scripted
// upstream and sets SVC_BASE_URL. By hand: SVC_BASE_URL=http://127.0.0.1:8081/v1 node --test
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI, { toFile } from 'openai';

const baseURL = process.env.SVC_BASE_URL;
if (!baseURL) {
  throw new Error('SVC_BASE_URL is not set (e.g. http://127.0.0.1:8081/v1)');
}
// The API key is the client's own and must never reach the upstream; retries are off so
// that 5xx answers surface at once.
const client = new OpenAI({ baseURL, apiKey: 'client-key-not-forwarded', maxRetries: 0, timeout: 30_000 });

// rejectsWith asserts that promise fails with an APIError carrying our status and code.
async function rejectsWith(promise, status, code) {
  await assert.rejects(promise, (err) => {
    assert.ok(err instanceof OpenAI.APIError, `expected an APIError, got ${err}`);
    assert.equal(err.status, status, `status of ${err.message}`);
    assert.equal(err.code, code, `code of ${err.message}`);
    assert.ok(typeof err.message === 'string' && err.message.length > 0);
    return true;
  });
}

test('models.list returns the logical ids', async () => {
  const ids = [];
  for await (const m of client.models.list()) {
    assert.equal(m.object, 'model');
    assert.equal(m.owned_by, 'svc');
    ids.push(m.id);
  }
  assert.ok(ids.includes('chat'), `ids: ${ids}`);
  const one = await client.models.retrieve('chat');
  assert.equal(one.id, 'chat');
});

test('chat completion, not streamed', async () => {
  const res = await client.chat.completions.create({
    model: 'chat',
    messages: [{ role: 'user', content: 'hello' }],
    max_tokens: 5000,
  });
  assert.equal(res.object, 'chat.completion');
  assert.equal(res.choices[0].message.content, 'echo: hello');
  assert.equal(res.choices[0].finish_reason, 'stop');
});

test('chat completion with an image part', async () => {
  const res = await client.chat.completions.create({
    model: 'chat',
    messages: [{
      role: 'user',
      content: [
        { type: 'text', text: 'what is this?' },
        { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } },
      ],
    }],
  });
  assert.equal(res.choices[0].message.content, 'echo: what is this?');
});

test('chat completion, streamed', async () => {
  const stream = await client.chat.completions.create({
    model: 'chat',
    messages: [{ role: 'user', content: 'hello stream' }],
    stream: true,
  });
  let text = '';
  let chunks = 0;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    chunks++;
    text += chunk.choices[0]?.delta?.content ?? '';
  }
  assert.equal(text, 'echo: hello stream');
  assert.ok(chunks >= 2, `chunks: ${chunks}`);
});

test('embeddings of a string and of a list', async () => {
  const one = await client.embeddings.create({ model: 'chat', input: 'abcd' });
  assert.equal(one.data.length, 1);
  assert.equal(one.data[0].embedding.length, 3);
  assert.equal(one.data[0].embedding[0], 4); // the scripted upstream embeds the length first

  const many = await client.embeddings.create({ model: 'chat', input: ['a', 'bb', 'ccc'], encoding_format: 'float' });
  assert.deepEqual(many.data.map((d) => d.embedding[0]), [1, 2, 3]);
});

test('speech returns the audio bytes', async () => {
  const res = await client.audio.speech.create({ model: 'chat', voice: 'alloy', input: 'Hello there.' });
  assert.equal(res.headers.get('content-type'), 'audio/mpeg');
  const audio = Buffer.from(await res.arrayBuffer());
  assert.equal(audio.length, 4100);
  assert.deepEqual([...audio.subarray(0, 2)], [0xff, 0xfb]);
});

test('transcription of an uploaded file', async () => {
  const file = await toFile(Buffer.alloc(3000, 7), 'speech.wav', { type: 'audio/wav' });
  const res = await client.audio.transcriptions.create({ file, model: 'chat', language: 'en' });
  assert.equal(res.text, 'heard 3000 bytes');
});

test('images come back as b64_json, from b64 and from URL upstreams', async () => {
  for (const model of ['chat', 'img-url']) {
    const res = await client.images.generate({ model, prompt: 'a red fox', n: 2, size: '256x256', steps: 4 });
    assert.equal(res.data.length, 2, model);
    for (const d of res.data) {
      const png = Buffer.from(d.b64_json, 'base64');
      assert.deepEqual([...png.subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47], model);
      assert.equal(d.url, undefined);
    }
  }
});

test('errors raise with our status and code', async () => {
  const messages = [{ role: 'user', content: 'hi' }];
  await rejectsWith(client.chat.completions.create({ model: 'not-registered', messages }), 404, 'model_not_found');
  await rejectsWith(client.chat.completions.create({ model: 'llama-server', messages, stream: true }), 404, 'model_not_found');
  await rejectsWith(client.embeddings.create({ model: 'not-registered', input: 'x' }), 404, 'model_not_found');
  await rejectsWith(client.chat.completions.create({ model: 'chat', messages, max_tokens: 'many' }), 400, 'invalid_request');
  await rejectsWith(client.chat.completions.create({ model: 'nocred', messages }), 502, 'credential_error');
  await rejectsWith(client.chat.completions.create({ model: 'down', messages }), 502, 'upstream_unreachable');
  await rejectsWith(client.audio.speech.create({ model: 'speech-empty', voice: 'alloy', input: 'Hello' }), 502, 'speech_failed');
  const file = await toFile(Buffer.alloc(10, 1), 'a.wav', { type: 'audio/wav' });
  await rejectsWith(client.audio.transcriptions.create({ file, model: 'not-registered' }), 404, 'model_not_found');
  await rejectsWith(client.images.generate({ model: 'no-v1', prompt: 'x' }), 404, 'modality_not_supported');
});
