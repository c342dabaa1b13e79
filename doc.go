// Package flashsale holds the domain of a flash-sale engine: the sale, the
// reservation (a hold on stock), the order, the stock gate and the record,
// and the error codes every layer speaks.
//
// The engine is a funnel. Each layer rejects about ten times more requests,
// more cheaply, than the one below it:
//
//	edge waiting room (package waitroom, signed tokens from package token)
//	  → paced queue with an honest position
//	  → eligibility and bot checks (package purchase)
//	  → the stock gate: one atomic step (packages memory and redis), where
//	    overselling is prevented
//	  → the record: its rules in package record, over PostgreSQL or
//	    SQLite (packages postgres and sqlite), which sees only the winners.
//
// Units return to stock in one place, package restock, where overselling
// could be caused: the record decides that a hold is over, exactly once,
// and only then does the gate give its units back; expiries (package
// sweeper), cancels, voids, cancelled and refunded orders all go through
// it. The invariant counter + confirmed + pending == initial is checked
// continuously and may pause a sale by itself (package invariant).
//
// The packages are layered, and only downwards. At the bottom, the gates
// (memory, redis), the record's rules (record) and the outside-facing
// pieces (token, identity, challenge, bulkhead) know only the types and
// interfaces declared here, never one another: a gate cannot reach the
// record, nor the record the gate. The engines (sqlite, postgres) build
// on record. The services above (restock, purchase, sweeper, control,
// invariant, waitroom, catalog, outbox) take the gate and the record as
// the Gate and Store interfaces of this package, and a few of them one
// another where one stands on the other (purchase, sweeper and control
// give units back through restock). httpapi is the HTTP face of those
// services and so imports them; engine assembles everything into a
// server, and cmd/flashsale is the command around it.
//
// Where overselling is prevented: in the stock gate's one atomic step
// (packages memory and redis). Where it could be caused: where units are
// given back (package restock), and by a counter rebuilt other than from the
// record (package control's rebuild). The invariant (package invariant)
// catches either within a second.
package flashsale
