package main

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// The files under deploy/ are read here rather than run (no container engine or cluster on
// a CI machine): every YAML document parses, every command, flag and BATCHCLAIM_ variable they
// give exists, the probes hit /healthz and /readyz, and every grace period covers the stop
// budget of the timings the file sets.

const deployDir = "../../deploy/"

// flagsOf lists the flags a command's --help prints.
func flagsOf(t *testing.T, command string) map[string]bool {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := realMain(t.Context(), []string{command, "--help"}, &stdout, &stderr); code != 0 {
		t.Fatalf("%s --help: exit %d", command, code)
	}
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+-([a-z0-9-]+)`).FindAllStringSubmatch(stdout.String()+stderr.String(), -1) {
		flags[m[1]] = true
	}
	if len(flags) == 0 {
		t.Fatalf("%s --help listed no flags", command)
	}
	return flags
}

// checkInvocation checks a command line of the binary and the BATCHCLAIM_ variables given to
// it, and returns the stop budget of the timings they set.
func checkInvocation(t *testing.T, where string, args []string, env map[string]string) time.Duration {
	t.Helper()
	if len(args) == 0 {
		t.Fatalf("%s: no command", where)
	}
	cmd := args[0]
	if _, ok := commands[cmd]; !ok {
		t.Fatalf("%s: unknown command %q", where, cmd)
	}
	flags := flagsOf(t, cmd)
	for _, a := range args[1:] {
		if name, ok := strings.CutPrefix(a, "--"); ok {
			name, _, _ = strings.Cut(name, "=")
			if !flags[name] {
				t.Errorf("%s: %s has no flag --%s", where, cmd, name)
			}
		}
	}
	var cfg claims.Config
	durations := map[string]*time.Duration{"EXPIRY_1": &cfg.Expiry1, "EXPIRY_2": &cfg.Expiry2, "SUBMIT_TIMEOUT": &cfg.MaxSubmission,
		"RENEW_INTERVAL": &cfg.RenewInterval, "LOCAL_DEADLINE": &cfg.LocalDeadline, "STOP_TIME": &cfg.StopTime, "MARGIN": &cfg.Margin}
	for k, v := range env {
		name, ok := strings.CutPrefix(k, "BATCHCLAIM_")
		if !ok {
			continue
		}
		if !flags[strings.ToLower(strings.ReplaceAll(name, "_", "-"))] {
			t.Errorf("%s: %s names no flag of %s", where, k, cmd)
		}
		if d, ok := durations[name]; ok {
			var err error
			if *d, err = time.ParseDuration(v); err != nil {
				t.Errorf("%s: %s=%q: %v", where, k, v, err)
			}
		}
	}
	if cmd != "run" {
		return 0
	}
	resolved, err := cfg.Resolve()
	if err != nil {
		t.Fatalf("%s: timings: %v", where, err)
	}
	return node.StopBudget(resolved.Timings())
}

func readYAML(t *testing.T, name string) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile(deployDir + name)
	if err != nil {
		t.Fatal(err)
	}
	var docs []map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			if err.Error() == "EOF" {
				return docs
			}
			t.Fatalf("%s: %v", name, err)
		}
		docs = append(docs, doc)
	}
}

// at walks a decoded YAML tree: keys for maps, ints for lists. It fails the test on a miss.
func at(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok || m[k] == nil {
				t.Fatalf("no %q in %v", k, path)
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || len(l) <= k {
				t.Fatalf("no item %d in %v", k, path)
			}
			v = l[k]
		}
	}
	return v
}

func strs(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

func TestDeployCompose(t *testing.T) {
	t.Parallel()
	docs := readYAML(t, "compose.yaml")
	if len(docs) != 1 {
		t.Fatalf("compose.yaml: %d documents", len(docs))
	}
	services := at(t, docs[0], "services").(map[string]any)
	var instances int
	for name, s := range services {
		svc := s.(map[string]any)
		if !strings.HasPrefix(fmt.Sprint(svc["image"]), "batchclaim") {
			continue
		}
		if svc["image"] != "batchclaim:"+release {
			t.Errorf("compose %s: image %v, want the release batchclaim:%s", name, svc["image"], release)
		}
		env := map[string]string{}
		if e, ok := svc["environment"].(map[string]any); ok {
			for k, v := range e {
				env[k] = fmt.Sprint(v)
			}
		}
		budget := checkInvocation(t, "compose "+name, strs(at(t, svc, "command")), env)
		if budget == 0 {
			continue
		}
		instances++
		grace, err := time.ParseDuration(fmt.Sprint(at(t, svc, "stop_grace_period")))
		if err != nil || grace < budget {
			t.Errorf("compose %s: stop_grace_period %v (%v) under the stop budget %s", name, svc["stop_grace_period"], err, budget)
		}
		if !strings.Contains(env["DATABASE_URL"], "@postgres:5432/") || env["BATCHCLAIM_AUTH_TOKEN_FILE"] == "" {
			t.Errorf("compose %s: environment %v lacks the database or the token file", name, env)
		}
		if !strings.HasPrefix(env["DATABASE_URL"], "postgres://batchclaim_app@") {
			t.Errorf("compose %s: the instance does not run as the DML-only role: %s", name, env["DATABASE_URL"])
		}
	}
	// Least privilege: the schema owner migrates; the roles are created on the first start.
	migrateEnv := at(t, services["migrate"], "environment").(map[string]any)
	if url := fmt.Sprint(migrateEnv["DATABASE_URL"]); !strings.HasPrefix(url, "postgres://batchclaim_owner@") {
		t.Errorf("compose migrate does not run as the schema owner: %s", url)
	}
	volumes := fmt.Sprint(at(t, services["postgres"], "volumes"))
	for _, f := range []string{"./roles.sql:/docker-entrypoint-initdb.d/", "./role-passwords.sh:/docker-entrypoint-initdb.d/"} {
		if !strings.Contains(volumes, f) {
			t.Errorf("compose postgres does not mount %s", f)
		}
	}
	if instances != 3 {
		t.Errorf("compose.yaml runs %d instances, want 3", instances)
	}
	for _, want := range []string{"postgres", "migrate", "dlt-sim"} {
		if services[want] == nil {
			t.Errorf("compose.yaml lacks the %s service", want)
		}
	}
}

// The Patroni stack: etcd, three members with a PgBouncer each, and two instances whose
// commands, flags and variables exist, reaching the PgBouncers through a multi-host URL that
// finds the leader and prepares nothing by name; the migration goes to the members directly.
func TestDeployComposePatroni(t *testing.T) {
	t.Parallel()
	docs := readYAML(t, "compose-patroni.yaml")
	if len(docs) != 1 {
		t.Fatalf("compose-patroni.yaml: %d documents", len(docs))
	}
	services := at(t, docs[0], "services").(map[string]any)
	for _, want := range []string{"etcd", "patroni1", "patroni2", "patroni3", "pgbouncer1", "pgbouncer2", "pgbouncer3", "migrate", "dlt-sim"} {
		if services[want] == nil {
			t.Errorf("compose-patroni.yaml lacks the %s service", want)
		}
	}
	instances := 0
	for name, s := range services {
		svc := s.(map[string]any)
		if svc["image"] != "batchclaim:"+release {
			continue
		}
		env := map[string]string{}
		if e, ok := svc["environment"].(map[string]any); ok {
			for k, v := range e {
				env[k] = fmt.Sprint(v)
			}
		}
		budget := checkInvocation(t, "compose-patroni "+name, strs(at(t, svc, "command")), env)
		url := env["DATABASE_URL"]
		if name == "migrate" && !strings.Contains(url, ":5432,") {
			t.Errorf("compose-patroni migrate: %s does not go to the members directly", url)
		}
		if budget == 0 {
			continue
		}
		instances++
		for _, want := range []string{":6432,", "target_session_attrs=read-write", "default_query_exec_mode=exec"} {
			if !strings.Contains(url, want) {
				t.Errorf("compose-patroni %s: DATABASE_URL %s lacks %s", name, url, want)
			}
		}
		if !multiHost(url) {
			t.Errorf("compose-patroni %s: %s is not multi-host, so --require-sync-standby would be off", name, url)
		}
	}
	if instances != 2 {
		t.Errorf("compose-patroni.yaml runs %d instances, want 2", instances)
	}
	raw, err := os.ReadFile(deployDir + "patroni/patroni.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"synchronous_mode: true", "use_pg_rewind: true", "ttl: 10", "loop_wait: 1"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("patroni/patroni.yml lacks %q", want)
		}
	}
}

func TestDeployKubernetes(t *testing.T) {
	t.Parallel()
	docs := readYAML(t, "k8s/deployment.yaml")
	var dep map[string]any
	for _, d := range docs {
		if d["kind"] == "Deployment" {
			dep = d
		}
	}
	if dep == nil {
		t.Fatal("k8s/deployment.yaml holds no Deployment")
	}
	pod := at(t, dep, "spec", "template", "spec")
	if at(t, pod, "securityContext", "runAsNonRoot") != true {
		t.Error("the pod does not require a non-root user")
	}
	c := at(t, pod, "containers", 0)
	for _, img := range []any{at(t, c, "image"), at(t, pod, "initContainers", 0, "image")} {
		if img != "batchclaim:"+release {
			t.Errorf("k8s image %v, want the release batchclaim:%s", img, release)
		}
	}
	env := map[string]string{}
	for _, e := range at(t, c, "env").([]any) {
		m := e.(map[string]any)
		env[fmt.Sprint(m["name"])] = fmt.Sprint(m["value"])
	}
	budget := checkInvocation(t, "k8s container", strs(at(t, c, "args")), env)
	checkInvocation(t, "k8s init container", strs(at(t, pod, "initContainers", 0, "args")), nil)
	grace := at(t, pod, "terminationGracePeriodSeconds").(int)
	if float64(grace) < math.Ceil(budget.Seconds()) {
		t.Errorf("terminationGracePeriodSeconds %d under the stop budget %s", grace, budget)
	}
	// The instance runs as the DML-only role, the init container as the schema owner.
	initEnv := at(t, pod, "initContainers", 0, "env").([]any)
	keys := map[string]string{}
	for _, e := range append(initEnv, at(t, c, "env").([]any)...) {
		m := e.(map[string]any)
		if ref, ok := m["valueFrom"].(map[string]any); ok && m["name"] == "DATABASE_URL" {
			keys[fmt.Sprint(len(keys))] = fmt.Sprint(at(t, ref, "secretKeyRef", "key"))
		}
	}
	if keys["0"] != "migrate-database-url" || keys["1"] != "database-url" {
		t.Errorf("database URLs from the Secret's keys %v, want migrate-database-url for the init container, database-url for the instance", keys)
	}
	// The container's memory limit covers the soft limit run sets from its flags.
	var cfg node.Config
	for name, dst := range map[string]*int64{"BATCHCLAIM_MAX_INGEST_MEMORY": &cfg.MaxIngestMemory, "BATCHCLAIM_MAX_BODY": &cfg.MaxBody} {
		if v, ok := env[name]; ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("%s=%q: %v", name, v, err)
			}
			*dst = n
		}
	}
	conns, err := strconv.Atoi(env["BATCHCLAIM_DB_MAX_CONNS"])
	if err != nil {
		t.Fatalf("k8s container: BATCHCLAIM_DB_MAX_CONNS=%q: the pool (and the memory bound) must not follow the node's CPUs", env["BATCHCLAIM_DB_MAX_CONNS"])
	}
	limit := fmt.Sprint(at(t, c, "resources", "limits", "memory"))
	if bound := cfg.MemoryBound(int32(conns)); bound+bound/4 > binaryQuantity(t, limit) {
		t.Errorf("memory limit %s under the soft limit %d MiB run sets from its flags", limit, (bound+bound/4)>>20)
	}
	for probe, path := range map[string]string{"livenessProbe": "/healthz", "readinessProbe": "/readyz", "startupProbe": "/healthz"} {
		if got := at(t, c, probe, "httpGet", "path"); got != path {
			t.Errorf("%s path %v, want %s", probe, got, path)
		}
	}
}

func TestDeploySystemdUnit(t *testing.T) {
	t.Parallel()
	f, err := os.Open(deployDir + "batchclaim.service")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	keys := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			keys[k] = v
		}
	}
	exec := strings.Fields(keys["ExecStart"])
	if len(exec) < 2 || !strings.HasSuffix(exec[0], "/batchclaim") {
		t.Fatalf("ExecStart %q", keys["ExecStart"])
	}
	budget := checkInvocation(t, "systemd unit", exec[1:], nil)
	stop, err := strconv.Atoi(keys["TimeoutStopSec"])
	if err != nil || float64(stop) < math.Ceil(budget.Seconds()) {
		t.Errorf("TimeoutStopSec %q under the stop budget %s", keys["TimeoutStopSec"], budget)
	}
	if keys["User"] == "" || keys["User"] == "root" || !strings.Contains(keys["ExecReload"], "-HUP") {
		t.Errorf("User %q, ExecReload %q: want a non-root user and SIGHUP on reload", keys["User"], keys["ExecReload"])
	}
}

func TestDeployDockerfile(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(deployDir + "Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var from, users []string
	for line := range strings.Lines(string(raw)) {
		f := strings.Fields(line)
		if len(f) > 1 && f[0] == "FROM" {
			from = append(from, f[1])
		}
		if len(f) > 1 && f[0] == "USER" {
			users = append(users, f[1])
		}
	}
	if len(from) < 2 {
		t.Errorf("FROM %v: want a build stage and a final stage", from)
	}
	if len(users) == 0 || slices.ContainsFunc(users, func(u string) bool { return u == "root" || strings.HasPrefix(u, "0") }) {
		t.Errorf("USER %v: want a non-root user in the final stage", users)
	}
	if !strings.Contains(string(raw), "CGO_ENABLED=0") {
		t.Error("the build is not static (CGO_ENABLED=0)")
	}
	// The program is its own module: its go.mod must be in the image before the download, and
	// the build must run in it (the root's module does not contain the package).
	for _, want := range []string{"COPY cmd/batchclaim/go.mod cmd/batchclaim/go.sum", "go -C cmd/batchclaim build -tags nodocker"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("the Dockerfile lacks %q", want)
		}
	}
}

// The image's build tag leaves testcontainers-go and the Docker client out of the daemon:
// none of their packages is in the program's dependencies with it, and the default build
// (make build, whose demo and bench may start a container) still has them.
func TestNoDockerBuildLeavesTheDockerClientOut(t *testing.T) {
	t.Parallel()
	gotool := testutil.GoTool(t)
	docker := func(tags ...string) []string {
		args := append([]string{"list", "-deps"}, tags...)
		out, err := exec.CommandContext(t.Context(), gotool, append(args, ".")...).Output()
		if err != nil {
			t.Fatalf("go %s: %v", strings.Join(args, " "), err)
		}
		var found []string
		for p := range strings.Lines(string(out)) {
			if strings.Contains(p, "testcontainers") || strings.HasPrefix(p, "github.com/docker/") {
				found = append(found, strings.TrimSpace(p))
			}
		}
		return found
	}
	if got := docker("-tags", "nodocker"); len(got) > 0 {
		t.Errorf("with -tags nodocker the program still depends on %v", got)
	}
	if got := docker(); len(got) == 0 {
		t.Error("the default build depends on no testcontainers or Docker package: is the check still looking at the right names?")
	}
}

// binaryQuantity reads a Kubernetes quantity with a binary suffix (Ki, Mi, Gi).
func binaryQuantity(t *testing.T, q string) int64 {
	t.Helper()
	for suffix, shift := range map[string]uint{"Ki": 10, "Mi": 20, "Gi": 30} {
		if n, ok := strings.CutSuffix(q, suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				t.Fatalf("quantity %q: %v", q, err)
			}
			return v << shift
		}
	}
	t.Fatalf("quantity %q: want Ki, Mi or Gi", q)
	return 0
}
