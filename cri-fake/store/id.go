package store

import (
	"fmt"
	"regexp"
)

// identifier is containerd's rule for IDs (pkg/identifiers: letters and digits, with single
// '.', '_' or '-' between them, at most 76 characters). IDs cri-fake makes are 64 hex digits; an ID
// given from outside (a fixture) must follow the rule too, because it names files: the state
// directory's record, the pod's log directory, its network namespace.
var identifier = regexp.MustCompile(`^[A-Za-z0-9]+(?:[._-][A-Za-z0-9]+)*$`)

// ValidateID checks an ID given from outside.
func ValidateID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("the ID is empty")
	case len(id) > 76:
		return fmt.Errorf("ID %q is %d characters long; at most 76 are allowed (containerd's identifier rule)", id, len(id))
	case !identifier.MatchString(id):
		return fmt.Errorf("ID %q: only letters, digits, and single '.', '_' or '-' between them are allowed (containerd's identifier rule)", id)
	}
	return nil
}
