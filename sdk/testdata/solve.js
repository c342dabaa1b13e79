// Solves one challenge: argv salt, difficultyBits; prints the nonce.
// sdk/js_test.go checks it with Go's crypto/sha256.
import { solve } from '../js/pow.js';

const [salt, bits] = process.argv.slice(2);
process.stdout.write(solve(salt, Number(bits)).nonce);
