/*
 * web/app.js — the page's behaviour, plain JavaScript with no dependencies.
 *
 * On load: GET /languages fills the target list and the loaded models'
 * language pairs (no endpoint names the model folders; each answer's
 * "model" is shown with its timings), GET /ready the status line. While typing: DEBOUNCE_MS after the last key (at
 * once on Ctrl+Enter, the button, or a changed option) the text goes to the
 * native API, POST /v1/translate with return_ids, and the answer fills the
 * translation, the queue/encode/decode timings and each sentence's token ids.
 * A newer request aborts the one in flight, so the server drops work nobody
 * will read. Errors show the status and the server's own message, with its
 * Retry-After when it sends one (429, 503).
 */
'use strict';
(() => {
  const DEBOUNCE_MS = 300;
  const el = (id) => document.getElementById(id);
  const source = el('source'), out = el('target-out'), error = el('error');
  const status = el('status'), target = el('target'), beam = el('beam');
  let timer = 0, inflight = null, seq = 0;

  const REASONS = { 400: 'Bad request', 413: 'Text too long', 429: 'Too many requests',
                    503: 'Server busy', 504: 'Timed out' };

  // fetch + JSON; a non-2xx answer throws an Error whose message is what the
  // user should read: status, reason, the server's message, Retry-After.
  async function api(path, body, signal) {
    const init = body === undefined ? { signal }
      : { method: 'POST', headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify(body), signal };
    const r = await fetch(path, init);
    let data = null;
    try { data = await r.json(); } catch (_) { /* not JSON: described by status */ }
    if (r.ok) return data;
    const msg = (data && (data.error || data.message)) || r.statusText;
    let text = `${r.status} ${REASONS[r.status] || 'Error'}${msg ? ': ' + msg : ''}`;
    const after = r.headers.get('Retry-After');
    if (after) text += ` (retry in ${after} s)`;
    const e = new Error(text);
    e.status = r.status;
    throw e;
  }

  function showError(text) { error.textContent = text; error.hidden = false; }
  function clearError() { error.hidden = true; error.textContent = ''; }

  const ms = (v) => (typeof v === 'number' ? `${v.toFixed(1)} ms` : '–');

  function setTimings(t, roundTrip, tokens) {
    el('t-queue').textContent = ms(t && t.queue);
    el('t-encode').textContent = ms(t && t.encode);
    el('t-decode').textContent = ms(t && t.decode);
    el('t-total').textContent = ms(roundTrip);
    el('t-tokens').textContent = tokens === undefined ? '–' : String(tokens);
  }

  // One list item per sentence: source, translation, score, and its ids.
  function sentenceItem(s) {
    const li = document.createElement('li');
    const src = document.createElement('span');
    src.className = 'src';
    src.textContent = s.source;
    const tr = document.createElement('span');
    tr.lang = 'zh';
    tr.textContent = ` → ${s.translation}`;
    const ids = s.ids || [];
    const meta = document.createElement('div');
    const score = typeof s.score === 'number' ? `, score ${s.score.toFixed(3)}` : '';
    meta.textContent = `${ids.length} tokens${score}: `;
    const code = document.createElement('code');
    code.textContent = ids.join(' ');
    meta.append(code);
    li.append(src, tr, meta);
    return li;
  }

  function render(result, roundTrip) {
    const list = el('sentences');
    list.replaceChildren();
    if (!result) { out.textContent = ''; setTimings(null); el('t-model').textContent = '–'; return; }
    out.textContent = result.text;
    el('t-model').textContent = result.model || '–';
    let tokens = 0;
    for (const s of result.sentences || []) {
      tokens += (s.ids || []).length;
      list.append(sentenceItem(s));
    }
    setTimings(result.timings_ms, roundTrip, tokens);
  }

  async function translate() {
    clearTimeout(timer);
    if (inflight) inflight.abort();
    inflight = null;
    const my = ++seq;
    const text = source.value;
    if (!text.trim()) { render(null); clearError(); return; }
    const ctl = new AbortController();
    inflight = ctl;
    out.setAttribute('aria-busy', 'true');
    const t0 = performance.now();
    try {
      const body = { texts: [text], target: target.value || 'zh',
                     beam: Math.max(1, Number(beam.value) || 1),
                     return_ids: true, return_scores: true };
      const data = await api('/v1/translate', body, ctl.signal);
      if (my !== seq) return;
      render(data.translations[0], performance.now() - t0);
      clearError();
    } catch (e) {
      if (e.name === 'AbortError' || my !== seq) return;
      showError(e.message);
    } finally {
      if (my === seq) { inflight = null; out.setAttribute('aria-busy', 'false'); }
    }
  }

  function schedule() { clearTimeout(timer); timer = setTimeout(translate, DEBOUNCE_MS); }

  // Targets and models from GET /languages (LibreTranslate's shape: code,
  // name, targets), English's targets first.
  async function loadLanguages() {
    const langs = await api('/languages');
    const names = new Map(langs.map((l) => [l.code, l.name]));
    const en = langs.find((l) => l.code === 'en') || langs[0];
    target.replaceChildren(...(en ? en.targets : []).map((code) => {
      const o = document.createElement('option');
      o.value = code;
      o.textContent = names.has(code) ? `${names.get(code)} (${code})` : code;
      return o;
    }));
    const models = el('models');
    models.replaceChildren(...langs.filter((l) => l.targets.length).map((l) => {
      const li = document.createElement('li');
      li.textContent = `${l.name} → ${l.targets.map((c) => names.get(c) || c).join(', ')}`;
      return li;
    }));
  }

  async function loadStatus() {
    try {
      await api('/ready');
      status.textContent = 'ready';
      status.className = 'status ok';
    } catch (e) {
      status.textContent = `not ready — ${e.message}`;
      status.className = 'status down';
    }
  }

  source.addEventListener('input', schedule);
  source.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); translate(); }
  });
  el('form').addEventListener('submit', (e) => { e.preventDefault(); translate(); });
  target.addEventListener('change', translate);
  beam.addEventListener('change', translate);

  loadStatus();
  loadLanguages().catch((e) => showError(`Could not load the languages: ${e.message}`));
})();
