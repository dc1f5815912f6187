// Package subproc starts instances of this same binary as separate OS processes.
package subproc
