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
// Subpackages do not know about one another; they meet in terms of the types
// declared here, and cmd/flashsale wires them together.
package flashsale
