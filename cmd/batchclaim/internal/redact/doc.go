// Package redact hides the secrets of database and ledger URLs in logs and messages.
package redact
