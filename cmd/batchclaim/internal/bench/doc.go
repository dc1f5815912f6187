// Package bench is `batchclaim bench`: the job-runner and ledger paths, idle latency, many
// claims, failover, scale, churn and the claim cycle, measured on scratch databases with
// instances in this process or as `batchclaim run` processes of this same binary. See
// docs/performance.md.
package bench
