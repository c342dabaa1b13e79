package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flashsale/flashsale"
)

// SQLSTATE codes that mean the server could not take the statement at all:
// it is shutting down, crashed, starting up, or out of connections.
// Class 08 (connection exception) is matched by its prefix.
var outageCodes = map[string]bool{
	"57P01": true, // admin_shutdown
	"57P02": true, // crash_shutdown
	"57P03": true, // cannot_connect_now: starting up, recovering
	"53300": true, // too_many_connections
}

// unavailable marks err as the record not answering, with
// flashsale.CodeUnavailable, when it is one: a connection refused, cut or
// timed out, or the server refusing every statement while it shuts down,
// recovers or is out of connections. Clients are then told 503 and to
// repeat the request, and the purchase path treats it like any failed
// write, rather than answering 500 as for a bug. Errors the server
// answered (a constraint, bad SQL) and the domain's own errors pass as
// they are. The cause stays in the chain, for errors.Is and the log.
func unavailable(err error) error {
	if err == nil || !outage(err) {
		return err
	}
	var fe *flashsale.Error
	if errors.As(err, &fe) {
		return err
	}
	return flashsale.Wrap(err, flashsale.CodeUnavailable, "The record did not answer; repeat the request shortly.")
}

func outage(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return strings.HasPrefix(pgErr.Code, "08") || outageCodes[pgErr.Code]
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connErr) || errors.As(err, &netErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, context.Canceled) || pgconn.Timeout(err) || pgconn.SafeToRetry(err)
}
