// Package testcert issues self-signed certificates for tests of the TLS paths: the listener's
// HTTPS, the ledger client's CA file and client certificate. A certificate is its own trust
// anchor: put it in a pool (Pool) or name its file as a CA file.
package testcert
