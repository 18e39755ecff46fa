// Artifacts: upload a file as a blob (its type becomes the stored Content-Type) and open or
// download one by ref. The API has no list of artifacts, so the refs uploaded from this tab
// are kept in sessionStorage (gone when the tab closes).
import { h, code, table, form, section, fmtTime, fmtBytes, navigate, pageHead, action } from '../lib/dom.js';
import { upload, enc } from '../lib/api.js';

const STORE_KEY = 'svc.artifacts';
const KEEP = 50;
const REF = /^art_[0-9a-f]{32}$/;

function remembered() {
  try {
    const list = JSON.parse(sessionStorage.getItem(STORE_KEY) || '[]');
    return Array.isArray(list) ? list.filter((a) => a && REF.test(a.ref)) : [];
  } catch {
    return [];
  }
}

function remember(entry) {
  const list = [entry, ...remembered().filter((a) => a.ref !== entry.ref)].slice(0, KEEP);
  try {
    sessionStorage.setItem(STORE_KEY, JSON.stringify(list));
  } catch {
    // storage full or disabled: the upload itself succeeded, only the list is not kept
  }
}

const blobURL = (ref) => `/artifacts/${enc(ref)}`;

function refLinks(ref, name) {
  return [
    h('a', { href: blobURL(ref), target: '_blank', rel: 'noopener', class: 'button small' }, 'Open'),
    h('a', { href: blobURL(ref), download: name || ref, class: 'button small' }, 'Download'),
  ];
}

export async function render(view) {
  const list = remembered();
  view.append(
    pageHead('Artifacts'),
    h('div', { class: 'grid2' },
      section('Upload a file', form({
        fields: [{ name: 'file', label: 'File', type: 'file', hint: 'Stored with the file\'s type as its Content-Type (application/octet-stream when the browser knows none).' }],
        submit: 'Upload',
        onSubmit: async (v) => {
          if (!v.file) throw Object.assign(new Error('choose a file'), { code: 'invalid_request' });
          const a = await upload('/artifacts', v.file);
          remember({ ref: a.ref, contentType: a.contentType, bytes: a.bytes, name: v.file.name, uploadedAt: new Date().toISOString() });
          navigate('#/artifacts', `Uploaded ${v.file.name}: ${a.ref} (${a.contentType}, ${a.bytes} bytes).`);
        },
      })),
      section('Open by ref', form({
        fields: [{ name: 'ref', label: 'Ref', placeholder: 'art_…', hint: 'art_ and 32 lowercase hex characters.' }],
        submit: 'Open',
        onSubmit: async (v) => {
          if (!REF.test(v.ref)) throw Object.assign(new Error('a ref is art_ followed by 32 lowercase hex characters'), { code: 'invalid_request' });
          window.open(blobURL(v.ref), '_blank', 'noopener');
          return h('div', { class: 'info' }, 'Opened in a new tab: ', ...refLinks(v.ref));
        },
      }))),
    section('Uploaded in this browser tab',
      h('p', { class: 'muted' }, 'The API lists no artifacts: this list holds only what was uploaded from this tab (sessionStorage), and is gone when the tab closes. The artifacts themselves stay on the server.'),
      table([
        { title: 'Ref', cell: (a) => code(a.ref) },
        { title: 'File', cell: (a) => a.name || '' },
        { title: 'Content type', cell: (a) => code(a.contentType) },
        { title: 'Size', cls: 'num', cell: (a) => [fmtBytes(a.bytes), h('div', { class: 'muted' }, `${a.bytes} bytes`)] },
        { title: 'Uploaded', cell: (a) => fmtTime(a.uploadedAt) },
        { title: '', cls: 'actions', cell: (a) => refLinks(a.ref, a.name) },
      ], list, 'Nothing uploaded from this tab yet.'),
      list.length ? h('div', { class: 'button-row' }, action('Forget this list', async () => {
        sessionStorage.removeItem(STORE_KEY);
        navigate('#/artifacts', 'The list is cleared; the artifacts stay on the server.');
      }, 'small')) : ''));
}
