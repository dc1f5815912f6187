package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// maxSecretFile bounds a file that holds a secret (its first line is the value).
const maxSecretFile = 64 << 10

// secret is a flag whose value is, or may hold, a secret: its file form (empty: none), and
// whether a value holds one (a URL may have a password or not).
type secret struct {
	file     string
	isSecret func(string) bool
}

// SecretFlag registers --NAME, a value that is or may hold a secret (isSecret tells which
// values do), and --NAME-file, a file whose first line is the value. Parse resolves them in
// this order: the command line (--NAME or --NAME-file), then the environment
// (BATCHCLAIM_NAME or BATCHCLAIM_NAME_FILE; for --database-url, DATABASE_URL after them);
// the two forms given in one place are an error. A secret given on the command line, which
// every user of the machine can read (ps, /proc/PID/cmdline), is warned about (Warnings).
func SecretFlag(fs *flag.FlagSet, name, usage string, isSecret func(string) bool) *string {
	v := fs.String(name, "", usage)
	fs.String(name+"-file", "", fmt.Sprintf("file whose first line is --%s (kept out of ps; or BATCHCLAIM_%s_FILE)", name, envSuffix(name)))
	metaOf(fs).secrets[name] = secret{file: name + "-file", isSecret: isSecret}
	return v
}

// WarnSecret marks the flag name, which has no file form, as one whose values isSecret
// tells hold a secret (a ledger URL with a password): given so on the command line, it is
// warned about (Warnings).
func WarnSecret(fs *flag.FlagSet, name string, isSecret func(string) bool) {
	metaOf(fs).secrets[name] = secret{isSecret: isSecret}
}

func envSuffix(name string) string { return strings.TrimPrefix(EnvName(name), "BATCHCLAIM_") }

// pairOf is the secret flag whose value or file form name is, if any.
func (m *meta) pairOf(name string) (string, secret, bool) {
	if s, ok := m.secrets[name]; ok {
		return name, s, true
	}
	if v, ok := strings.CutSuffix(name, "-file"); ok {
		if s, ok := m.secrets[v]; ok && s.file == name {
			return v, s, true
		}
	}
	return "", secret{}, false
}

// resolveSecrets checks each secret flag of fs once the command line and the environment
// are in (given: by name, where each value came from, "--name" or "environment VAR";
// argv: the flags of the command line): the two forms from one place are an error; the
// file form is read into the value; a secret on the command line is warned about.
func resolveSecrets(fs *flag.FlagSet, given map[string]string, argv map[string]bool) error {
	m := metaOf(fs)
	var errs []error
	for name, s := range m.secrets {
		if argv[name] && s.isSecret != nil && s.isSecret(fs.Lookup(name).Value.String()) {
			alt := "in the environment (" + EnvName(name) + ")"
			if s.file != "" {
				alt = fmt.Sprintf("with --%s FILE or %s", s.file, alt)
			}
			m.warn(fmt.Sprintf("--%s holds a secret, and a command line can be read by every user of the machine (ps): give it %s", name, alt))
		}
		if s.file == "" {
			continue
		}
		fromValue, fromFile := given[name], given[s.file]
		if fromFile == "" {
			continue
		}
		if fromValue != "" {
			errs = append(errs, fmt.Errorf("%s and %s: give one of them", fromValue, fromFile))
			continue
		}
		path := fs.Lookup(s.file).Value.String()
		v, warning, err := readSecretFile(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", fromFile, path, err))
			continue
		}
		if warning != "" {
			m.warn(fmt.Sprintf("%s %s: %s", fromFile, path, warning))
		}
		if err := fs.Set(name, v); err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", fromFile, path, err))
		}
	}
	return errors.Join(errs...)
}

// readSecretFile reads the first line of a secret's file, trimmed; warning says what the
// operator should hear about the file (every user may read it).
func readSecretFile(path string) (value, warning string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", "", unwrapPath(err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return "", "", unwrapPath(err)
	}
	if len(raw) > maxSecretFile {
		return "", "", fmt.Errorf("the file is larger than %d bytes; its first line is the value", maxSecretFile)
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	if line = strings.TrimSpace(line); line == "" {
		return "", "", errors.New("the file is empty (its first line is the value)")
	}
	if fi, err := f.Stat(); err == nil && fi.Mode().Perm()&0o004 != 0 {
		warning = fmt.Sprintf("can be read by every user of the machine (mode %#o): chmod o-r it", fi.Mode().Perm())
	}
	return line, warning, nil
}

// unwrapPath drops the path from an *os.PathError (the caller names it), keeping the cause.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}
