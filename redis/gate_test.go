package redis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/gatetest"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/redis/rueidis"
)

// newGate returns a gate on the test Redis, under a key prefix of t's own.
func newGate(t testing.TB, now func() time.Time) *Gate {
	client, prefix := testenv.Redis(t)
	return New(Config{Client: client, Prefix: prefix, Now: now})
}

func TestGate(t *testing.T) {
	gatetest.Exercise(t, gatetest.Harness{
		New: func(t *testing.T, now func() time.Time) flashsale.GateAdmin {
			return newGate(t, now)
		},
		// A raw INCRBY on the stock key: the second writer of section 8.
		Tamper: func(t *testing.T, g flashsale.GateAdmin, saleID string, delta int64) {
			rg := g.(*Gate)
			err := rg.client.Do(t.Context(), rg.client.B().Incrby().Key(rg.StockKey(saleID)).Increment(delta).Build()).Error()
			if err != nil {
				t.Fatalf("INCRBY: %v", err)
			}
		},
	})
}

// fixture is a loaded sale on the test Redis.
type fixture struct {
	t    *testing.T
	ctx  context.Context
	g    *Gate
	sale string
	n    int
}

func newFixture(t *testing.T, initial int64) *fixture {
	f := &fixture{t: t, ctx: t.Context(), g: newGate(t, nil), sale: flashsale.NewID("sale_")}
	if initial >= 0 {
		if ok, err := f.g.Load(f.ctx, f.sale, initial, 1, "test"); !ok || err != nil {
			t.Fatalf("Load = %v, %v", ok, err)
		}
	}
	return f
}

func (f *fixture) req(user string) flashsale.GateReserve {
	f.n++
	now := time.Now()
	return flashsale.GateReserve{
		SaleID: f.sale, ReservationID: fmt.Sprintf("res-%d", f.n), UserID: user, Quantity: 1,
		AdmissionID: fmt.Sprintf("adm-%d", f.n), Epoch: 1,
		IdempotencyKey: fmt.Sprintf("key-%d", f.n), RequestHash: "h", Now: now,
	}
}

func (f *fixture) expect(r flashsale.GateReserve, want flashsale.Verdict) flashsale.GateOutcome {
	f.t.Helper()
	out, err := f.g.Reserve(f.ctx, r)
	if err != nil {
		f.t.Fatalf("Reserve: %v", err)
	}
	if out.Verdict != want {
		f.t.Fatalf("Reserve = %v; want %v", out.Verdict, want)
	}
	return out
}

func (f *fixture) do(cmd rueidis.Completed) rueidis.RedisResult {
	return f.g.client.Do(f.ctx, cmd)
}

// saleKeys lists the keys under the gate's prefix.
func (f *fixture) saleKeys() []string {
	f.t.Helper()
	var out []string
	var cursor uint64
	for {
		page, err := f.do(f.g.client.B().Scan().Cursor(cursor).Match(f.g.prefix + "*").Count(1000).Build()).AsScanEntry()
		if err != nil {
			f.t.Fatal(err)
		}
		out = append(out, page.Elements...)
		if page.Cursor == 0 {
			break
		}
		cursor = page.Cursor
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// dump returns every key of the gate with its serialized value (DUMP).
func (f *fixture) dump() map[string]string {
	f.t.Helper()
	out := make(map[string]string)
	for _, k := range f.saleKeys() {
		out[k] = dumpKey(f.ctx, f.t, f.g.client, k)
	}
	return out
}

// dumpKey returns what k holds: a hash's fields and values, sorted, and any
// other key as DUMP serialises it ("" for a missing key). Not DUMP for a
// hash: a hash table's DUMP lists its fields in the order of its buckets,
// which a read moves while the table grows (Redis rehashes a step at each
// lookup), so reads that change nothing could look like writes.
func dumpKey(ctx context.Context, t testing.TB, c rueidis.Client, k string) string {
	t.Helper()
	typ, err := c.Do(ctx, c.B().Type().Key(k).Build()).ToString()
	if err != nil {
		t.Fatalf("TYPE %s: %v", k, err)
	}
	if typ == "hash" {
		m, err := c.Do(ctx, c.B().Hgetall().Key(k).Build()).AsStrMap()
		if err != nil {
			t.Fatalf("HGETALL %s: %v", k, err)
		}
		fields := slices.Sorted(maps.Keys(m))
		var b strings.Builder
		b.WriteString("hash")
		for _, f := range fields {
			fmt.Fprintf(&b, "\x00%q=%q", f, m[f])
		}
		return b.String()
	}
	v, err := c.Do(ctx, c.B().Dump().Key(k).Build()).ToString()
	if err != nil && !rueidis.IsRedisNil(err) {
		t.Fatalf("DUMP %s: %v", k, err)
	}
	return v
}

// unchanged fails the test unless the sale's keys hold what before (a
// dump) held: what names what changed them.
func (f *fixture) unchanged(what string, before map[string]string) {
	f.t.Helper()
	after := f.dump()
	if len(after) != len(before) {
		f.t.Fatalf("%s changed the keys: %d, were %d", what, len(after), len(before))
	}
	for k, v := range before {
		if after[k] != v {
			f.t.Fatalf("%s changed %s", what, k)
		}
	}
}

func TestNoScriptRecovery(t *testing.T) {
	f := newFixture(t, 10)
	won := f.expect(f.req("u1"), flashsale.VerdictWon)
	// A restarted or failed-over Redis has an empty script cache.
	if err := f.do(f.g.client.B().ScriptFlush().Build()).Error(); err != nil {
		t.Fatalf("SCRIPT FLUSH: %v", err)
	}
	f.expect(f.req("u2"), flashsale.VerdictWon)
	f.do(f.g.client.B().ScriptFlush().Build())
	if s, err := f.g.Snapshot(f.ctx, f.sale); err != nil || s.Counter != 8 {
		t.Fatalf("read-only script after SCRIPT FLUSH: %+v, %v", s, err)
	}
	f.do(f.g.client.B().ScriptFlush().Build())
	if ok, err := f.g.Restock(f.ctx, f.sale, won.Hold.ReservationID, "test"); !ok || err != nil {
		t.Fatalf("Restock after SCRIPT FLUSH = %v, %v", ok, err)
	}
}

// crc16 is CRC-16/XMODEM, the checksum Redis Cluster maps keys to slots
// with.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// keySlot is Redis Cluster's slot of a key, hash tags included.
func keySlot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return crc16(key) % 16384
}

func TestKeySlot(t *testing.T) {
	// Vectors from the Redis Cluster specification.
	if got := crc16("123456789"); got != 0x31c3 {
		t.Fatalf("crc16 = %#x; want 0x31c3", got)
	}
	if keySlot("{user1000}.following") != keySlot("{user1000}.followers") || keySlot("foo{}{bar}") != crc16("foo{}{bar}")%16384 {
		t.Fatal("keySlot does not follow the hash tag rules")
	}
}

func TestKeysShareOneSlot(t *testing.T) {
	f := newFixture(t, 10)
	r := f.req("u1")
	r.Instrument = "card-1"
	won := f.expect(r, flashsale.VerdictWon)
	f.g.SetPaused(f.ctx, f.sale, true, "test")
	f.g.SetPaused(f.ctx, f.sale, false, "test")
	f.g.Restock(f.ctx, f.sale, won.Hold.ReservationID, "test")
	r2 := f.req("u2")
	r2.Instrument = "card-2"
	f.expect(r2, flashsale.VerdictWon)

	keys := f.saleKeys()
	var names []string
	slot := keySlot(f.g.StockKey(f.sale))
	// Where the server can say (Redis Cluster), ask it too.
	serverSlot, clusterErr := f.do(f.g.client.B().ClusterKeyslot().Key(f.g.StockKey(f.sale)).Build()).AsInt64()
	if clusterErr == nil && uint16(serverSlot) != slot {
		t.Fatalf("CLUSTER KEYSLOT = %d; computed %d", serverSlot, slot)
	}
	tag := "{" + f.sale + "}:"
	for _, k := range keys {
		if !strings.HasPrefix(k, f.g.prefix+tag) {
			t.Fatalf("key %q does not start with the prefix and the tag %q", k, tag)
		}
		if s := keySlot(k); s != slot {
			t.Fatalf("key %q is in slot %d; the stock key is in %d", k, s, slot)
		}
		names = append(names, strings.TrimPrefix(k, f.g.prefix+tag))
	}
	want := []string{"audit", "book", "ctr", "meta"}
	if !slices.Equal(names, want) {
		t.Fatalf("a sale's keys are %v; want %v", names, want)
	}
	// The stock key is a plain integer an operator can read.
	if v, err := f.do(f.g.client.B().Get().Key(f.g.StockKey(f.sale)).Build()).ToString(); err != nil || v != "9" {
		t.Fatalf("GET stock = %q, %v; want \"9\"", v, err)
	}
	if err := f.g.Drop(f.ctx, f.sale); err != nil {
		t.Fatal(err)
	}
	if left := f.saleKeys(); len(left) != 0 {
		t.Fatalf("keys left after Drop: %v", left)
	}
}

func TestRawWriteShowsAsDrift(t *testing.T) {
	f := newFixture(t, 10)
	f.expect(f.req("u1"), flashsale.VerdictWon)
	if err := f.do(f.g.client.B().Incrby().Key(f.g.StockKey(f.sale)).Increment(5).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	s, err := f.g.Snapshot(f.ctx, f.sale)
	if err != nil {
		t.Fatal(err)
	}
	if s.Drift() != 5 || s.Counter != 14 || s.AuditedCounter != 9 {
		t.Fatalf("after a raw INCRBY 5: %+v (drift %d); want counter 14, audited 9, drift 5", s, s.Drift())
	}
	a, _ := f.g.Audit(f.ctx, f.sale, 10)
	if last := a[len(a)-1]; last.Op != "reserve" || last.Counter != 9 {
		t.Fatalf("the raw write reached the audit log: %+v", last)
	}
}

func TestFailsClosedFast(t *testing.T) {
	ctx := t.Context()
	began := time.Now()
	// Nothing listens on port 1.
	g, err := Open(ctx, "redis://127.0.0.1:1/0", "")
	if err != nil {
		t.Fatalf("Open of a server that is down: %v; want a gate that fails closed", err)
	}
	defer g.Close()
	opened := time.Since(began)
	r := flashsale.GateReserve{
		SaleID: "sale_x", ReservationID: "res-1", UserID: "u1", Quantity: 1,
		Epoch: 1, IdempotencyKey: "k", RequestHash: "h", Now: time.Now(),
	}
	began = time.Now()
	out, err := g.Reserve(ctx, r)
	took := time.Since(began)
	if err == nil {
		t.Fatalf("Reserve with Redis down = %v, nil; want an error", out.Verdict)
	}
	if code := flashsale.ErrorCode(err); code != flashsale.CodeUnavailable {
		t.Fatalf("error code %q (%v); want %q", code, err, flashsale.CodeUnavailable)
	}
	if took > 500*time.Millisecond || opened > 2*time.Second {
		t.Fatalf("failing closed took %v (Open %v); want well under a second", took, opened)
	}
	if err := g.Ping(ctx); err == nil {
		t.Fatal("Ping with Redis down = nil")
	}
}

func TestOpen(t *testing.T) {
	newGate(t, nil) // skips, or fails under CI, when the test Redis is missing
	ctx := t.Context()
	g, err := Open(ctx, testenv.RedisURL(), "fstest:"+testenv.Suffix()+":")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	sale := flashsale.NewID("sale_")
	t.Cleanup(func() { g.Drop(context.Background(), sale) })
	if ok, err := g.Load(ctx, sale, 1, 1, "test"); !ok || err != nil {
		t.Fatalf("Load = %v, %v", ok, err)
	}
	for _, bad := range []string{"http://127.0.0.1:6379", "redis://127.0.0.1:6379/x", "redis://127.0.0.1:1?addr=127.0.0.1:2"} {
		if g, err := Open(ctx, bad, ""); err == nil {
			g.Close()
			t.Errorf("Open(%q) = nil error", bad)
		}
	}
	if _, err := Open(ctx, testenv.RedisURL(), "bad{prefix}"); err == nil {
		t.Error("Open with braces in the prefix = nil error")
	}
}

func TestSoldOutWritesNothingInRedis(t *testing.T) {
	f := newFixture(t, 1)
	f.expect(f.req("u1"), flashsale.VerdictWon)
	before := f.dump()
	for i := range 200 {
		r := f.req(fmt.Sprintf("loser-%d", i))
		r.Instrument = fmt.Sprintf("card-%d", i)
		f.expect(r, flashsale.VerdictSoldOut)
	}
	f.unchanged("sold-out rejections", before)
}

func TestRebuildFailsClosedWhileRunning(t *testing.T) {
	f := newFixture(t, 10)
	won := f.expect(f.req("u1"), flashsale.VerdictWon)
	var during []string
	f.g.afterRebuildBegin = func() {
		if out, err := f.g.Reserve(f.ctx, f.req("u2")); err != nil || out.Verdict != flashsale.VerdictNotLoaded {
			during = append(during, fmt.Sprintf("Reserve = %v, %v", out.Verdict, err))
		}
		if _, err := f.g.Restock(f.ctx, f.sale, won.Hold.ReservationID, "test"); !errors.Is(err, flashsale.ErrNotLoaded) {
			during = append(during, fmt.Sprintf("Restock = %v", err))
		}
		if ok, err := f.g.Load(f.ctx, f.sale, 10, 2, "test"); ok || err != nil {
			during = append(during, fmt.Sprintf("Load = %v, %v", ok, err))
		}
		if s, err := f.g.Snapshot(f.ctx, f.sale); s.Loaded || err != nil {
			during = append(during, fmt.Sprintf("Snapshot = %+v, %v", s, err))
		}
	}
	holds := make([]flashsale.Hold, 2500) // three chunks
	for i := range holds {
		holds[i] = flashsale.Hold{ReservationID: fmt.Sprintf("r%d", i), UserID: fmt.Sprintf("u%d", i), Quantity: 1, IdempotencyKey: "k"}
	}
	if err := f.g.Rebuild(f.ctx, f.sale, 3000, 2, holds, nil, "test"); err != nil {
		t.Fatal(err)
	}
	if len(during) > 0 {
		t.Fatalf("while the rebuild ran: %s", strings.Join(during, "; "))
	}
	s, _ := f.g.Snapshot(f.ctx, f.sale)
	if !s.Loaded || !s.Paused || s.Counter != 500 || s.Won != 2500 || s.Epoch != 2 {
		t.Fatalf("after rebuild: %+v", s)
	}
}

func TestRebuildTakenOver(t *testing.T) {
	f := newFixture(t, 10)
	f.g.afterRebuildBegin = func() {
		if err := f.g.Drop(f.ctx, f.sale); err != nil {
			t.Error(err)
		}
	}
	holds := []flashsale.Hold{{ReservationID: "r1", UserID: "u1", Quantity: 1}}
	if err := f.g.Rebuild(f.ctx, f.sale, 10, 2, holds, nil, "test"); err == nil {
		t.Fatal("a rebuild whose sale was dropped midway = nil error")
	}
	f.expect(f.req("u1"), flashsale.VerdictNotLoaded)
	if s, _ := f.g.Snapshot(f.ctx, f.sale); s.Loaded {
		t.Fatalf("a half-done rebuild left the sale loaded: %+v", s)
	}
}

func TestLostStockKeyStaysClosed(t *testing.T) {
	f := newFixture(t, 10)
	r := f.req("u1")
	f.expect(r, flashsale.VerdictWon)
	f.do(f.g.client.B().Del().Key(f.g.StockKey(f.sale)).Build())
	f.expect(f.req("u2"), flashsale.VerdictNotLoaded)
	// Reloading would sell the held unit again; only a rebuild may bring
	// the sale back.
	if ok, err := f.g.Load(f.ctx, f.sale, 10, 1, "test"); ok || err != nil {
		t.Fatalf("Load over a lost counter = %v, %v; want false, nil", ok, err)
	}
	f.expect(f.req("u2"), flashsale.VerdictNotLoaded)
	held := flashsale.Hold{ReservationID: r.ReservationID, UserID: r.UserID, Quantity: 1, IdempotencyKey: r.IdempotencyKey, RequestHash: r.RequestHash, CreatedAt: r.Now}
	if err := f.g.Rebuild(f.ctx, f.sale, 10, 2, []flashsale.Hold{held}, nil, "test"); err != nil {
		t.Fatal(err)
	}
	if s, _ := f.g.Snapshot(f.ctx, f.sale); s.Counter != 9 || s.Drift() != 0 {
		t.Fatalf("after rebuild: %+v", s)
	}
}

func TestAuditStreamIsTrimmed(t *testing.T) {
	client, prefix := testenv.Redis(t)
	g := New(Config{Client: client, Prefix: prefix, AuditMaxLen: 10})
	ctx := t.Context()
	g.Load(ctx, "s", 1000, 1, "test")
	now := time.Now()
	for i := range 600 {
		r := flashsale.GateReserve{SaleID: "s", ReservationID: fmt.Sprint("r", i), UserID: fmt.Sprint("u", i), Quantity: 1, Epoch: 1, IdempotencyKey: "k", Now: now}
		if out, err := g.Reserve(ctx, r); err != nil || out.Verdict != flashsale.VerdictWon {
			t.Fatalf("reserve %d: %v, %v", i, out.Verdict, err)
		}
	}
	n, err := client.Do(ctx, client.B().Xlen().Key(g.key("s", "audit")).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	// MAXLEN ~ trims whole stream nodes (100 entries by default).
	if n >= 300 {
		t.Fatalf("audit stream holds %d entries; want it trimmed near 10", n)
	}
	a, _ := g.Audit(ctx, "s", 3)
	if len(a) != 3 || a[2].ReservationID != "r599" || a[2].Seq != 601 || a[0].Seq != 599 {
		t.Fatalf("newest entries: %+v", a)
	}
}

func TestHoldEncoding(t *testing.T) {
	for _, h := range []flashsale.Hold{
		{ReservationID: "r", UserID: "u", Quantity: 3, Instrument: "fp", IdempotencyKey: "k", RequestHash: "h", AdmissionID: "adm", CreatedAt: time.Unix(1_900_000_000, 123456789)},
		{ReservationID: "r", UserID: "u", Quantity: 1},
	} {
		got, err := decodeHold(encodeHold(h))
		if err != nil || got.ReservationID != h.ReservationID || got.UserID != h.UserID || got.Quantity != h.Quantity || got.Instrument != h.Instrument ||
			got.IdempotencyKey != h.IdempotencyKey || got.RequestHash != h.RequestHash || got.AdmissionID != h.AdmissionID || !got.CreatedAt.Equal(h.CreatedAt) {
			t.Fatalf("round trip of %+v = %+v, %v", h, got, err)
		}
	}
	for _, bad := range []string{
		"r\x1fu",
		// A hold as stored before holds carried their admission.
		"r\x1fu\x1f1\x1f\x1fk\x1fh\x1f1900000000000000000",
		"r\x1fu\x1f1\x1f\x1fk\x1fh\x1fadm\x1f1900000000000000000\x1fextra",
	} {
		if _, err := decodeHold(bad); err == nil {
			t.Fatalf("decodeHold(%q) = nil error; want the field count refused", bad)
		}
	}
}

// TestLayoutOneSaleFailsClosed: a sale that a server of layout 1 (keys
// stock, held, buyers, instr, idem, adm) loaded or rebuilt is not loaded
// to this layout, so its keys are never misread: every reserve script
// (one, batch, sold out) answers not loaded, Restock, Void, Snapshot and
// Lookup see no sale, Load does nothing, and none of them writes. A
// rebuild moves the sale to this layout, deleting layout 1's keys; and a
// later rebuild by a layout 1 server (its stock key back beside ctr) takes
// it out of this layout's hands again.
func TestLayoutOneSaleFailsClosed(t *testing.T) {
	f := newFixture(t, -1)
	old := func(name string) string { return f.g.key(f.sale, name) }
	hold := flashsale.Hold{ReservationID: "r1", UserID: "u1", Quantity: 3, IdempotencyKey: "k1", RequestHash: "h",
		AdmissionID: "a1", CreatedAt: time.UnixMilli(1_900_000_000_000)}
	// A sale of 10 as layout 1 keeps it, 3 units held.
	layoutOne := func(counter string) {
		t.Helper()
		for _, cmd := range []rueidis.Completed{
			f.g.client.B().Set().Key(old("stock")).Value(counter).Build(),
			f.g.client.B().Hset().Key(old("meta")).FieldValue().FieldValue("loaded", "1").FieldValue("paused", "0").
				FieldValue("epoch", "1").FieldValue("initial", "10").FieldValue("won", "3").FieldValue("restocked", "0").
				FieldValue("audited", counter).Build(),
			f.g.client.B().Hset().Key(old("held")).FieldValue().FieldValue("r1", encodeHold(hold)).Build(),
			f.g.client.B().Hset().Key(old("buyers")).FieldValue().FieldValue("u1", "r1").Build(),
			f.g.client.B().Hset().Key(old("idem")).FieldValue().FieldValue(idemField("u1", "k1"), encodeHold(hold)).Build(),
			f.g.client.B().Hset().Key(old("adm")).FieldValue().FieldValue("a1", "1900000000000").Build(),
		} {
			if err := f.do(cmd).Error(); err != nil {
				t.Fatal(err)
			}
		}
	}
	notLoaded := func(when string) {
		t.Helper()
		before := f.dump()
		for _, tc := range []struct {
			name           string
			batch, soldOut bool
		}{{"one", false, false}, {"batch", true, false}, {"sold out", true, true}} {
			f.g.batchAlone = tc.batch
			f.g.combiner(f.sale).soldOut.Store(tc.soldOut)
			if out, err := f.g.Reserve(f.ctx, f.req("u2")); err != nil || out.Verdict != flashsale.VerdictNotLoaded {
				t.Fatalf("%s: Reserve (%s) = %v, %v; want not loaded", when, tc.name, out.Verdict, err)
			}
			r := f.req("u1")
			r.IdempotencyKey, r.AdmissionID = "k1", "a1"
			if out, err := f.g.Reserve(f.ctx, r); err != nil || out.Verdict != flashsale.VerdictNotLoaded {
				t.Fatalf("%s: a replay (%s) = %v, %v; want not loaded", when, tc.name, out.Verdict, err)
			}
		}
		f.g.batchAlone = false
		f.g.combiner(f.sale).soldOut.Store(false)
		if _, err := f.g.Restock(f.ctx, f.sale, "r1", "test"); !errors.Is(err, flashsale.ErrNotLoaded) {
			t.Fatalf("%s: Restock = %v; want ErrNotLoaded", when, err)
		}
		if _, err := f.g.Void(f.ctx, f.sale, hold, "test"); !errors.Is(err, flashsale.ErrNotLoaded) {
			t.Fatalf("%s: Void = %v; want ErrNotLoaded", when, err)
		}
		if s := f.snapshot(); s.Loaded {
			t.Fatalf("%s: snapshot %+v; want not loaded", when, s)
		}
		if _, found, err := f.g.Lookup(f.ctx, f.sale, "u1", "k1"); found || err != nil {
			t.Fatalf("%s: Lookup = %v, %v; want not found", when, found, err)
		}
		if ok, err := f.g.Load(f.ctx, f.sale, 10, 1, "test"); ok || err != nil {
			t.Fatalf("%s: Load = %v, %v; want nothing done", when, ok, err)
		}
		f.unchanged(when, before)
	}
	layoutOne("7") // 7 left: 3 held, and counter + won != initial is not this test's
	notLoaded("a sale of layout 1")

	if err := f.g.Rebuild(f.ctx, f.sale, 10, 2, []flashsale.Hold{hold}, nil, "test"); err != nil {
		t.Fatalf("Rebuild: %v", err)
	}
	for _, name := range []string{"stock", "held", "buyers", "instr", "idem", "adm"} {
		if n, err := f.do(f.g.client.B().Exists().Key(old(name)).Build()).AsInt64(); n != 0 || err != nil {
			t.Fatalf("layout 1's %s after the rebuild: %d, %v; want it deleted", name, n, err)
		}
	}
	if a, err := f.g.Audit(f.ctx, f.sale, 1); err != nil || len(a) != 1 || a[0].Op != "rebuild" || a[0].Delta != 0 || a[0].Counter != 7 {
		t.Fatalf("the rebuild's audit entry %+v, %v; want 7 to 7, from layout 1's counter", a, err)
	}
	if err := f.g.SetPaused(f.ctx, f.sale, false, "test"); err != nil {
		t.Fatal(err)
	}
	r := f.req("u1")
	r.Epoch = 2
	f.expect(r, flashsale.VerdictLimitReached) // the rebuilt hold is u1's
	r = f.req("u2")
	r.Epoch, r.AdmissionID = 2, "a1"
	f.expect(r, flashsale.VerdictAdmissionUsed) // and its turn is spent
	r = f.req("u2")
	r.Epoch = 2
	f.expect(r, flashsale.VerdictWon)
	if h, found, err := f.g.Lookup(f.ctx, f.sale, "u1", "k1"); !found || err != nil || h.ReservationID != "r1" {
		t.Fatalf("Lookup of the rebuilt key = %+v, %v, %v", h, found, err)
	}

	// A server of layout 1 rebuilds the sale back: its stock key beside
	// this layout's counter, which must sell nothing from now on.
	layoutOne("7")
	notLoaded("a sale rebuilt back to layout 1")
}

// TestCounterNotMarkedLoadedSellsNothing: a counter whose meta does not
// say loaded (the code never leaves one, a rebuild deletes the counter as
// it clears the flag, but an operator's hand or another version could)
// sells nothing: each reserve script (one, batch, sold out) answers not
// loaded, so that the sale fails closed, and writes nothing.
func TestCounterNotMarkedLoadedSellsNothing(t *testing.T) {
	for _, tc := range []struct {
		name           string
		units          int64
		batch, soldOut bool
	}{{"one", 5, false, false}, {"batch", 5, true, false}, {"sold out", 1, true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.units)
			f.g.batchAlone = tc.batch
			if tc.soldOut {
				f.expect(f.req("u1"), flashsale.VerdictWon) // the counter at zero
				f.g.combiner(f.sale).soldOut.Store(true)
			}
			meta := f.g.keys(f.sale).meta
			if err := f.do(f.g.client.B().Hset().Key(meta).FieldValue().FieldValue("loaded", "0").Build()).Error(); err != nil {
				t.Fatal(err)
			}
			soldOutCalls := 0
			f.g.afterSoldOutCall = func(int, bool) { soldOutCalls++ }
			before := f.dump()
			out, err := f.g.Reserve(f.ctx, f.req("u2"))
			if err != nil || out.Verdict != flashsale.VerdictNotLoaded {
				t.Fatalf("Reserve = %v, %v; want not loaded", out.Verdict, err)
			}
			if tc.soldOut != (soldOutCalls == 1) {
				t.Fatalf("%d calls of the sold-out script", soldOutCalls)
			}
			f.unchanged("the reserve", before)
		})
	}
}
