package token

// The verifier decodes base64url itself, from the string it was given and
// into the pooled buffer: encoding/base64 wants a []byte source, and
// converting the token would allocate on every poll.

const b64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// b64Index maps a byte to its base64url value, or to 0xff if it is not one
// of the alphabet.
var b64Index = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i := 0; i < len(b64Alphabet); i++ {
		t[b64Alphabet[i]] = byte(i)
	}
	return t
}()

// decodeB64 decodes unpadded base64url s into dst and returns the number of
// bytes written. It is strict, as base64.RawURLEncoding.Strict() is: a
// character outside the alphabet, padding, a length that leaves a single
// character, or non-zero unused bits in the last character make it fail, so
// each byte string has exactly one encoding that decodes. It fails, writing
// nothing beyond dst, if dst is too short.
func decodeB64(dst []byte, s string) (int, bool) {
	rem := len(s) % 4
	if rem == 1 {
		return 0, false
	}
	n := len(s) / 4 * 3
	if rem > 0 {
		n += rem - 1
	}
	if n > len(dst) {
		return 0, false
	}
	di, i := 0, 0
	for ; len(s)-i >= 4; i += 4 {
		q := s[i : i+4]
		a, b, c, d := b64Index[q[0]], b64Index[q[1]], b64Index[q[2]], b64Index[q[3]]
		if (a|b|c|d)&0xc0 != 0 {
			return 0, false
		}
		v := uint32(a)<<18 | uint32(b)<<12 | uint32(c)<<6 | uint32(d)
		o := dst[di : di+3]
		o[0], o[1], o[2] = byte(v>>16), byte(v>>8), byte(v)
		di += 3
	}
	switch rem {
	case 2:
		a, b := b64Index[s[i]], b64Index[s[i+1]]
		if (a|b)&0xc0 != 0 || b&0x0f != 0 {
			return 0, false
		}
		dst[di] = a<<2 | b>>4
	case 3:
		a, b, c := b64Index[s[i]], b64Index[s[i+1]], b64Index[s[i+2]]
		if (a|b|c)&0xc0 != 0 || c&0x03 != 0 {
			return 0, false
		}
		v := uint32(a)<<12 | uint32(b)<<6 | uint32(c)
		dst[di], dst[di+1] = byte(v>>10), byte(v>>2)
	}
	return n, true
}
