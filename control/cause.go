package control

import "strings"

// Why a sale is paused, as a small fixed set: the label of the
// flashsale_sale_paused gauge, and what an alert tells apart (a pause an
// operator made is a decision; one the engine made is an incident).
const (
	// CauseOperator: an operator paused the sale (any reason they gave).
	CauseOperator = "operator"
	// CauseGate: the engine failed the sale closed because the stock gate
	// could not be asked or lost the sale's counter or shards.
	CauseGate = "gate"
	// CauseInvariant: the invariant watcher paused the sale because
	// counter + confirmed + pending did not add up to the stock.
	CauseInvariant = "invariant"
)

// PauseCauses lists every cause PauseCause returns.
var PauseCauses = []string{CauseOperator, CauseGate, CauseInvariant}

// PauseCause returns why a sale paused with reason was paused: the
// engine's own reasons (those FailClosed is given, in this package, the
// purchase path and the invariant watcher) by their opening words, and any
// other reason as an operator's. The record keeps only the reason's text,
// so that is what every server classifies, the same way.
func PauseCause(reason string) string {
	switch {
	case strings.HasPrefix(reason, "the invariant failed"):
		return CauseInvariant
	case strings.HasPrefix(reason, "the stock gate "),
		strings.HasPrefix(reason, "lost shards of the stock gate"),
		strings.HasPrefix(reason, "shards rebuilt from the record"):
		return CauseGate
	}
	return CauseOperator
}
