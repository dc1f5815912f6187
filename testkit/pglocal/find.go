package pglocal

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ErrNotFound means no directory holding initdb, pg_ctl and postgres was found.
var ErrNotFound = errors.New("PostgreSQL server binaries (initdb, pg_ctl, postgres) not found")

// required are the binaries a cluster needs, all in one directory.
var required = []string{"initdb", "pg_ctl", "postgres"}

// Find returns the directory holding initdb, pg_ctl and postgres. With binDir set it only
// checks that directory. Otherwise it looks next to the initdb found on PATH (following a
// symlink to the real directory), then in /usr/lib/postgresql/*/bin and /usr/pgsql-*/bin,
// newest version first, then in /usr/local/pgsql/bin.
func Find(binDir string) (dir string, err error) {
	if binDir != "" {
		if missing := missingIn(binDir); len(missing) > 0 {
			return "", fmt.Errorf("%w: %s missing in %s", ErrNotFound, strings.Join(missing, ", "), binDir)
		}
		return binDir, nil
	}
	var candidates []string
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			candidates = append(candidates, filepath.Dir(real))
		}
		candidates = append(candidates, filepath.Dir(p))
	}
	candidates = append(candidates, newestFirst("/usr/lib/postgresql/*/bin")...)
	candidates = append(candidates, newestFirst("/usr/pgsql-*/bin")...)
	candidates = append(candidates, "/usr/local/pgsql/bin")
	for _, d := range candidates {
		if len(missingIn(d)) == 0 {
			return d, nil
		}
	}
	return "", fmt.Errorf("%w on PATH or in /usr/lib/postgresql/*/bin; install the PostgreSQL server package or set Options.BinDir", ErrNotFound)
}

// missingIn lists the required binaries that are not executable files in dir.
func missingIn(dir string) []string {
	var missing []string
	for _, b := range required {
		fi, err := os.Stat(filepath.Join(dir, b))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			missing = append(missing, b)
		}
	}
	return missing
}

// newestFirst globs pattern (ending in /bin) and sorts the matches by the version in the
// parent directory's name ("15" in /usr/lib/postgresql/15/bin, "9.6" in /usr/pgsql-9.6/bin),
// highest first.
func newestFirst(pattern string) []string {
	dirs, _ := filepath.Glob(pattern)
	key := func(d string) []int {
		name := filepath.Base(filepath.Dir(d))
		name = name[strings.LastIndex(name, "-")+1:]
		var v []int
		for _, part := range strings.Split(name, ".") {
			n, _ := strconv.Atoi(part)
			v = append(v, n)
		}
		return v
	}
	slices.SortStableFunc(dirs, func(a, b string) int { return slices.Compare(key(b), key(a)) })
	return dirs
}
