package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// userHZ is the unit of the CPU times in /proc/<pid>/stat: Linux reports them in ticks of
// USER_HZ, 100 a second on x86 and arm whatever the kernel's own tick.
const userHZ = 100

// serverUse is the CPU time (user and system) of the server processes that serve one
// database's sessions, each read from /proc by its pid. It is known only when the server runs
// on this machine: a pid whose process is not a backend of that database (a server
// elsewhere, a process that is gone) makes the whole reading unknown, not a smaller one.
type serverUse struct {
	known    bool
	byPid    map[int32]time.Duration
	backends int
	cpu      time.Duration
}

// backendsUse reads the CPU time of every backend of database name now.
func backendsUse(ctx context.Context, admin *pgx.Conn, name string) serverUse {
	rows, err := admin.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = $1`, name)
	if err != nil {
		return serverUse{}
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil || len(pids) == 0 {
		return serverUse{}
	}
	u := serverUse{known: true, byPid: make(map[int32]time.Duration, len(pids))}
	for _, pid := range pids {
		cpu, ok := backendCPU(pid, name)
		if !ok {
			return serverUse{}
		}
		u.byPid[pid] = cpu
	}
	return u
}

// backendCPU is the CPU time of process pid, when it is a Postgres backend of database
// name (its title, in /proc/<pid>/cmdline, names the database).
func backendCPU(pid int32, name string) (time.Duration, bool) {
	title, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !strings.HasPrefix(string(title), "postgres") || !strings.Contains(string(title), " "+name+" ") {
		return 0, false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The fields after the command's closing parenthesis, from the state (field 3): utime
	// and stime are fields 14 and 15.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 > len(s) {
		return 0, false
	}
	f := strings.Fields(s[i+2:])
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * time.Second / userHZ, true
}

// since is what the backends read in u used after then: a backend that was not there then
// counts from its start.
func (u serverUse) since(then serverUse) serverUse {
	if !u.known {
		return serverUse{}
	}
	out := serverUse{known: true, backends: len(u.byPid)}
	for pid, cpu := range u.byPid {
		out.cpu += cpu - then.byPid[pid]
	}
	return out
}

// per is the CPU time per unit, in microseconds.
func (u serverUse) per(units int) float64 {
	return round3(float64(u.cpu.Microseconds()) / float64(max(units, 1)))
}

// addJSON puts the CPU time per unit into m under key, when it is known.
func (u serverUse) addJSON(m map[string]any, key string, units int) {
	if u.known {
		m[key] = u.per(units)
		m["server_backends"] = u.backends
	}
}
