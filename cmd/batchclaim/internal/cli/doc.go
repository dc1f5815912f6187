// Package cli is the flag handling every command of the program shares: usage text, flags
// from BATCHCLAIM_<FLAG> variables, one-line flag errors naming the closest spelling, the
// logging flags, and the checks of a listener's address and --allowed-hosts.
package cli
