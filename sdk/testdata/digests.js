// Reads {"messages": [hex...], "prefixed": [{prefix: hex, suffix: string}]}
// on stdin; prints {"digests": [hex...], "zeroBits": [n...]}: sdk/js_test.go
// compares them with Go's crypto/sha256.
import { hex, PrefixHasher, sha256 } from '../js/sha256.js';

const fromHex = (s) => Uint8Array.from(s.match(/../g) || [], (b) => parseInt(b, 16));
let input = '';
process.stdin.on('data', (d) => { input += d; });
process.stdin.on('end', () => {
  const { messages, prefixed } = JSON.parse(input);
  const digests = messages.map((m) => hex(sha256(fromHex(m))));
  const zeroBits = prefixed.map(({ prefix, suffix }) => new PrefixHasher(fromHex(prefix)).zeroBits(suffix));
  process.stdout.write(JSON.stringify({ digests, zeroBits }));
});
