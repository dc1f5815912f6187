// Package deploy holds what operators load next to batchclaim instances rather than code:
//
//	grafana/batchclaim.json     a Grafana dashboard over the instances' /metrics
//	prometheus/alerts.yml       Prometheus alert rules (check with promtool check rules)
//
// Its test starts a real instance, lets it work, gathers its metric registry and fails if the
// dashboard or the rules name a metric (or a label of one) that the instance does not export,
// so that a renamed metric cannot silently leave a panel empty or an alert that never fires.
// docs/operations.md describes the metrics, the dashboard and the alerts.
package deploy
