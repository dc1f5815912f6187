package deploy_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// k8sDocs reads the documents of deploy/k8s/deployment.yaml, by kind.
func k8sDocs(t *testing.T) map[string]map[string]any {
	t.Helper()
	b, err := os.ReadFile("k8s/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]map[string]any{}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var d map[string]any
		if err := dec.Decode(&d); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("k8s/deployment.yaml: %v", err)
		}
		docs[fmt.Sprint(d["kind"])] = d
	}
	return docs
}

// get walks maps and lists by key and index; nil when a step is missing.
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func intOr(v any, def int) int {
	if n, ok := v.(int); ok {
		return n
	}
	return def
}

// secretReadable checks that every file the container reads from a Secret volume (the token
// file of --auth-token-file among them) is readable by the user and groups the pod runs as.
// Kubernetes creates a Secret's files owned by root, with the fsGroup as their group when the
// pod sets one (else root's), with the item's mode or the volume's defaultMode (else 0644).
func secretReadable(pod map[string]any, container map[string]any) error {
	uid := intOr(get(container, "securityContext", "runAsUser"), intOr(get(pod, "securityContext", "runAsUser"), 0))
	gid := intOr(get(container, "securityContext", "runAsGroup"), intOr(get(pod, "securityContext", "runAsGroup"), uid))
	groups := []int{gid}
	fsGroup, hasFSGroup := get(pod, "securityContext", "fsGroup").(int)
	if hasFSGroup {
		groups = append(groups, fsGroup)
	}
	supplemental, _ := get(pod, "securityContext", "supplementalGroups").([]any)
	for _, g := range supplemental {
		groups = append(groups, g.(int))
	}
	fileGroup := 0
	if hasFSGroup {
		fileGroup = fsGroup
	}
	readable := func(mode int) bool {
		switch {
		case uid == 0:
			return true
		case slices.Contains(groups, fileGroup):
			return mode&0o040 != 0
		}
		return mode&0o004 != 0
	}
	var errs []error
	mounts, _ := get(container, "volumeMounts").([]any)
	for _, m := range mounts {
		vol := volume(pod, fmt.Sprint(get(m, "name")))
		if get(vol, "secret") == nil {
			continue
		}
		def := intOr(get(vol, "secret", "defaultMode"), 0o644)
		items, _ := get(vol, "secret", "items").([]any)
		for _, it := range items {
			mode := intOr(get(it, "mode"), def)
			if !readable(mode) {
				errs = append(errs, fmt.Errorf("%s/%s: mode %#o, owner root, group %d; the container runs as %d with groups %v and cannot read it",
					get(m, "mountPath"), get(it, "path"), mode, fileGroup, uid, groups))
			}
		}
		if len(items) == 0 && !readable(def) {
			errs = append(errs, fmt.Errorf("%s: mode %#o, group %d, unreadable by %d with groups %v", get(m, "mountPath"), def, fileGroup, uid, groups))
		}
	}
	return errors.Join(errs...)
}

func volume(pod map[string]any, name string) map[string]any {
	vols, _ := get(pod, "volumes").([]any)
	for _, v := range vols {
		if get(v, "name") == name {
			return v.(map[string]any)
		}
	}
	return nil
}

// The Kubernetes manifest as a cluster would read it: the token file is readable by the pod's
// user, a disruption budget and spread constraints cover the pods, and Prometheus is told
// where to scrape.
func TestKubernetesManifest(t *testing.T) {
	t.Parallel()
	docs := k8sDocs(t)
	dep := docs["Deployment"]
	if dep == nil {
		t.Fatal("no Deployment")
	}
	pod := get(dep, "spec", "template", "spec").(map[string]any)
	labels := get(dep, "spec", "template", "metadata", "labels").(map[string]any)
	c := get(pod, "containers", 0).(map[string]any)

	t.Run("token file readable by the pod's user", func(t *testing.T) {
		if err := secretReadable(pod, c); err != nil {
			t.Error(err)
		}
		args := fmt.Sprint(get(c, "args"))
		var tokenFile string
		for i, a := range get(c, "args").([]any) {
			if a == "--auth-token-file" {
				tokenFile = fmt.Sprint(get(c, "args", i+1))
			}
		}
		covered := false
		for _, m := range get(c, "volumeMounts").([]any) {
			vol := volume(pod, fmt.Sprint(get(m, "name")))
			for _, it := range get(vol, "secret", "items").([]any) {
				covered = covered || tokenFile == fmt.Sprint(get(m, "mountPath"))+"/"+fmt.Sprint(get(it, "path"))
			}
		}
		if tokenFile == "" || !covered {
			t.Errorf("--auth-token-file %q in %s is not a file of a mounted Secret", tokenFile, args)
		}
		// The check itself: without the fsGroup the same mode is unreadable.
		sc := get(pod, "securityContext").(map[string]any)
		fsGroup := sc["fsGroup"]
		delete(sc, "fsGroup")
		defer func() { sc["fsGroup"] = fsGroup }()
		if err := secretReadable(pod, c); err == nil || !strings.Contains(err.Error(), "cannot read it") {
			t.Errorf("without fsGroup: %v, want the token file unreadable", err)
		}
	})

	t.Run("disruption budget", func(t *testing.T) {
		pdb := docs["PodDisruptionBudget"]
		if pdb == nil {
			t.Fatal("no PodDisruptionBudget")
		}
		if !selects(get(pdb, "spec", "selector", "matchLabels"), labels) {
			t.Errorf("the budget's selector %v does not select the pods %v", get(pdb, "spec", "selector"), labels)
		}
		replicas := intOr(get(dep, "spec", "replicas"), 1)
		maxUnavail, okMax := get(pdb, "spec", "maxUnavailable").(int)
		minAvail, okMin := get(pdb, "spec", "minAvailable").(int)
		if !(okMax && maxUnavail >= 1 && maxUnavail < replicas) && !(okMin && minAvail >= 1 && minAvail < replicas) {
			t.Errorf("budget %v with %d replicas: want some, not all, pods kept", get(pdb, "spec"), replicas)
		}
	})

	t.Run("topology spread", func(t *testing.T) {
		keys := map[string]bool{}
		for _, s := range get(pod, "topologySpreadConstraints").([]any) {
			if selects(get(s, "labelSelector", "matchLabels"), labels) {
				keys[fmt.Sprint(get(s, "topologyKey"))] = true
			}
		}
		if !keys["kubernetes.io/hostname"] {
			t.Errorf("no spread over kubernetes.io/hostname selecting the pods (have %v)", keys)
		}
	})

	t.Run("scrape annotations", func(t *testing.T) {
		ann, _ := get(dep, "spec", "template", "metadata", "annotations").(map[string]any)
		port := fmt.Sprint(get(c, "ports", 0, "containerPort"))
		if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != port || ann["prometheus.io/path"] != "/metrics" {
			t.Errorf("annotations %v; want scrape \"true\", port %q, path /metrics", ann, port)
		}
	})
}

// selects reports whether every label of sel is among labels.
func selects(sel any, labels map[string]any) bool {
	m, ok := sel.(map[string]any)
	if !ok || len(m) == 0 {
		return false
	}
	for k, v := range m {
		if labels[k] != v {
			return false
		}
	}
	return true
}
