package memory

import "fmt"

func errDuplicate(reservationID string) error {
	return fmt.Errorf("memory gate: reservation id %q already holds units", reservationID)
}
