package applets

import (
	"fmt"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
)

// appletNnp is the program of Kubernetes' e2e nonewprivs image
// (test/images/nonewprivs, /usr/local/bin/nnp, set-user-ID root): it prints
// its effective uid, 0 when exec honoured the set-user-ID bit and the
// caller's when no_new_privs stopped it.
func appletNnp(p *kernel.Proc) int {
	fmt.Fprintf(p.Stdout, "Effective uid: %d\n", p.Identity().EffectiveUID())
	return 0
}
