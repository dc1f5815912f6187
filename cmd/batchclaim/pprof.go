package main

import "fmt"

// checkPprof refuses --pprof where the profiles could be read without a token: they show the
// process's memory and code. node.Config.Pprof has the same rule; this one names the flags.
func checkPprof(on bool, listen string, tokens bool) error {
	switch {
	case !on:
		return nil
	case listen == "":
		return fmt.Errorf("--pprof serves the profiles on --listen: give a --listen address")
	case !tokens && !loopbackOnly(listen):
		return fmt.Errorf("--pprof with --listen %s, not a loopback address, needs --auth-token-file: "+
			"the profiles show the process's memory and code to whoever can reach it", listen)
	}
	return nil
}
