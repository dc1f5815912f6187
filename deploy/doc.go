// Package deploy holds files operators use next to batchclaim instances rather than Go code
// (container, Compose, systemd and Kubernetes files; see docs/operations.md), among them:
//
//	grafana/batchclaim.json     a Grafana dashboard over the instances' /metrics
//	prometheus/alerts.yml       Prometheus alert rules (check with promtool check rules)
//	compose-patroni.yaml        etcd, three Patroni members with a PgBouncer each, two instances
//	patroni/                    the members' image, Patroni and PgBouncer configuration
//
// k8s_test.go reads k8s/deployment.yaml as a cluster would: the token file must be readable
// by the pod's user and groups, and a disruption budget, spread constraints and scrape
// annotations must cover the pods. upgrade_test.go refuses a migration after the first
// release's schema that an instance of the previous release could not run on, since the
// manifest's init container migrates while old pods still run.
//
// Its metrics test starts a real instance, lets it work, gathers its metric registry and fails if the
// dashboard or the rules name a metric (or select on a label) that the instance does not
// export, so that a renamed metric cannot silently leave a panel empty or an alert that never
// fires.
package deploy
