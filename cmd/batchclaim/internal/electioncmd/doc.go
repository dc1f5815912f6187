// Package electioncmd is `batchclaim election` and `batchclaim primary`, on
// patterns/election. `election run` stands for roles: it becomes primary of each role that has
// no live primary, keeps its terms alive, steps down before anyone else can be elected and
// serves GET /primary?role=R. `election demo` runs three such processes of this binary on a
// scratch database, SIGKILLs and SIGSTOPs primaries and cuts an elector's database link, then
// checks the recorded history: no role with two primaries at once, no stale fenced write
// accepted, every failure followed by an election within T + I. `primary` exits 0 if this
// host's instance is the live primary of a role, 1 if not, 2 when it cannot tell.
package electioncmd
