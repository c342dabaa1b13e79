package flashsale

import "hash/fnv"

// A sale's counter may be split over several gates, its shards (Sale.Shards,
// at most 64), so that a sale ten times larger is not ten times the load on
// one Redis: each shard is an atomic gate of its own, under a hash tag of
// its own, and Redis Cluster spreads the shards over its masters.
//
// Routing. A shopper is always sent to the shard ShardOf(userID, shards),
// so the shopper's holds, buyer entry, idempotency keys and spent
// admissions all live in one shard and the per-user check stays inside
// the one atomic step that decrements. A payment instrument is claimed, in
// a second step after the win, on its own home shard,
// ShardOf(fingerprint, shards); a win whose instrument another live
// reservation has claimed is voided at once and answered limit_reached.
// The claim is a fast check in front of the record's unique index on the
// instrument's live reservation, which is what holds the limit under every
// interleaving (a claim cut off by a crash, a home shard being rebuilt).
//
// Transfers. When a shopper's shard is dry while others hold stock, units
// move: debited from one shard and credited to another, each side one
// audited script, the debit recorded as in flight until the credit is
// seen. A transfer is idempotent per id on both sides and finished (or
// given back) by whoever finds it in flight, so a process that dies
// between the two steps neither creates nor loses a unit.
//
// The invariant across shards: the shards' allotments plus the units in
// flight equal the sale's initial stock; within each shard, counter + held
// == allotment, exactly as for an unsplit gate. So
//
//	sum of shard counters + units in flight + confirmed + pending == initial.

// MaxShards is the most shards a sale's counter may be split over.
const MaxShards = 64

// ShardOf returns the shard, of shards, that owns key (a user id, or a
// payment fingerprint): FNV-1a (64 bits) of key, modulo shards. It is 0
// when shards is 1 or less. The function is part of the gate's stored
// state (a rebuild puts each hold back on its user's shard), so it never
// changes.
func ShardOf(key string, shards int) int {
	if shards <= 1 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(key))
	return int(h.Sum64() % uint64(shards))
}

// ShardState is one shard of a sale's counter as the gate sees it, read in
// one atomic step of that shard.
type ShardState struct {
	Shard int
	// Loaded is false for a shard that sells nothing until it is rebuilt
	// from the record: its counter is missing, being rebuilt, or was
	// written by a Redis master that has since failed over. It is false
	// too while the shard does not answer.
	Loaded bool
	// Unreachable: the shard's Redis did not answer (its master is down;
	// once a replica takes over, the shard reads as not loaded). It sells
	// nothing meanwhile; the other shards are not held up by it.
	Unreachable bool
	Paused      bool
	Epoch       int64
	// Allotment is the shard's share of the stock: what it was loaded or
	// rebuilt with, moved by the transfers in and out of it.
	Allotment int64
	// Counter is the units left to sell on the shard.
	Counter   int64
	Won       int64
	Restocked int64
	// AuditedCounter is the counter as the shard's audited mutations leave
	// it (see GateSnapshot.AuditedCounter).
	AuditedCounter int64
	// Sending is the units debited from this shard by transfers whose
	// credit it has not yet seen.
	Sending int64
}

// Held is the units the shard holds for live reservations.
func (s ShardState) Held() int64 { return s.Won - s.Restocked }

// Drift is Counter + Held - Allotment: zero unless the shard's counter was
// changed behind the gate.
func (s ShardState) Drift() int64 { return s.Counter + s.Held() - s.Allotment }

// Consolidation reports one pass of a sharded gate over a sale: the
// transfers it found in flight and finished, the units it moved to dry
// shards, and the shards it found lost.
type Consolidation struct {
	// Landed is units of transfers found in flight and credited now;
	// Refunded is units given back to the shard they left because the
	// other refuses them for good.
	Landed, Refunded int64
	// Waiting is units still in flight: the shard they go to is not
	// ready (lost, or being rebuilt).
	Waiting int64
	// Moved is units sent to dry shards from the shards with the most.
	Moved int64
	// Lost lists the shards that answer but sell nothing until rebuilt
	// from the record (see ShardState.Loaded), while at least one other
	// is loaded. A shard that does not answer is not listed: it may come
	// back as it was, or fail over and be lost then.
	Lost []int
}
