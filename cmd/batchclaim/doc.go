// Command batchclaim runs and operates instances that share batch submission to a
// distributed ledger through claims in one Postgres database.
//
//	batchclaim migrate up|down [N]|version   schema migrations (embedded)
//	batchclaim run --dlt-url URL [...]       an instance: claims, queuer, submitter, observer, HTTP
//	batchclaim enqueue --service-id S FILE   store the batches of a BatchList
//	batchclaim status [--json]               instances, claims, batches, stuck work
//	batchclaim resume SERVICE_ID             lift the halt an INVALID batch left
//	batchclaim dlt-sim                       the ledger simulator
//	batchclaim demo [--json]                 the whole story on a throwaway database
//	batchclaim bench [--scenario S] [--json] measure the jobs and ledger paths and the claim cycle
//	batchclaim chaos [--seed N] [--json]     seeded faults against real instances, history checked
//	batchclaim ui --listen ADDR              the live status page, from the database alone
//	batchclaim version [--json]              release, module version and commit
//	batchclaim election run|demo             one primary per role
//	batchclaim primary --role R              exit 0 if this host's instance is R's primary
//	batchclaim failover node|demo            owner-token lock and best-replica shard failover
//	batchclaim heartbeat run|event-types|demo  active/standby missed-heartbeat events
//	batchclaim singleflight demo             per-key single-flight cache
//
// Every command takes --help. Every flag of run can also be set through BATCHCLAIM_<FLAG>; a
// BATCHCLAIM_ variable that no flag of the command or of run reads stops the command, naming
// it. The database comes from --database-url, --database-url-file (a file whose first line is
// the URL), BATCHCLAIM_DATABASE_URL or BATCHCLAIM_DATABASE_URL_FILE, then DATABASE_URL; the
// command line wins over the environment, two forms in one place are an error, and a password
// given on the command line (which ps shows) is warned about (docs/operations.md, "Secrets").
// Every numeric flag has bounds; a value outside them stops the command, naming the flag.
// Errors are one line on stderr with exit status 1 (2 for usage errors, such as a mistyped
// flag, named with its closest spelling).
package main
