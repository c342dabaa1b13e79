package faults_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/invariant"
)

// addStockLua is a second write path to the counter, as an operator's
// "add stock" tool would be written by someone who knew to log to the
// gate's audit stream but not to leave the counter to the reserve script:
// it names itself in the audit log, and moves the counter behind the
// gate's bookkeeping. The key layout is the one package redis documents.
//
//	KEYS: 1 ctr (the counter), 2 meta, 3 audit   ARGV: 1 delta, 2 source, 3 now ms
const addStockLua = `
local left = redis.call('INCRBY', KEYS[1], ARGV[1])
local seq = redis.call('HINCRBY', KEYS[2], 'seq', 1)
redis.call('HSET', KEYS[2], 'audited', left)
redis.call('XADD', KEYS[3], '*', 'op', 'adjust', 'source', ARGV[2], 'delta', ARGV[1], 'counter', left,
  'res', '', 'at', ARGV[3], 'seq', seq)
return left
`

// writer is the second writer of a drill.
const writer = "customer-service add-stock tool"

// TestSecondWriter: mid-sale, under load, something other than the
// reserve script adds 7 units to the counter in Redis: once through an
// audited back door that names itself, once as a raw INCRBY. The
// invariant watcher (every second, as in production) pauses the sale at
// its first check after the write, well within 5 s; the pause says who
// wrote, or that the write was unaudited; the audit log names the writer.
// The operator rebuilds from the record and resumes; the totals are exact.
func TestSecondWriter(t *testing.T) {
	needFaults(t)
	for _, tc := range []struct {
		fault   string
		audited bool
	}{
		{"5a second writer to the counter (audited, +7)", true},
		{"5b second writer to the counter (raw INCRBY, +7)", false},
	} {
		t.Run(strings.Fields(tc.fault)[0], func(t *testing.T) {
			r := newRig(t, rigConfig{start: true})
			const sku = "gpu"
			r.createSale(sku, stock, nil)
			ctx, cancel := context.WithTimeout(context.Background(), within)
			defer cancel()
			l := r.startLoad(ctx, sku, shoppers, workers, mixed)
			r.untilWon(l, stock/4)
			sale := r.sale(sku)
			base := r.prefix + "{" + sale.ID + "}:"

			// Watch the watcher's results from before the write.
			var mu sync.Mutex
			var seen []invariant.Result
			watching, stopWatching := context.WithCancel(ctx)
			go func() {
				for watching.Err() == nil {
					if res, ok := r.eng.Watcher.Last(sale.ID); ok {
						mu.Lock()
						if len(seen) == 0 || !seen[len(seen)-1].CheckedAt.Equal(res.CheckedAt) {
							seen = append(seen, res)
						}
						mu.Unlock()
					}
					time.Sleep(2 * time.Millisecond)
				}
			}()

			var cmd rueidis.Completed
			if tc.audited {
				cmd = r.redis.B().Eval().Script(addStockLua).Numkeys(3).Key(base+"ctr", base+"meta", base+"audit").
					Arg("7", writer, strconv.FormatInt(time.Now().UnixMilli(), 10)).Build()
			} else {
				cmd = r.redis.B().Incrby().Key(base + "ctr").Increment(7).Build()
			}
			if err := r.redis.Do(ctx, cmd).Error(); err != nil {
				t.Fatal(err)
			}
			wrote := time.Now()
			detect := r.waitUntil("the invariant paused the sale", 5*time.Second, func() bool {
				return r.saleState(sku) == flashsale.SalePaused
			})
			stopWatching()

			// By the next check: the first check that finished after the
			// write (with a margin for one that read the counter just
			// before it) failed.
			mu.Lock()
			for _, res := range seen {
				if res.CheckedAt.After(wrote.Add(20 * time.Millisecond)) {
					if res.OK {
						t.Errorf("a check at %v, after the write at %v, passed", res.CheckedAt, wrote)
					}
					break
				}
			}
			mu.Unlock()
			reason := r.sale(sku).PauseReason
			want := "unaudited writer"
			if tc.audited {
				want = writer
			}
			if !strings.Contains(reason, want) {
				t.Errorf("pause reason %q does not name %q", reason, want)
			}
			if tc.audited {
				resp := r.do("GET", "/admin/sales/"+sku+"/audit?limit=10000", nil, nil)
				var log struct {
					Entries []struct {
						Op, Source string
						Delta      int64
					}
				}
				if err := json.Unmarshal(resp.body, &log); err != nil {
					t.Fatalf("audit: %d %s", resp.status, resp.body)
				}
				named := false
				for _, e := range log.Entries {
					named = named || (e.Source == writer && e.Delta == 7)
				}
				if !named {
					t.Errorf("the audit log does not name %q", writer)
				}
			}
			// Resume is refused on a counter nobody can vouch for.
			if resp := r.do("POST", "/admin/sales/"+sku+"/resume", nil, nil); resp.code() != "rebuild_required" {
				t.Errorf("resume after the second writer: %d %s, want rebuild_required", resp.status, resp.body)
			}
			r.rebuildAndResume(sku)
			outcomes := l.wait(t, within)
			r.settle(sku)
			r.verify(sku, outcomes, row{fault: tc.fault, detect: detect})
		})
	}
}
