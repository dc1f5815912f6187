package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/cli"
)

// release is this source tree's release number: the one place it is written. A binary reports
// it with the module version and the commit its build recorded (see readVersion).
const release = "0.1.0"

// version is what an instance registers and `status` shows: the release, and the short commit
// when the build recorded one, as semver build metadata ("0.1.0+3f2a9c1d4e5f", ".dirty" when
// the work tree had changes).
var version = readVersion().short()

// versionInfo describes this binary.
type versionInfo struct {
	Release string `json:"release"`
	// Module is the main module's path (github.com/batchclaim/batchclaim/cmd/batchclaim) and
	// version: a pseudo-version naming the commit, or "(devel)" without a VCS stamp. A build is
	// always from a work tree: the go.mod replaces the library by the tree's root, so
	// `go install ...@VERSION` is refused.
	Module        string `json:"module"`
	ModuleVersion string `json:"module_version"`
	// Commit, CommitTime and Modified come from the VCS stamp of `go build` (empty without one,
	// e.g. with -buildvcs=false or outside a repository).
	Commit     string `json:"commit,omitempty"`
	CommitTime string `json:"commit_time,omitempty"`
	Modified   bool   `json:"modified,omitempty"`
	Go         string `json:"go"`
	Platform   string `json:"platform"`
}

func readVersion() versionInfo {
	v := versionInfo{Release: release, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	v.Module, v.ModuleVersion = bi.Main.Path, bi.Main.Version
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.CommitTime = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

func (v versionInfo) short() string {
	if v.Commit == "" {
		return v.Release
	}
	s := v.Release + "+" + v.Commit[:min(12, len(v.Commit))]
	if v.Modified {
		s += ".dirty"
	}
	return s
}

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("version", "[flags]",
		"Prints the release, the module version and the commit this binary was built from.", stderr)
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	v := readVersion()
	if *asJSON {
		return json.NewEncoder(stdout).Encode(v)
	}
	fmt.Fprintf(stdout, "batchclaim %s\n", v.short())
	fmt.Fprintf(stdout, "module  %s %s\n", orDash(v.Module), orDash(v.ModuleVersion))
	commit := "- (no VCS information in this build)"
	if v.Commit != "" {
		commit = v.Commit + " " + v.CommitTime
		if v.Modified {
			commit += " (modified work tree)"
		}
	}
	fmt.Fprintf(stdout, "commit  %s\n", commit)
	fmt.Fprintf(stdout, "go      %s %s\n", v.Go, v.Platform)
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
