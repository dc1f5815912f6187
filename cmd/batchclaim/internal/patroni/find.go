package patroni

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/batchclaim/batchclaim/testkit/pglocal"
)

// ErrNotFound means a program the cluster needs is not installed.
var ErrNotFound = errors.New("patroni cluster: programs not found")

// Binaries are the programs a cluster runs.
type Binaries struct {
	Patroni, Patronictl, Etcd string
	// PGBin holds initdb, pg_ctl, postgres and pg_rewind.
	PGBin string
}

// Find looks for patroni, patronictl and etcd on PATH and for the PostgreSQL server binaries
// as package pglocal does. The error names what is missing and the Debian packages that
// bring it (patroni, etcd-server, postgresql).
func Find() (Binaries, error) {
	var b Binaries
	var missing []string
	for _, p := range []struct {
		name, pkg string
		dst       *string
	}{{"patroni", "patroni", &b.Patroni}, {"patronictl", "patroni", &b.Patronictl}, {"etcd", "etcd-server", &b.Etcd}} {
		path, err := exec.LookPath(p.name)
		if err != nil {
			missing = append(missing, fmt.Sprintf("%s (Debian package %s)", p.name, p.pkg))
			continue
		}
		*p.dst = path
	}
	dir, err := pglocal.Find("")
	if err != nil {
		missing = append(missing, "PostgreSQL server binaries (Debian package postgresql)")
	}
	b.PGBin = dir
	if len(missing) > 0 {
		return b, fmt.Errorf("%w: %s", ErrNotFound, strings.Join(missing, ", "))
	}
	return b, nil
}
