package flashsale

import "time"

// SaleState is the published state of a sale.
type SaleState string

// The states of a sale as the contract publishes them.
const (
	SaleScheduled SaleState = "scheduled"
	SaleOpen      SaleState = "open"
	SalePaused    SaleState = "paused"
	SaleSoldOut   SaleState = "sold_out"
	SaleClosed    SaleState = "closed"
)

// Reasons a sale is paused for its stock gate's sake rather than its own:
// the gate could not be asked, or had lost the sale (the sale failed
// closed). A gate rebuilt from the record cures them, so a restart of the
// in-process gate, which rebuilds it, reopens a sale paused for one of them
// (see control.Service.Restore); any other pause (an operator's, the
// invariant watcher's) stays, with its reason.
const (
	PauseGateUnreachable = "the stock gate is unreachable"
	PauseGateLost        = "the stock gate lost the sale's counter; rebuild it from the record, then resume"
	PauseGateNoCounter   = "the stock gate has no counter for the sale"
)

// GatePause reports whether reason is one of the PauseGate reasons.
func GatePause(reason string) bool {
	return reason == PauseGateUnreachable || reason == PauseGateLost || reason == PauseGateNoCounter
}

// Fairness is the published policy by which the waiting room orders shoppers.
type Fairness string

// The fairness policies of the contract.
const (
	FairnessFIFO    Fairness = "fifo"
	FairnessRandom  Fairness = "random"
	FairnessLottery Fairness = "lottery"
)

// Valid reports whether f is one of the published policies.
func (f Fairness) Valid() bool {
	return f == FairnessFIFO || f == FairnessRandom || f == FairnessLottery
}

// Sale is a scheduled sale of InitialStock units of one SKU. Its zero value
// is not a valid sale; see Validate.
type Sale struct {
	ID   string
	SKU  string
	Name string
	// InitialStock is the number of units the sale sells. It may change only
	// before the sale opens.
	InitialStock int
	OpensAt      time.Time
	// ClosesAt is when the sale ends; zero means it ends only when an
	// operator sets it.
	ClosesAt time.Time
	// HoldSeconds is how long a reservation holds its units before they
	// return to stock.
	HoldSeconds  int
	PerUserLimit int
	Fairness     Fairness
	// RegistrationClosesAt ends the registration window of a lottery sale.
	RegistrationClosesAt time.Time
	// AdmissionPerSecond paces the waiting room; zero admits everyone as
	// soon as the sale opens.
	AdmissionPerSecond   int
	MinAccountAgeSeconds int
	ChallengeBits        int
	// RequireInstrument refuses a reserve that carries no payment
	// instrument the server counts (the JWT's claim, or a trusted body
	// value): 403 not_eligible. Without it, such a reserve is only limited
	// per account.
	RequireInstrument bool
	// Shards is the number of gates the counter is split over.
	Shards int
	// Display is how the sale looks on the waiting-room page.
	Display Display
	// NotifiedAdmissionSeconds, when positive, sends the event
	// shopper.turn through the outbox as each shopper's turn comes, so
	// that the shop can tell a shopper who left the page, and makes the
	// admission last that long from the turn.
	NotifiedAdmissionSeconds int

	// State is the sale's state as last written to the record. The
	// published state also depends on the time and the live counter; see
	// StateAt.
	State       SaleState
	PauseReason string
	PausedAt    time.Time
	// Epoch counts rebuilds of the gate. A hold taken under an older epoch
	// is refused by the record, and admission tokens carry the epoch they
	// were issued under.
	Epoch int64
	// SeedCommitment is the hex SHA-256 of the draw's secret seed, for
	// random and lottery sales.
	SeedCommitment string
	// DrawSeed is the draw's secret seed, set when a random or lottery
	// sale is created and written with it; the record keeps it apart from
	// the sale (see DrawStore) and never returns it with the sale.
	DrawSeed  []byte
	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// NotifiedAdmission returns how long an admission lasts from a shopper's
// turn in a sale that notifies turns; zero when it does not.
func (s *Sale) NotifiedAdmission() time.Duration {
	return time.Duration(s.NotifiedAdmissionSeconds) * time.Second
}

// Hold returns how long a reservation of this sale holds its units.
func (s *Sale) Hold() time.Duration { return time.Duration(s.HoldSeconds) * time.Second }

// MinAccountAge returns the minimum age of an account allowed to reserve.
func (s *Sale) MinAccountAge() time.Duration {
	return time.Duration(s.MinAccountAgeSeconds) * time.Second
}

// StateAt returns the published state at now, not counting stock: paused
// wins over everything, then closed, then scheduled before OpensAt, else
// open. Whether an open sale is sold out is the live counter's to say.
func (s *Sale) StateAt(now time.Time) SaleState {
	switch {
	case s.State == SalePaused:
		return SalePaused
	case s.State == SaleClosed || (!s.ClosesAt.IsZero() && !now.Before(s.ClosesAt)):
		return SaleClosed
	case now.Before(s.OpensAt):
		return SaleScheduled
	default:
		return SaleOpen
	}
}

// Defaults of a new sale, from the contract.
const (
	DefaultHoldSeconds  = 600
	DefaultPerUserLimit = 1
	MaxPerUserLimit     = 100
	MaxInitialStock     = 100_000_000
	// MaxNotifiedAdmissionSeconds bounds notifiedAdmissionSeconds: a day
	// is long enough to read a message and come back.
	MaxNotifiedAdmissionSeconds = 24 * 3600
)

// ApplyDefaults fills the fields a create request may leave out.
func (s *Sale) ApplyDefaults() {
	if s.HoldSeconds == 0 {
		s.HoldSeconds = DefaultHoldSeconds
	}
	if s.PerUserLimit == 0 {
		s.PerUserLimit = DefaultPerUserLimit
	}
	if s.Fairness == "" {
		s.Fairness = FairnessFIFO
	}
	if s.Shards == 0 {
		s.Shards = 1
	}
}

// Validate reports the first reason the sale cannot be sold, as a
// CodeBadRequest *Error, or nil.
func (s *Sale) Validate() error {
	switch {
	case !ValidSKU(s.SKU):
		return Errorf(CodeBadRequest, "sku must be 1 to 128 letters, digits, '-', '_' or '.', and not . or ..")
	case !ValidText(s.Name, MaxSaleNameRunes):
		return Errorf(CodeBadRequest, "name must be printable text of at most %d characters", MaxSaleNameRunes)
	case s.InitialStock < 0 || s.InitialStock > MaxInitialStock:
		return Errorf(CodeBadRequest, "initialStock must be between 0 and %d", MaxInitialStock)
	case s.OpensAt.IsZero():
		return Errorf(CodeBadRequest, "opensAt is required")
	case !s.ClosesAt.IsZero() && !s.ClosesAt.After(s.OpensAt):
		return Errorf(CodeBadRequest, "closesAt must be after opensAt")
	case s.HoldSeconds < 1 || s.HoldSeconds > 24*3600:
		return Errorf(CodeBadRequest, "holdSeconds must be between 1 and 86400")
	case s.PerUserLimit < 1 || s.PerUserLimit > MaxPerUserLimit:
		return Errorf(CodeBadRequest, "perUserLimit must be between 1 and %d", MaxPerUserLimit)
	case !s.Fairness.Valid():
		return Errorf(CodeBadRequest, "fairness must be fifo, random or lottery")
	case s.Fairness == FairnessLottery && s.RegistrationClosesAt.IsZero():
		return Errorf(CodeBadRequest, "a lottery sale needs registrationClosesAt")
	case s.Fairness == FairnessLottery && s.RegistrationClosesAt.After(s.OpensAt):
		return Errorf(CodeBadRequest, "registrationClosesAt must not be after opensAt")
	case s.AdmissionPerSecond < 0 || s.AdmissionPerSecond > 10_000_000:
		return Errorf(CodeBadRequest, "admissionPerSecond must be between 0 and 10000000")
	case s.MinAccountAgeSeconds < 0:
		return Errorf(CodeBadRequest, "minAccountAgeSeconds must not be negative")
	case s.ChallengeBits < 0 || s.ChallengeBits > 32:
		return Errorf(CodeBadRequest, "challengeBits must be between 0 and 32")
	case s.NotifiedAdmissionSeconds < 0 || s.NotifiedAdmissionSeconds > MaxNotifiedAdmissionSeconds:
		return Errorf(CodeBadRequest, "notifiedAdmissionSeconds must be between 0 and %d", MaxNotifiedAdmissionSeconds)
	case s.Shards < 1 || s.Shards > 64:
		return Errorf(CodeBadRequest, "shards must be between 1 and 64")
	}
	return s.Display.Validate()
}

// ValidSKU reports whether s could be a sale's SKU, the one grammar of a
// SKU wherever one enters (a new sale, a path, a query): 1 to 128 letters,
// digits, '-', '_' or '.', but not "." or "..", which a path cannot carry
// as a segment (a client or proxy resolves them away). A path naming
// anything else has no sale, and is answered so without a lookup.
func ValidSKU(s string) bool {
	return s != "" && len(s) <= 128 && s != "." && s != ".." && isSKU(s)
}

func isSKU(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
		default:
			return false
		}
	}
	return true
}

// SaleTotals are the units of a sale's reservations by state, as the record
// counts them.
type SaleTotals struct {
	Pending   int64
	Confirmed int64
	Expired   int64
	Cancelled int64
	// Voided counts units of holds the record never acknowledged (the write
	// failed after the gate said yes); they went back to stock.
	Voided int64
}
