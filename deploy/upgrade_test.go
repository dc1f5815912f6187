package deploy_test

import (
	"fmt"
	"io/fs"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/batchclaim/batchclaim/migrations"
)

// firstRollingVersion is the schema of the first release (v0.1.0). Every later migration must
// be safe while the previous release's instances run (docs/compatibility.md, "Rolling
// upgrades"): the init container of deploy/k8s migrates while old pods still work.
const firstRollingVersion = 10

// rollingMarker, on the line before a statement, accepts it with the reason it is safe
// anyway (e.g. dropping a column no binary of the previous release reads).
const rollingMarker = "-- rolling-upgrade:"

// unsafeUnderOldBinaries are statements that can break the previous release's binary on the
// new schema: they remove or rename what it reads or writes, or add a rule its writes may
// break.
var unsafeUnderOldBinaries = []struct {
	re  *regexp.Regexp
	why string
}{
	{regexp.MustCompile(`(?is)\bDROP\s+(TABLE|COLUMN|FUNCTION|TRIGGER|SEQUENCE|TYPE|INDEX|VIEW|SCHEMA)\b`), "drops what the previous release may use"},
	{regexp.MustCompile(`(?is)\bRENAME\b`), "renames what the previous release uses"},
	{regexp.MustCompile(`(?is)\bSET\s+(NOT\s+NULL|SCHEMA)\b`), "adds a rule or moves a table the previous release's writes do not know"},
	{regexp.MustCompile(`(?is)\bALTER\s+COLUMN\s+\S+\s+(SET\s+DATA\s+)?TYPE\b`), "changes a column's type"},
	{regexp.MustCompile(`(?is)\bADD\s+(CONSTRAINT\b|CHECK\b|UNIQUE\b|PRIMARY\s+KEY\b|FOREIGN\s+KEY\b)`), "adds a constraint the previous release's writes may break"},
	{regexp.MustCompile(`(?is)\bCREATE\s+UNIQUE\s+INDEX\b`), "adds a uniqueness the previous release's writes may break"},
	{regexp.MustCompile(`(?is)\bADD\s+COLUMN\s+(IF\s+NOT\s+EXISTS\s+)?\S+\s+[^,;]*\bNOT\s+NULL\b`), "adds a NOT NULL column"},
}

// rollingUnsafe returns why each statement of sql is unsafe under the previous release's
// binaries, unless marked.
func rollingUnsafe(sql string) []string {
	var out []string
	var stmt strings.Builder
	marked := false
	for _, line := range strings.Split(sql, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, rollingMarker) {
			marked = true
			continue
		}
		if strings.HasPrefix(trimmed, "--") {
			continue
		}
		stmt.WriteString(line + "\n")
		if !strings.HasSuffix(trimmed, ";") {
			continue
		}
		s := stmt.String()
		stmt.Reset()
		if marked {
			marked = false
			continue
		}
		for _, u := range unsafeUnderOldBinaries {
			if !u.re.MatchString(s) {
				continue
			}
			// A column added NOT NULL with a default, or generated, is filled for old writers.
			if strings.Contains(u.why, "NOT NULL column") && regexp.MustCompile(`(?i)\b(DEFAULT|GENERATED)\b`).MatchString(s) {
				continue
			}
			out = append(out, fmt.Sprintf("%s: %s", strings.Join(strings.Fields(s), " "), u.why))
		}
	}
	return out
}

// Migrations after the first release's schema only add, so that a rolling upgrade (migrate,
// then replace instances one at a time) never runs an old binary on a schema it cannot use.
func TestMigrationsSafeForRollingUpgrades(t *testing.T) {
	t.Parallel()
	files, err := fs.Glob(migrations.FS(), "*.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		v, err := strconv.Atoi(strings.SplitN(name, "_", 2)[0])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if v <= firstRollingVersion {
			continue
		}
		b, err := fs.ReadFile(migrations.FS(), name)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range rollingUnsafe(string(b)) {
			t.Errorf("%s: %s; make it additive (docs/compatibility.md, \"Rolling upgrades\"), or mark it with %q and the reason it is safe", name, p, rollingMarker)
		}
	}

	// The check itself.
	for _, tt := range []struct {
		sql    string
		unsafe bool
	}{
		{"CREATE TABLE jobs (id bigint PRIMARY KEY, note text NOT NULL);", false},
		{"ALTER TABLE batchclaim.batches ADD COLUMN run_at timestamptz;", false},
		{"ALTER TABLE batchclaim.batches ADD COLUMN max_attempts integer NOT NULL DEFAULT 25;", false},
		{"CREATE INDEX CONCURRENTLY IF NOT EXISTS batches_run_at_idx ON batchclaim.batches (run_at);", false},
		{"ALTER TABLE batchclaim.batches DROP COLUMN payload;", true},
		{"DROP TABLE batchclaim.service_halts;", true},
		{"ALTER TABLE batchclaim.batches RENAME COLUMN state TO status;", true},
		{"ALTER TABLE batchclaim.batches ALTER COLUMN run_at SET NOT NULL;", true},
		{"ALTER TABLE batchclaim.batches ADD COLUMN kind text NOT NULL;", true},
		{"ALTER TABLE batchclaim.batches SET SCHEMA batchclaim;", true},
		{"ALTER TABLE batchclaim.batches ADD CONSTRAINT positive CHECK (attempts >= 0);", true},
		{"CREATE UNIQUE INDEX one_per_key ON batchclaim.batches (service_id) WHERE unfinished;", true},
		{"ALTER TABLE batchclaim.batches\n    ALTER COLUMN attempts TYPE bigint;", true},
		{"-- rolling-upgrade: v0.2.0 stopped reading it\nALTER TABLE batchclaim.batches DROP COLUMN unknown_count;", false},
	} {
		if got := len(rollingUnsafe(tt.sql)) > 0; got != tt.unsafe {
			t.Errorf("%q: unsafe %v, want %v", tt.sql, got, tt.unsafe)
		}
	}
}
