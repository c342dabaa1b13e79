package httpapi

import (
	"bytes"
	"cmp"
	"errors"
	"io/fs"
	"os"
	"testing"
)

// contractPath is the public contract, outside the repository: beside
// the clone, as the project's machines and CI lay it, unless
// FLASHSALE_CONTRACT names another copy (a worktree elsewhere).
var contractPath = cmp.Or(os.Getenv("FLASHSALE_CONTRACT"), "../../shared/contract.md")

// additionsHeading starts the part of docs/api.md that is the project's
// own, after the contract.
const additionsHeading = "\n---\n\n# This project's additions\n"

// TestAPIDocument holds docs/api.md, the API's home in the repository, to
// the public contract: it starts with the contract, byte for byte, and
// only then adds the project's own routes and fields. So a clone carries
// the whole API, and a change of the contract that is not copied here
// fails the build. Without the contract beside the clone there is
// nothing to compare with, and the comparison is skipped.
func TestAPIDocument(t *testing.T) {
	doc, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	head, _, ok := bytes.Cut(doc, []byte(additionsHeading))
	if !ok {
		t.Fatalf("docs/api.md has no %q after the contract", additionsHeading)
	}
	contract, err := os.ReadFile(contractPath)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("no contract at %s to compare docs/api.md with", contractPath)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(head, contract) {
		i := 0
		for i < min(len(head), len(contract)) && head[i] == contract[i] {
			i++
		}
		t.Fatalf("docs/api.md does not start with the contract, verbatim: they differ from byte %d (docs/api.md: %q…; contract: %q…); copy %s over the part before %q",
			i, excerpt(head, i), excerpt(contract, i), contractPath, additionsHeading)
	}
}

func excerpt(b []byte, at int) []byte {
	return b[at:min(len(b), at+60)]
}
