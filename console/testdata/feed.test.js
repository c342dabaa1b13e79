// Unit tests of feed.js: the event-stream parser and the reconnection.
// Run by console/js_test.go (go test ./console).
import test from 'node:test';
import assert from 'node:assert/strict';
import { Feed, SSEParser, reconnectDelay } from './feed.js';

test('the parser reads events split anywhere', () => {
  const text = 'retry: 2000\n\n: keep-alive\n\nid: 17\nevent: sale\ndata: {"a":1}\n\nid: 18\r\nevent: sale\r\ndata: {"a":\r\ndata: 2}\r\n\r\n';
  for (let cut = 0; cut <= text.length; cut++) {
    const p = new SSEParser();
    const evs = [...p.push(text.slice(0, cut)), ...p.push(text.slice(cut))];
    assert.deepEqual(evs, [
      { id: '17', event: 'sale', data: '{"a":1}' },
      { id: '18', event: 'sale', data: '{"a":\n2}' },
    ], `cut at ${cut}`);
    assert.equal(p.retry, 2000);
    assert.equal(p.lastId, '18');
  }
});

test('an event without data is not dispatched; the id is kept', () => {
  const p = new SSEParser();
  assert.deepEqual(p.push('id: 5\n\n'), []);
  assert.equal(p.lastId, '5');
});

test('reconnections back off from the server retry to 30 s', () => {
  assert.equal(reconnectDelay(2000, 1), 2000);
  assert.equal(reconnectDelay(2000, 3), 8000);
  assert.equal(reconnectDelay(0, 1), 2000);
  assert.equal(reconnectDelay(2000, 10), 30000);
});

/** stream returns a fetch Response whose body is the chunks, then ends. */
function stream(chunks, status = 200) {
  const body = new ReadableStream({
    start(c) {
      for (const x of chunks) c.enqueue(new TextEncoder().encode(x));
      c.close();
    },
  });
  return new Response(body, { status, headers: { 'Content-Type': 'text/event-stream' } });
}

test('the feed sends the token, and resumes with Last-Event-ID after the stream ends', async () => {
  const requests = [];
  const answers = [
    stream(['retry: 10\n\nid: 1\nevent: sale\ndata: {}\n\nid: 2\nevent: sale\nda']),
    stream(['id: 3\nevent: sale\ndata: {}\n\n']),
  ];
  const events = [];
  const states = [];
  let timers = 0;
  await new Promise((resolve) => {
    const f = new Feed({
      url: '/admin/sales/x/live',
      token: () => 'tok',
      fetch: async (url, init) => { requests.push(init.headers); return answers.shift() ?? new Promise(() => {}); },
      onEvent: (ev) => { events.push(ev.id); if (ev.id === '3') { f.stop(); resolve(); } },
      onState: (s) => states.push(s),
      setTimeout: (fn) => { timers++; fn(); },
    });
    f.start();
  });
  assert.deepEqual(events, ['1', '3'], 'the half-read event 2 is dropped, not completed by the next stream');
  assert.equal(requests[0].Authorization, 'Bearer tok');
  assert.equal(requests[0]['Last-Event-ID'], undefined);
  assert.equal(requests[1]['Last-Event-ID'], '2');
  assert.equal(timers, 1);
  assert.deepEqual(states.slice(0, 4), ['connecting', 'live', 'retrying', 'retrying']);
});

test('a 401 stops the feed: asking again would not help', async () => {
  const states = [];
  let calls = 0;
  const f = new Feed({
    url: '/x', token: () => 'bad',
    fetch: async () => { calls++; return new Response('{}', { status: 401 }); },
    onEvent: () => {}, onState: (s) => states.push(s), setTimeout: (fn) => fn(),
  });
  await f.connect();
  assert.equal(calls, 1);
  assert.deepEqual(states, ['connecting', 'unauthorized']);
});
