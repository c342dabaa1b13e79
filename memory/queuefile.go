package memory

import (
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
)

// queueFormat names the layout Save writes; LoadQueue refuses any other.
const queueFormat = "flashsale memory queue v1"

// queueFile is a saved Queue.
type queueFile struct {
	Format string
	Bases  [2]uint64
	Sales  []saleFile
}

// saleFile is one sale's saved queue.
type saleFile struct {
	ID                        string
	Next, Admitted            int64
	Sealed                    bool
	Entrants, Counters, Spent map[string]int64
	Suspects                  map[string]string
	// Places holds each place as four numbers: the user key's two halves,
	// the position and the arrival (Unix ms).
	Places []uint64
	// Awaiting and Invited are the shoppers waiting to be told of their
	// turn (absent from files of older versions, which had none).
	Awaiting map[int64]string
	Invited  []string
}

// Save writes the queue (every sale's places, the hash bases that find
// them, entrants, admitted-up-to, counters, spent salts and suspects) to
// w, for LoadQueue in the process that comes next: the in-process queue
// otherwise dies with the process, and with it every shopper's place. It
// reads each sale under its locks, so it is safe beside any other call,
// but a call that lands meanwhile may be missed: save when nothing is
// served any more (engine.Close does).
func (q *Queue) Save(w io.Writer) error {
	f := queueFile{Format: queueFormat, Bases: q.bases}
	q.sales.Range(func(k, v any) bool {
		sq := v.(*saleQueue)
		sf := saleFile{ID: k.(string)}
		sq.mu.Lock()
		sf.Next, sf.Admitted, sf.Sealed = sq.next.Load(), sq.admitted.Load(), sq.sealed.Load()
		sf.Entrants, sf.Counters, sf.Spent = maps.Clone(sq.entrants), maps.Clone(sq.counters), maps.Clone(sq.spent)
		sf.Suspects = maps.Clone(sq.suspects)
		sf.Awaiting, sf.Invited = maps.Clone(sq.awaiting), slices.Clone(sq.invited)
		// Sized first: two million places are 64 MB, which growing by
		// appends would copy and double on the way.
		n := 0
		for i := range sq.shards {
			sh := &sq.shards[i]
			sh.mu.Lock()
			n += sh.places.len()
			sh.mu.Unlock()
		}
		sf.Places = make([]uint64, 0, 4*n)
		for i := range sq.shards {
			sh := &sq.shards[i]
			sh.mu.Lock()
			sh.places.each(func(k userKey, p place) {
				sf.Places = append(sf.Places, k[0], k[1], uint64(p.pos), uint64(p.arrival))
			})
			sh.mu.Unlock()
		}
		sq.mu.Unlock()
		f.Sales = append(f.Sales, sf)
		return true
	})
	if err := gob.NewEncoder(w).Encode(&f); err != nil {
		return fmt.Errorf("memory queue: save: %w", err)
	}
	return nil
}

// ErrQueueFormat: what LoadQueue was given is not a queue Save wrote.
var ErrQueueFormat = errors.New("memory queue: not a saved queue of this version")

// LoadQueue returns the queue Save wrote to r: every shopper keeps its
// place (asking again returns it), places go on from where they were, and
// nothing admitted is taken back. It returns ErrQueueFormat, or the
// decoder's error, for anything else.
func LoadQueue(r io.Reader) (*Queue, error) {
	var f queueFile
	if err := gob.NewDecoder(r).Decode(&f); err != nil {
		return nil, fmt.Errorf("memory queue: load: %w", err)
	}
	if f.Format != queueFormat {
		return nil, ErrQueueFormat
	}
	q := &Queue{bases: f.Bases}
	for _, sf := range f.Sales {
		if len(sf.Places)%4 != 0 {
			return nil, fmt.Errorf("%w: sale %s has a torn place", ErrQueueFormat, sf.ID)
		}
		sq := newSaleQueue()
		sq.next.Store(sf.Next)
		sq.admitted.Store(sf.Admitted)
		sq.sealed.Store(sf.Sealed)
		// gob leaves an empty map nil.
		for dst, src := range map[*map[string]int64]map[string]int64{
			&sq.entrants: sf.Entrants, &sq.counters: sf.Counters, &sq.spent: sf.Spent} {
			if src != nil {
				*dst = src
			}
		}
		if sf.Suspects != nil {
			sq.suspects = sf.Suspects
		}
		if sf.Awaiting != nil {
			sq.awaiting = sf.Awaiting
		}
		for _, u := range sf.Invited {
			sq.invitedSet[u] = struct{}{}
		}
		sq.invited = sf.Invited
		for i := 0; i < len(sf.Places); i += 4 {
			k := userKey{sf.Places[i], sf.Places[i+1]}
			places := &sq.shards[k[0]%queueShards].places
			if _, dup := places.get(k); !dup {
				places.put(k, place{pos: int64(sf.Places[i+2]), arrival: int64(sf.Places[i+3])})
			}
		}
		q.sales.Store(sf.ID, sq)
	}
	return q, nil
}
