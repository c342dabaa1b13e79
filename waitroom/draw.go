package waitroom

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"
)

// DrawAlgorithm names the published draw procedure, so a verifier knows
// what to recompute:
//
//   - each entrant is published as a pseudonym, the first 16 bytes (hex) of
//     SHA-256("flashsale/entrant/v1" 0x00 saleID 0x00 userID), so a shopper
//     can find themselves without the list exposing account ids;
//   - each pseudonym's rank is SHA-256(seed || pseudonym bytes);
//   - the admission order is the entrants sorted by rank, ascending;
//   - the seed commitment, published before the pre-queue closes, is the
//     hex SHA-256 of the seed.
//
// Neither the server nor a shopper can steer a place: the seed is fixed
// (and committed) before anyone knows who will enter, and a pseudonym is
// fixed by the account.
const DrawAlgorithm = "sha256-rank-v1"

// Pseudonym is the name under which a shopper appears in a published draw.
func Pseudonym(saleID, userID string) string {
	h := sha256.New()
	h.Write([]byte("flashsale/entrant/v1\x00"))
	h.Write([]byte(saleID))
	h.Write([]byte{0})
	h.Write([]byte(userID))
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// SeedCommitment is the hex SHA-256 of a draw's seed.
func SeedCommitment(seed []byte) string {
	sum := sha256.Sum256(seed)
	return hex.EncodeToString(sum[:])
}

type rankKey [16]byte

func rankOf(seed []byte, pseudonym string) rankKey {
	raw, err := hex.DecodeString(pseudonym)
	if err != nil {
		raw = []byte(pseudonym)
	}
	h := sha256.New()
	h.Write(seed)
	h.Write(raw)
	var k rankKey
	copy(k[:], h.Sum(nil))
	return k
}

// Order returns the entrants (pseudonyms) in drawn order. It does not
// modify entrants.
func Order(seed []byte, entrants []string) []string {
	type ranked struct {
		key rankKey
		p   string
	}
	rs := make([]ranked, len(entrants))
	for i, p := range entrants {
		rs[i] = ranked{rankOf(seed, p), p}
	}
	slices.SortFunc(rs, func(a, b ranked) int {
		if c := bytes.Compare(a.key[:], b.key[:]); c != 0 {
			return c
		}
		return bytes.Compare([]byte(a.p), []byte(b.p))
	})
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.p
	}
	return out
}

// DrawDocument is the published record of a draw: what anyone needs to
// recompute the admission order and check it against the commitment.
type DrawDocument struct {
	SKU            string    `json:"sku"`
	SaleID         string    `json:"saleId"`
	Fairness       string    `json:"fairness"`
	Algorithm      string    `json:"algorithm"`
	SeedCommitment string    `json:"seedCommitment"`
	Seed           string    `json:"seed"`
	DrawnAt        time.Time `json:"drawnAt"`
	// Winners is, for a lottery, how many of the order are selected; the
	// rest are not_selected. Zero for a random sale (everyone is placed).
	Winners int `json:"winners,omitempty"`
	// Order is every entrant's pseudonym in drawn order, place 1 first.
	// The entrants are the same pseudonyms, sorted.
	Order []string `json:"order"`
}

// EncodeDrawDocument is the document as the record keeps it: gzipped JSON.
func EncodeDrawDocument(d *DrawDocument) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := json.NewEncoder(zw).Encode(d); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// DecodeDrawDocument reads what EncodeDrawDocument wrote.
func DecodeDrawDocument(b []byte) (*DrawDocument, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("draw document: %w", err)
	}
	var d DrawDocument
	if err := json.NewDecoder(zr).Decode(&d); err != nil {
		return nil, fmt.Errorf("draw document: %w", err)
	}
	return &d, nil
}

// Verify recomputes the order from the seed and the entrants and checks
// the seed against its commitment. It returns nil if the document is
// consistent, else what is wrong. Whether an entrant is missing from the
// document only that entrant can tell: each shopper checks their own
// pseudonym is in it (flashsale verify --user).
func (d *DrawDocument) Verify() error {
	if d.Algorithm != DrawAlgorithm {
		return fmt.Errorf("unknown draw algorithm %q (this verifier knows %s)", d.Algorithm, DrawAlgorithm)
	}
	seed, err := hex.DecodeString(d.Seed)
	if err != nil || len(seed) == 0 {
		return errors.New("the seed is not revealed, or is not hex")
	}
	if got := SeedCommitment(seed); got != d.SeedCommitment {
		return fmt.Errorf("the seed does not match its commitment: SHA-256(seed) = %s, committed %s", got, d.SeedCommitment)
	}
	entrants := slices.Clone(d.Order)
	sort.Strings(entrants)
	for i := 1; i < len(entrants); i++ {
		if entrants[i] == entrants[i-1] {
			return fmt.Errorf("entrant %s holds two places", entrants[i])
		}
	}
	want := Order(seed, entrants)
	for i := range want {
		if want[i] != d.Order[i] {
			return fmt.Errorf("place %d is %s in the published order, but the seed puts %s there", i+1, d.Order[i], want[i])
		}
	}
	if d.Winners < 0 || d.Winners > len(d.Order) {
		return fmt.Errorf("%d winners out of %d entrants", d.Winners, len(d.Order))
	}
	return nil
}

// DrawIndex answers "what place did the draw give this shopper?" in
// O(log n) with no lookup: the ranks of every entrant, sorted. An edge
// builds one per drawn sale. Safe for concurrent use; immutable.
type DrawIndex struct {
	seed   []byte
	saleID string
	keys   []rankKey
}

// NewDrawIndex indexes the entrants (pseudonyms) of a sale's draw.
func NewDrawIndex(saleID string, seed []byte, entrants []string) *DrawIndex {
	keys := make([]rankKey, len(entrants))
	for i, p := range entrants {
		keys[i] = rankOf(seed, p)
	}
	slices.SortFunc(keys, func(a, b rankKey) int { return bytes.Compare(a[:], b[:]) })
	return &DrawIndex{seed: seed, saleID: saleID, keys: keys}
}

// Position returns the shopper's drawn place (from 1), or false if the
// shopper did not enter.
func (ix *DrawIndex) Position(userID string) (int64, bool) {
	k := rankOf(ix.seed, Pseudonym(ix.saleID, userID))
	i, found := slices.BinarySearchFunc(ix.keys, k, func(a, b rankKey) int { return bytes.Compare(a[:], b[:]) })
	if !found {
		return 0, false
	}
	return int64(i) + 1, true
}
