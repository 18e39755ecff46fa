// HTTP helpers. The control plane is this page's origin (relative URLs); the inference
// plane's /admin/* and /v1/models are reached through the same-origin pass-through
// /ui/inference. Every failure becomes an ApiError carrying the envelope's code and message.

export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

// errorFrom reads the error envelope {"error":{"code","message","details"}} (the /v1 shape
// {"error":{"message","type","code"}} too) from a failed response.
async function errorFrom(resp) {
  let body = null;
  try {
    body = await resp.json();
  } catch {
    // not JSON: fall back to the status line
  }
  const e = body && body.error;
  if (e && typeof e === 'object') {
    return new ApiError(resp.status, e.code || e.type || `http_${resp.status}`, e.message || resp.statusText, e.details);
  }
  return new ApiError(resp.status, `http_${resp.status}`, resp.statusText || 'request failed');
}

async function send(path, init) {
  try {
    return await fetch(path, init);
  } catch (err) {
    if (err.name === 'AbortError') throw err;
    throw new ApiError(0, 'network_error', `the server could not be reached (${err.message})`);
  }
}

// api sends a JSON request and returns the decoded answer (null for 204).
export async function api(method, path, body) {
  const init = { method, headers: { Accept: 'application/json' } };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const resp = await send(path, init);
  if (!resp.ok) throw await errorFrom(resp);
  const text = await resp.text();
  return text ? JSON.parse(text) : null;
}

// upload POSTs a raw body (a File or Blob) with its own Content-Type (application/octet-stream
// when the browser knows none) and returns the decoded JSON answer.
export async function upload(path, blob) {
  const resp = await send(path, {
    method: 'POST',
    headers: { Accept: 'application/json', 'Content-Type': blob.type || 'application/octet-stream' },
    body: blob,
  });
  if (!resp.ok) throw await errorFrom(resp);
  return resp.json();
}

// inference calls the inference plane through the control plane's pass-through.
export const inference = (method, path, body) => api(method, `/ui/inference${path}`, body);

// enc percent-encodes one path segment (ids may hold '/' or ':').
export const enc = encodeURIComponent;

// query builds "?a=b&…" from the non-empty members of params.
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : '';
}

// stream POSTs body and reads the run's server-sent events with fetch and a ReadableStream
// (EventSource cannot POST), calling onEvent(event, data) per frame until `data: [DONE]`.
// It resolves to the run id from the X-Run-Id header. Aborting signal cancels the run.
export async function stream(path, body, onEvent, signal) {
  const resp = await send(path, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream' },
    body: JSON.stringify(body),
    signal,
  });
  if (!resp.ok) throw await errorFrom(resp);
  const runId = resp.headers.get('X-Run-Id');
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  let raw = ''; // a trailing '\r' waits for the next chunk: it may be half of a '\r\n'
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    raw += value;
    const cut = raw.endsWith('\r') ? raw.length - 1 : raw.length;
    buf += raw.slice(0, cut).replace(/\r\n?/g, '\n');
    raw = raw.slice(cut);
    let end;
    while ((end = buf.indexOf('\n\n')) >= 0) {
      const frame = buf.slice(0, end);
      buf = buf.slice(end + 2);
      const parsed = parseFrame(frame);
      if (!parsed) continue;
      if (parsed.data === '[DONE]') return runId;
      onEvent(parsed.event, JSON.parse(parsed.data));
    }
  }
  return runId;
}

// parseFrame reads one SSE frame; comments (": keepalive") and empty frames give null.
export function parseFrame(frame) {
  let event = 'message';
  const data = [];
  for (const line of frame.split('\n')) {
    if (!line || line.startsWith(':')) continue;
    const i = line.indexOf(':');
    const field = i < 0 ? line : line.slice(0, i);
    let val = i < 0 ? '' : line.slice(i + 1);
    if (val.startsWith(' ')) val = val.slice(1);
    if (field === 'event') event = val;
    else if (field === 'data') data.push(val);
  }
  return data.length ? { event, data: data.join('\n') } : null;
}
