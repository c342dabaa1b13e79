// A storefront's script, run by Node against a real server (sdk/server_test.go):
// argv base, sku, jwt, then ('reserve'). It takes the place, waits for the
// turn, reserves one unit, and prints {outcome, events, reserve, admissionToken}.
import { WaitingRoom } from '../js/flashsale.js';

const [base, sku, jwt, then] = process.argv.slice(2);
const kept = new Map();
const storage = { get: (k) => kept.get(k) ?? null, set: (k, v) => kept.set(k, v), del: (k) => kept.delete(k) };
const room = new WaitingRoom({ sku, base, jwt, storage });
const events = [];
const result = { outcome: '', events, reserve: null, admissionToken: '' };
const done = (outcome) => {
  result.outcome = outcome;
  room.close();
  process.stdout.write(JSON.stringify(result));
  process.exit(0);
};
for (const type of ['position', 'scheduled', 'challenge', 'turn', 'reserved', 'soldout', 'paused', 'closed', 'unavailable', 'error', 'signin']) {
  room.addEventListener(type, (e) => events.push(type === 'error' ? `error:${e.detail.reason}:${e.detail.code}` : type));
}
room.addEventListener('turn', async (e) => {
  result.admissionToken = e.detail.admissionToken;
  if (then !== 'reserve') return done('turn');
  const a = await room.reserve(1);
  result.reserve = a;
  done(a.ok ? 'reserved' : `reserve:${a.code}`);
});
room.addEventListener('soldout', (e) => done(e.detail.final ? 'soldout:final' : 'soldout'));
room.addEventListener('closed', () => done('closed'));
room.addEventListener('error', (e) => done(`error:${e.detail.reason}:${e.detail.code}`));
room.boot();
