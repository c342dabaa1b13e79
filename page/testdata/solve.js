// Solves one challenge: argv salt, difficultyBits; prints the nonce.
// page/js_test.go checks it with Go's crypto/sha256.
import { solve } from './pow.js';

const [salt, bits] = process.argv.slice(2);
process.stdout.write(solve(salt, Number(bits)).nonce);
