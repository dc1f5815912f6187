package node

import "time"

// SetCancelPoll sets how often n looks for cancel requests against its running jobs besides
// the notifications (the renew interval unless set); call it before Run.
func SetCancelPoll(n *Node, every time.Duration) { n.cancels.every = every }
