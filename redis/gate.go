// Package redis holds the engine's implementations on Redis, above all the
// stock gate (Gate): the counter every server of a sale shares, and the
// place where overselling is prevented when more than one process serves
// it.
//
// Each operation is one Lua script (see scripts.go), so the read, the
// checks and the decrement of a reserve happen without interleaving, as
// section 6.1 of the design requires; the reserve scripts are the only
// writers that take units from the counter. Concurrent reserves of a sale
// share script calls: one call decides a batch of them, each in order and
// as if alone (see batch.go). The sale fails closed: when
// Redis does not answer, calls return an error within about a second
// (Open's timeouts) and never a verdict.
//
// The gate's keys of a sale are Prefix + "{" + saleID + "}:" + name. The
// braces are a hash tag: every key of a sale lives in one slot, so the
// scripts run unchanged on Redis Cluster. The names:
//
//	ctr     the counter, a plain integer (redis-cli GET shows it)
//	meta    hash: initial, epoch, won, restocked, audited, loaded, paused,
//	        seq (of the audit log), and rebuilding/rbold during a rebuild
//	book    hash: everything the gate keeps of the sale's shoppers, one
//	        field each, told apart by how the field starts (ids never
//	        contain "\x1f", so no field of one kind is a field of another):
//	          reservation id           → encoded hold (a live hold)
//	          "\x1fu" user id          → reservation id of its live hold
//	          "\x1fc" fingerprint      → reservation id of its live hold
//	          "\x1fk" user "\x1f" key   → encoded hold (the key's first answer)
//	          "\x1fa" admission id     → time of the win that spent it; Void
//	                                    takes the voided hold's out again
//	audit   stream of counter mutations, trimmed to about AuditMaxLen; the
//	        wins of one batch of reserves (batch.go) share an entry
//
// One hash rather than five (held, buyers, instr, idem, adm, as before
// layout 2): a batch of reserves reads the sale's shoppers in two HMGETs
// and writes its wins in one HSET, where it made up to five of each, and
// the script builds one table of writes, not five. Keys of their own per
// shopper could only be found with SCAN, so Rebuild and Drop could not
// forget them in one step.
//
// Spent admissions are kept for as long as the sale: a spend's time is
// not an expiry, and nothing prunes them. The book grows by about four
// fields a win.
//
// Upgrading from layout 1 (stock, meta, held, buyers, instr, idem, adm,
// audit). The two layouts share meta and audit, and a sale belongs to the
// one whose counter exists: layout 1's stock or this layout's ctr. Every
// script of either layout that reads or moves units requires its own
// counter, and this layout's also requires that no stock key exists, so a
// running sale's keys are never read by the other layout's code: a sale
// loaded by an older server is not loaded to a newer one (Reserve answers
// not_loaded, Restock and Void ErrNotLoaded, Snapshot reads not loaded),
// and a sale loaded by a newer server is not loaded to an older one. Load
// does nothing on either's loaded sale (meta says loaded). A Rebuild moves
// the sale to the layout of the server that runs it: this layout's
// deletes the stock key and layout 1's hashes; layout 1's deletes its own
// keys, leaving ctr behind, which this layout then ignores while stock
// exists. Either way only one counter sells, and it is the one the record
// rebuilt. So upgrade between sales; a sale running across the upgrade
// fails closed on the new servers until it is paused and rebuilt from the
// record on a new server (and then on the old servers, until they are
// gone). Drop deletes both layouts' keys.
//
// Overselling is prevented here, for the Redis gate: one Lua script does the
// sold-out, per-user and per-instrument checks, the admission's spend and
// the decrement, and it refuses a counter that another writer moved or that
// another node wrote (a failover). It could be caused here only by a restock
// given twice, which the script refuses per reservation (package restock is
// the only caller), or by a counter loaded from anything but the record.
package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/redis/rueidis"
)

// Defaults of Config and Open.
const (
	DefaultPrefix      = "fs:"
	DefaultAuditMaxLen = 100_000
	// DialTimeout and WriteTimeout bound how long Open's client waits to
	// connect and for an answer, so that a sale whose Redis is gone fails
	// closed within a second rather than hanging.
	DialTimeout  = 500 * time.Millisecond
	WriteTimeout = 500 * time.Millisecond
)

// rebuildChunk is how many holds one rebuild script writes, so that a
// rebuild of 100,000 holds never blocks Redis for long.
const rebuildChunk = 1000

// Config configures a Gate.
type Config struct {
	// Client is the Redis client; required. The gate does not close it.
	Client rueidis.Client
	// Prefix starts every key of the gate; "" means DefaultPrefix. It
	// must not contain "{" or "}", which would move the hash tag.
	Prefix string
	// Now is the clock of the audit log; nil means time.Now. Reserves
	// carry their own clock (GateReserve.Now).
	Now func() time.Time
	// AuditMaxLen is about how many entries each sale's audit stream keeps
	// (Redis trims it in whole blocks); zero means DefaultAuditMaxLen.
	AuditMaxLen int
}

// Gate is the stock gate on Redis. It implements flashsale.GateAdmin; see
// there for what each method means. It is safe for concurrent use by
// multiple goroutines, and by many processes sharing the Redis. Errors
// that mean Redis did not answer are *flashsale.Error with
// CodeUnavailable, wrapping the cause.
type Gate struct {
	client rueidis.Client
	prefix string
	now    func() time.Time
	maxLen string
	// owned is set when Open made the client, so Close closes it.
	owned bool
	// combiners holds each sale's queue of reserves (sale id →
	// *combiner); see batch.go.
	combiners sync.Map
	// beforeCall and queued, when set by a test, run before each reserve
	// script call with the reserves it decides, and after a reserve joins
	// a sale's queue.
	beforeCall func(batch []flashsale.GateReserve)
	queued     func(r flashsale.GateReserve)
	// batchAlone, when set by a test, sends a reserve that goes alone
	// through the batch script too.
	batchAlone bool
	// afterSoldOutCall, when set by a test, runs after each
	// reserveSoldOutLua call with the number of reserves it was sent and
	// whether it found units left (and so decided none).
	afterSoldOutCall func(n int, stockLeft bool)
	// afterRebuildBegin, when set by a test, runs between the start of a
	// rebuild and its first chunk.
	afterRebuildBegin func()
}

var _ flashsale.GateAdmin = (*Gate)(nil)

// New returns a gate on cfg.Client. It panics if cfg.Client is nil or
// cfg.Prefix contains a brace, which are programming errors.
func New(cfg Config) *Gate {
	if cfg.Client == nil {
		panic("redis gate: Config.Client is required")
	}
	if strings.ContainsAny(cfg.Prefix, "{}") {
		panic("redis gate: Config.Prefix must not contain braces")
	}
	g := &Gate{client: cfg.Client, prefix: cfg.Prefix, now: cfg.Now}
	if g.prefix == "" {
		g.prefix = DefaultPrefix
	}
	if g.now == nil {
		g.now = time.Now
	}
	maxLen := cfg.AuditMaxLen
	if maxLen <= 0 {
		maxLen = DefaultAuditMaxLen
	}
	g.maxLen = strconv.Itoa(maxLen)
	return g
}

// Open connects a gate to the Redis at rawURL, with keys under prefix (""
// means DefaultPrefix). The URL is redis://[user:password@]host:port[/db]
// for one server, or redis://host:port?addr=host:port&addr=host:port for a
// cluster; dial_timeout and write_timeout parameters override DialTimeout
// and WriteTimeout.
//
// With one server, Open succeeds even if the server does not answer yet:
// the process can start, and the gate fails closed call by call until
// Redis is back. Meanwhile it loads the scripts into the server within ctx,
// if it can, so the first reserve at the opening moment does not pay for
// it. A cluster must answer at Open, since the client needs its topology.
// Close the gate when done.
func Open(ctx context.Context, rawURL, prefix string) (*Gate, error) {
	if strings.ContainsAny(prefix, "{}") {
		return nil, errors.New("redis gate: the key prefix must not contain braces")
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, errors.New("redis gate: the Redis URL does not parse")
	}
	opt, err := rueidis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redis gate: %w", err)
	}
	if opt.Dialer.Timeout == 0 {
		opt.Dialer.Timeout = DialTimeout
	}
	if opt.ConnWriteTimeout == 0 {
		opt.ConnWriteTimeout = WriteTimeout
	}
	// The gate reads nothing it could cache: every read is inside a script.
	opt.DisableCache = true
	// Without addr parameters the URL names one server; forcing the single
	// client keeps rueidis from needing it up to guess its mode.
	opt.ForceSingleClient = !u.Query().Has("addr") && opt.Sentinel.MasterSet == ""
	client, err := rueidis.NewClient(opt)
	if client == nil {
		return nil, fmt.Errorf("redis gate: connect to %s: %w", u.Redacted(), err)
	}
	g := New(Config{Client: client, Prefix: prefix})
	g.owned = true
	g.warm(ctx)
	return g, nil
}

// warm loads every script into every server's script cache, stopping at the
// first failure: it only saves the first calls an EVAL.
func (g *Gate) warm(ctx context.Context) {
	for _, node := range g.client.Nodes() {
		for _, src := range scriptSources {
			if err := node.Do(ctx, node.B().ScriptLoad().Script(src).Build()).Error(); err != nil {
				return
			}
		}
	}
}

// Close closes the Redis client if Open made it; a client given to New
// stays open.
func (g *Gate) Close() {
	if g.owned {
		g.client.Close()
	}
}

// StockKey returns the key of the sale's counter: a plain integer an
// operator can read with redis-cli GET. Only the gate's scripts may write
// it; a write from anywhere else is the second writer that section 8 of
// the design warns about, and shows as Snapshot drift.
func (g *Gate) StockKey(saleID string) string { return g.key(saleID, "ctr") }

func (g *Gate) key(saleID, name string) string {
	return g.prefix + "{" + saleID + "}:" + name
}

// keys are a sale's keys. legacy is layout 1's counter, whose presence
// makes the sale layout 1's; legacyHashes are layout 1's other keys, which
// Load, Rebuild and Drop delete.
type keys struct {
	stock, meta, book, audit, legacy string
	legacyHashes                     [5]string
}

func (g *Gate) keys(saleID string) keys {
	base := g.prefix + "{" + saleID + "}:"
	return keys{
		stock:        base + "ctr",
		meta:         base + "meta",
		book:         base + "book",
		audit:        base + "audit",
		legacy:       base + "stock",
		legacyHashes: [5]string{base + "held", base + "buyers", base + "instr", base + "idem", base + "adm"},
	}
}

// reserve lists the keys of the reserve scripts.
func (k keys) reserve() []string { return []string{k.stock, k.meta, k.book, k.audit, k.legacy} }

// all lists every key of the sale, of both layouts, in the order of
// loadLua's and rebuildBeginLua's KEYS.
func (k keys) all() []string {
	return append([]string{k.stock, k.meta, k.book, k.audit, k.legacy}, k.legacyHashes[:]...)
}

// The first bytes of the book's fields other than a hold's (see the
// package comment).
const (
	fieldUser       = sep + "u"
	fieldInstrument = sep + "c"
	fieldKey        = sep + "k"
	fieldAdmission  = sep + "a"
)

// bookField returns kind + id, or "" for an empty id (no such field).
func bookField(kind, id string) string {
	if id == "" {
		return ""
	}
	return kind + id
}

// fail turns a failed call into the error the gate returns: unavailable,
// which the caller treats as "fail closed, try again". That holds for an
// error reply from Redis too: most are passing (READONLY while a replica
// is promoted, LOADING, BUSY, OOM, TRYAGAIN, CLUSTERDOWN), and the rest (a
// wrong type left by an older version, a script error) mean the gate's
// state cannot be trusted, which is what failing closed and rebuilding
// from the record are for. The reply's text stays in the error for the
// log.
func fail(op string, err error) error {
	err = fmt.Errorf("redis gate: %s: %w", op, err)
	return flashsale.Wrap(err, flashsale.CodeUnavailable, "The sale cannot take reservations right now; try again shortly.")
}

func ms(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// Reserve takes a hold if every check passes, in the order of
// flashsale.Verdict, in one script run, which may decide other reserves of
// the sale queued beside it (see batch.go). It returns an error for a
// malformed request (Quantity below 1; an empty sale id, reservation id,
// user id or idempotency key; "\x1f" in any id, key, fingerprint or hash;
// a reservation id that already holds units) and when Redis does not
// answer, in which case the caller must fail closed: the reserve may or
// may not have happened.
func (g *Gate) Reserve(ctx context.Context, r flashsale.GateReserve) (flashsale.GateOutcome, error) {
	if err := r.Validate(); err != nil {
		err = fmt.Errorf("redis gate: %w", err)
		return flashsale.GateOutcome{}, err
	}
	return g.reserve(ctx, r)
}

// outcome is one reserve's answer, from its code in a reserve script
// reply, the counter after it, and the stored hold of a key on record.
func outcome(r *flashsale.GateReserve, code, remaining, epoch int64, stored string) (flashsale.GateOutcome, error) {
	out := flashsale.GateOutcome{Remaining: remaining, Epoch: epoch}
	switch code {
	case codeDuplicateRes:
		return flashsale.GateOutcome{}, fmt.Errorf("redis gate: reservation id %q already holds units", r.ReservationID)
	case codeIdemHit:
		h, err := decodeHold(stored)
		if err != nil {
			return flashsale.GateOutcome{}, err
		}
		// Nothing was written either way: deciding here what the script
		// read atomically is the same as deciding it there.
		if h.RequestHash != r.RequestHash {
			out.Verdict = flashsale.VerdictKeyReused
			return out, nil
		}
		out.Verdict, out.Hold = flashsale.VerdictReplayed, h
		return out, nil
	case int64(flashsale.VerdictWon):
		out.Verdict, out.Hold = flashsale.VerdictWon, holdOf(r)
	case int64(flashsale.VerdictNotLoaded), int64(flashsale.VerdictPaused), int64(flashsale.VerdictStaleEpoch),
		int64(flashsale.VerdictAdmissionUsed), int64(flashsale.VerdictSoldOut), int64(flashsale.VerdictLimitReached):
		out.Verdict = flashsale.Verdict(code)
	default:
		// Not an answer the scripts give: the reserve may or may not have
		// happened, so it is an error, like a reply that never came.
		return flashsale.GateOutcome{}, fmt.Errorf("redis gate: reserve: undecided code %d", code)
	}
	return out, nil
}

// Lookup returns the hold recorded under the shopper's idempotency key.
// found is false when the key is unknown or the sale is not loaded.
func (g *Gate) Lookup(ctx context.Context, saleID, userID, key string) (flashsale.Hold, bool, error) {
	k := g.keys(saleID)
	enc, err := lookupScript.Exec(ctx, g.client, []string{k.stock, k.meta, k.book, k.legacy},
		[]string{fieldKey + idemField(userID, key)}).ToString()
	if rueidis.IsRedisNil(err) {
		return flashsale.Hold{}, false, nil
	}
	if err != nil {
		return flashsale.Hold{}, false, fail("lookup", err)
	}
	h, err := decodeHold(enc)
	if err != nil {
		return flashsale.Hold{}, false, err
	}
	return h, true, nil
}

// Restock returns the hold's units to stock once; see flashsale.Gate. It
// keeps the hold's idempotency key, so a replay still finds its first
// answer. It returns flashsale.ErrNotLoaded if the sale is not loaded
// (or is being rebuilt).
func (g *Gate) Restock(ctx context.Context, saleID, reservationID, source string) (bool, error) {
	return g.giveBack(ctx, saleID, reservationID, "restock", source, "", "")
}

// Void is Restock for a hold the record never acknowledged; in the same
// script run it also forgets the hold's idempotency key if the key still
// names this hold, and un-spends h.AdmissionID, even when the units went
// back earlier. A Void of a hold that was already voided (its units gone and
// its key forgotten) leaves the admission alone: by then the shopper may
// have spent it again on a new hold. It returns flashsale.ErrNotLoaded if
// the sale is not loaded.
func (g *Gate) Void(ctx context.Context, saleID string, h flashsale.Hold, source string) (bool, error) {
	return g.giveBack(ctx, saleID, h.ReservationID, "void", source,
		fieldKey+idemField(h.UserID, h.IdempotencyKey), bookField(fieldAdmission, h.AdmissionID))
}

// giveBack runs giveBackLua: forget and admission are the book's fields
// of the key to forget and the admission to un-spend, "" for none
// (Restock).
func (g *Gate) giveBack(ctx context.Context, saleID, reservationID, op, source, forget, admission string) (bool, error) {
	k := g.keys(saleID)
	n, err := giveBackScript.Exec(ctx, g.client,
		[]string{k.stock, k.meta, k.book, k.audit, k.legacy},
		[]string{reservationID, op, source, ms(g.now()), g.maxLen, forget, admission}).AsInt64()
	switch {
	case err != nil:
		return false, fail(op, err)
	case n < 0:
		return false, flashsale.ErrNotLoaded
	}
	return n == 1, nil
}

// Load sets up the sale's counter with initial units at epoch unless it is
// loaded or being rebuilt, and reports whether it did. A pause set before
// the load stays. A sale whose meta says loaded but whose stock key is gone,
// or whose counter was written by another Redis Cluster master than the one
// serving it now (a failover), is not reloaded: only a rebuild from the
// record can say what it holds.
func (g *Gate) Load(ctx context.Context, saleID string, initial, epoch int64, source string) (bool, error) {
	if saleID == "" || initial < 0 {
		return false, fmt.Errorf("redis gate: load %q with %d units: need a sale id and initial >= 0", saleID, initial)
	}
	k := g.keys(saleID)
	n, err := loadScript.Exec(ctx, g.client, k.all(),
		[]string{strconv.FormatInt(initial, 10), strconv.FormatInt(epoch, 10), source, ms(g.now()), g.maxLen}).AsInt64()
	if err != nil {
		return false, fail("load", err)
	}
	return n == 1, nil
}

// Rebuild replaces the sale's counter, holds, buyers, instruments,
// idempotency keys and spent admissions with what the record says (spent,
// and each hold's own AdmissionID), and leaves the sale loaded and paused.
// It checks the holds and spends first and returns an error, changing
// nothing, if they are malformed, repeat a reservation id, or take more
// than initial units.
//
// The holds and spends are written in chunks. The first step marks the sale not
// loaded (Reserve answers VerdictNotLoaded, Restock ErrNotLoaded, Load
// does nothing) and the last loads it; if the rebuild stops between them,
// the sale stays not loaded, failing closed until a rebuild completes. A
// later Rebuild or a Drop takes over from one in progress, which then
// fails.
func (g *Gate) Rebuild(ctx context.Context, saleID string, initial, epoch int64, holds []flashsale.Hold, spent []flashsale.SpentAdmission, source string) error {
	if saleID == "" {
		return errors.New("redis gate: rebuild needs a sale id")
	}
	units, err := flashsale.ValidateHolds(holds)
	if err != nil {
		return fmt.Errorf("redis gate: rebuild %s: %w", saleID, err)
	}
	if err := flashsale.ValidateSpent(spent); err != nil {
		return fmt.Errorf("redis gate: rebuild %s: %w", saleID, err)
	}
	counter := initial - units
	if counter < 0 {
		return fmt.Errorf("redis gate: rebuild %s: holds take %d units of %d", saleID, units, initial)
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	k := g.keys(saleID)
	err = rebuildBeginScript.Exec(ctx, g.client, k.all(), []string{token}).Error()
	if err != nil {
		return fail("rebuild", err)
	}
	if g.afterRebuildBegin != nil {
		g.afterRebuildBegin()
	}
	for chunk := range slices.Chunk(holds, rebuildChunk) {
		args := make([]string, 1, 1+5*len(chunk))
		args[0] = token
		for i := range chunk {
			h := &chunk[i]
			field := ""
			if h.IdempotencyKey != "" {
				field = fieldKey + idemField(h.UserID, h.IdempotencyKey)
			}
			args = append(args, h.ReservationID, fieldUser+h.UserID, bookField(fieldInstrument, h.Instrument), field, encodeHold(*h))
		}
		err := rebuildAddScript.Exec(ctx, g.client, []string{k.meta, k.book}, args).Error()
		if err != nil {
			return fail("rebuild", err)
		}
	}
	// A live hold took its turn too.
	admissions := make([]string, 0, len(holds)+len(spent))
	for i := range holds {
		if a := holds[i].AdmissionID; a != "" {
			admissions = append(admissions, fieldAdmission+a)
		}
	}
	for _, sp := range spent {
		admissions = append(admissions, fieldAdmission+sp.AdmissionID)
	}
	now := ms(g.now())
	for chunk := range slices.Chunk(admissions, rebuildChunk) {
		args := append([]string{token, now}, chunk...)
		if err := rebuildSpendScript.Exec(ctx, g.client, []string{k.meta, k.book}, args).Error(); err != nil {
			return fail("rebuild", err)
		}
	}
	err = rebuildFinishScript.Exec(ctx, g.client, []string{k.stock, k.meta, k.audit}, []string{
		token, strconv.FormatInt(initial, 10), strconv.FormatInt(epoch, 10), strconv.FormatInt(units, 10),
		strconv.FormatInt(counter, 10), source, now, g.maxLen,
	}).Error()
	if err != nil {
		return fail("rebuild", err)
	}
	return nil
}

// Snapshot reads the sale's counter and bookkeeping in one read-only
// script. A sale that is not loaded (or is being rebuilt) reads as the
// zero snapshot.
func (g *Gate) Snapshot(ctx context.Context, saleID string) (flashsale.GateSnapshot, error) {
	k := g.keys(saleID)
	vals, err := snapshotScript.Exec(ctx, g.client, []string{k.stock, k.meta, k.legacy}, nil).ToArray()
	if err != nil {
		return flashsale.GateSnapshot{}, fail("snapshot", err)
	}
	if len(vals) == 0 {
		return flashsale.GateSnapshot{}, nil
	}
	var n [7]int64
	for i := range n {
		if n[i], err = asInt(vals[i]); err != nil {
			return flashsale.GateSnapshot{}, fmt.Errorf("redis gate: snapshot of %s: %w", saleID, err)
		}
	}
	return flashsale.GateSnapshot{
		Loaded:         true,
		Counter:        n[0],
		Paused:         n[1] == 1,
		Epoch:          n[2],
		Initial:        n[3],
		Won:            n[4],
		Restocked:      n[5],
		AuditedCounter: n[6],
	}, nil
}

// Holds returns the sale's holds, ordered by reservation id. It reads the
// book in pages (HSCAN), so it does not stall Redis on a large sale, and
// is not one atomic step: a hold taken or given back meanwhile may or may
// not be listed.
func (g *Gate) Holds(ctx context.Context, saleID string) ([]flashsale.Hold, error) {
	key := g.key(saleID, "book")
	seen := make(map[string]flashsale.Hold)
	var cursor uint64
	for {
		page, err := g.client.Do(ctx, g.client.B().Hscan().Key(key).Cursor(cursor).Count(1000).Build()).AsScanEntry()
		if err != nil {
			return nil, fail("holds", err)
		}
		for i := 0; i+1 < len(page.Elements); i += 2 {
			if strings.HasPrefix(page.Elements[i], sep) {
				continue // a shopper's, card's, key's or admission's field
			}
			h, err := decodeHold(page.Elements[i+1])
			if err != nil {
				return nil, err
			}
			// HSCAN may return an element twice.
			seen[page.Elements[i]] = h
		}
		if page.Cursor == 0 {
			break
		}
		cursor = page.Cursor
	}
	out := make([]flashsale.Hold, 0, len(seen))
	for _, h := range seen {
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b flashsale.Hold) int { return strings.Compare(a.ReservationID, b.ReservationID) })
	return out, nil
}

// SetPaused makes Reserve answer VerdictPaused, or stop doing so, for every
// server sharing the gate, and audits it as "pause" or "resume". It may
// come before Load, which keeps the flag.
func (g *Gate) SetPaused(ctx context.Context, saleID string, paused bool, source string) error {
	flag, op := "0", "resume"
	if paused {
		flag, op = "1", "pause"
	}
	k := g.keys(saleID)
	err := setPausedScript.Exec(ctx, g.client, []string{k.stock, k.meta, k.audit},
		[]string{flag, op, source, ms(g.now()), g.maxLen}).Error()
	if err != nil {
		return fail(op, err)
	}
	return nil
}

// Audit returns up to limit of the sale's newest audit entries, oldest
// first. The shared entry of a batch of wins is read back as one entry per
// win, each with its own reservation id, time, delta, counter and seq.
func (g *Gate) Audit(ctx context.Context, saleID string, limit int) ([]flashsale.AuditEntry, error) {
	if limit <= 0 {
		return nil, nil
	}
	key := g.key(saleID, "audit")
	entries, err := g.client.Do(ctx, g.client.B().Xrevrange().Key(key).End("+").Start("-").Count(int64(limit)).Build()).AsXRange()
	if err != nil {
		return nil, fail("audit", err)
	}
	// XREVRANGE reads newest first; so does out until the end.
	out := make([]flashsale.AuditEntry, 0, len(entries))
	for _, e := range entries {
		f := e.FieldValues
		var nums [4]int64
		for j, name := range []string{"seq", "at", "delta", "counter"} {
			if name == "at" && strings.Contains(f["res"], sep) {
				continue // a batch's: one time per win
			}
			if nums[j], err = strconv.ParseInt(f[name], 10, 64); err != nil {
				return nil, fmt.Errorf("redis gate: audit entry %s of %s: field %s: %w", e.ID, saleID, name, err)
			}
		}
		entry := flashsale.AuditEntry{
			Seq: nums[0], At: time.UnixMilli(nums[1]).UTC(), Op: f["op"], Source: f["source"],
			Delta: nums[2], Counter: nums[3], ReservationID: f["res"],
		}
		if !strings.Contains(entry.ReservationID, sep) {
			out = append(out, entry)
			continue
		}
		wins, err := batchEntries(entry, f["at"], f["deltas"])
		if err != nil {
			return nil, fmt.Errorf("redis gate: audit entry %s of %s: %w", e.ID, saleID, err)
		}
		for i := len(wins) - 1; i >= 0; i-- {
			out = append(out, wins[i])
		}
	}
	// A batch's entry may have brought more than limit.
	out = out[:min(len(out), limit)]
	slices.Reverse(out)
	return out, nil
}

// batchEntries splits the audit entry of a batch of wins (see
// reserveBatchLua)
// into one entry per win, oldest first: each with its own reservation id,
// time, delta and seq, and the counter as that win left it.
func batchEntries(batch flashsale.AuditEntry, at, deltas string) ([]flashsale.AuditEntry, error) {
	ids, ats, ds := strings.Split(batch.ReservationID, sep), strings.Split(at, sep), strings.Split(deltas, sep)
	if len(ats) != len(ids) || len(ds) != len(ids) {
		return nil, fmt.Errorf("a batch of %d wins with %d times and %d deltas", len(ids), len(ats), len(ds))
	}
	out := make([]flashsale.AuditEntry, len(ids))
	counter := batch.Counter
	for i := len(ids) - 1; i >= 0; i-- {
		ms, err := strconv.ParseInt(ats[i], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("time of %s: %w", ids[i], err)
		}
		d, err := strconv.ParseInt(ds[i], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("delta of %s: %w", ids[i], err)
		}
		out[i] = flashsale.AuditEntry{
			Seq: batch.Seq + int64(i), At: time.UnixMilli(ms).UTC(), Op: batch.Op, Source: batch.Source,
			Delta: d, Counter: counter, ReservationID: ids[i],
		}
		counter -= d
	}
	return out, nil
}

// Drop forgets everything the gate keeps for the sale, audit log included,
// in one UNLINK (Redis frees the memory in the background).
func (g *Gate) Drop(ctx context.Context, saleID string) error {
	// A reserve still queued keeps the combiner it holds; the next
	// reserve of the sale starts a new one. Either way each script call
	// stands alone, so this only frees the memory.
	g.combiners.Delete(saleID)
	err := g.client.Do(ctx, g.client.B().Unlink().Key(g.keys(saleID).all()...).Build()).Error()
	if err != nil {
		return fail("drop", err)
	}
	return nil
}

// Ping reports whether Redis answers.
func (g *Gate) Ping(ctx context.Context) error {
	if err := g.client.Do(ctx, g.client.B().Ping().Build()).Error(); err != nil {
		return fail("ping", err)
	}
	return nil
}

// asInt reads an integer reply, or a string holding one (Lua hands strings
// read from Redis back as they are).
func asInt(m rueidis.RedisMessage) (int64, error) {
	if n, err := m.AsInt64(); err == nil {
		return n, nil
	}
	s, err := m.ToString()
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(s, 10, 64)
}
