-- Shard failover. Liveness and leases are judged by the database clock; durations arrive as
-- milliseconds. Only package failover writes these tables.

-- name: FailoverShardBootstrap :execrows
-- Creates the shard with its first primary at epoch 1, unless it exists.
INSERT INTO batchclaim.failover_shards (shard, epoch, primary_id) VALUES (sqlc.arg(shard)::text, 1, sqlc.arg(primary_id)::text)
ON CONFLICT (shard) DO NOTHING;

-- name: FailoverShardShare :one
-- The shard's decision, locked FOR SHARE until the caller's transaction ends, so that no
-- failover decision commits between the caller's check and its commit.
SELECT epoch, primary_id, updated_at FROM batchclaim.failover_shards WHERE shard = sqlc.arg(shard) FOR SHARE;

-- name: FailoverShardLock :one
SELECT epoch, primary_id, updated_at FROM batchclaim.failover_shards WHERE shard = sqlc.arg(shard) FOR UPDATE;

-- name: FailoverShardGet :one
SELECT epoch, primary_id, updated_at FROM batchclaim.failover_shards WHERE shard = sqlc.arg(shard);

-- name: FailoverShardAdvance :one
-- Records the decision: a new primary at epoch + 1, only if the epoch is still the one read.
UPDATE batchclaim.failover_shards SET epoch = epoch + 1, primary_id = sqlc.arg(new_primary)::text, updated_at = clock_timestamp()
WHERE shard = sqlc.arg(shard) AND epoch = sqlc.arg(epoch)
RETURNING epoch;

-- name: FailoverNodeRegister :one
-- The node's record, rewritten every heartbeat interval; last_updated is its heartbeat.
INSERT INTO batchclaim.failover_nodes AS n (node_id, shard, address, role, primary_id, epoch, last_txn_id, last_updated)
VALUES (sqlc.arg(node_id)::text, sqlc.arg(shard)::text, sqlc.arg(address)::text, sqlc.arg(role)::text,
        sqlc.arg(primary_id)::text, sqlc.arg(epoch)::bigint, sqlc.arg(last_txn_id)::bigint, now())
ON CONFLICT (node_id) DO UPDATE
SET shard = excluded.shard, address = excluded.address, role = excluded.role, primary_id = excluded.primary_id,
    epoch = excluded.epoch, last_txn_id = excluded.last_txn_id, last_updated = excluded.last_updated
RETURNING last_updated;

-- name: FailoverRoleRecord :one
-- A role change, written by the node itself. A primary row starts the primary's lease; at
-- most one primary row exists per shard epoch (a second is not inserted: no row returned).
INSERT INTO batchclaim.failover_roles (shard, node_id, epoch, role, primary_id, renewed_at, lease_until)
VALUES (sqlc.arg(shard)::text, sqlc.arg(node_id)::text, sqlc.arg(epoch)::bigint, sqlc.arg(role)::text, sqlc.arg(primary_id)::text,
        CASE WHEN sqlc.arg(role)::text = 'primary' THEN now() END,
        CASE WHEN sqlc.arg(role)::text = 'primary' THEN now() + sqlc.arg(lease_ms)::bigint * interval '1 millisecond' END)
ON CONFLICT (shard, epoch) WHERE role = 'primary' DO NOTHING
RETURNING id, at;

-- name: FailoverPrimaryRenew :one
-- Extends the primary's lease. The caller holds the shard row FOR SHARE and has checked that
-- it still names this node at this epoch.
UPDATE batchclaim.failover_roles
SET renewed_at = now(), lease_until = now() + sqlc.arg(lease_ms)::bigint * interval '1 millisecond'
WHERE shard = sqlc.arg(shard) AND node_id = sqlc.arg(node_id) AND epoch = sqlc.arg(epoch) AND role = 'primary'
RETURNING lease_until;

-- name: FailoverPrimaryStatus :one
-- What a replica watches: the primary's last heartbeat as primary (its lease renewal), or the
-- decision's time while a newly chosen primary has not yet taken over. stale is true once
-- that is older than the replica's patience; lease_live while the primary's lease runs.
SELECT s.epoch, s.primary_id, COALESCE(n.address, '')::text AS primary_address,
       (GREATEST(s.updated_at, r.renewed_at) < now() - sqlc.arg(patience_ms)::bigint * interval '1 millisecond')::bool AS stale,
       COALESCE(r.lease_until > now(), false)::bool AS lease_live
FROM batchclaim.failover_shards s
LEFT JOIN batchclaim.failover_roles r ON r.shard = s.shard AND r.epoch = s.epoch AND r.role = 'primary' AND r.node_id = s.primary_id
LEFT JOIN batchclaim.failover_nodes n ON n.node_id = s.primary_id
WHERE s.shard = sqlc.arg(shard);

-- name: FailoverPrimaryRole :one
-- The primary row of a shard epoch, if any, and whether its lease runs.
SELECT node_id, at, lease_until, (lease_until > now())::bool AS lease_live
FROM batchclaim.failover_roles
WHERE shard = sqlc.arg(shard) AND epoch = sqlc.arg(epoch) AND role = 'primary';

-- name: FailoverNodeLive :one
SELECT (last_updated > now() - sqlc.arg(window_ms)::bigint * interval '1 millisecond')::bool AS live, address
FROM batchclaim.failover_nodes WHERE node_id = sqlc.arg(node_id);

-- name: FailoverLiveNodes :many
SELECT node_id, address FROM batchclaim.failover_nodes
WHERE shard = sqlc.arg(shard) AND last_updated > now() - sqlc.arg(window_ms)::bigint * interval '1 millisecond'
ORDER BY node_id;

-- name: FailoverPendingDecision :one
SELECT epoch, old_primary, new_primary, decided_by, lock_epoch, decided_at
FROM batchclaim.failover_decisions
WHERE shard = sqlc.arg(shard) AND epoch = sqlc.arg(epoch) AND outcome IS NULL;

-- name: FailoverDecisionSnapshot :execrows
-- Copies the shard's registrations as the deciding transaction sees them.
INSERT INTO batchclaim.failover_decision_nodes (shard, epoch, node_id, role, last_txn_id, last_updated)
SELECT n.shard, sqlc.arg(epoch)::bigint, n.node_id, n.role, n.last_txn_id, n.last_updated
FROM batchclaim.failover_nodes n WHERE n.shard = sqlc.arg(shard);

-- name: FailoverCandidate :one
-- The most up-to-date live node of the snapshot other than the failed primary (ties: the
-- smallest node_id).
SELECT node_id, last_txn_id FROM batchclaim.failover_decision_nodes
WHERE shard = sqlc.arg(shard) AND epoch = sqlc.arg(epoch) AND node_id <> sqlc.arg(old_primary)::text
  AND last_updated > now() - sqlc.arg(window_ms)::bigint * interval '1 millisecond'
ORDER BY last_txn_id DESC, node_id
LIMIT 1;

-- name: FailoverDecisionsSupersede :execrows
UPDATE batchclaim.failover_decisions SET outcome = 'superseded', completed_at = clock_timestamp(), completed_by = sqlc.arg(by)::text
WHERE shard = sqlc.arg(shard) AND outcome IS NULL;

-- name: FailoverDecisionInsert :exec
INSERT INTO batchclaim.failover_decisions (shard, epoch, old_primary, new_primary, decided_by, lock_epoch, live_after)
VALUES (sqlc.arg(shard)::text, sqlc.arg(epoch)::bigint, sqlc.arg(old_primary)::text, sqlc.arg(new_primary)::text,
        sqlc.arg(decided_by)::text, sqlc.arg(lock_epoch)::bigint, now() - sqlc.arg(window_ms)::bigint * interval '1 millisecond');

-- name: FailoverDecisionComplete :execrows
UPDATE batchclaim.failover_decisions SET outcome = 'completed', completed_at = clock_timestamp(), completed_by = sqlc.arg(by)::text
WHERE shard = sqlc.arg(shard) AND epoch = sqlc.arg(epoch) AND outcome IS NULL;

-- name: FailoverNodeDeleteStale :execrows
-- The source design deletes the failed primary's record; it re-creates it if it returns.
DELETE FROM batchclaim.failover_nodes
WHERE node_id = sqlc.arg(node_id) AND last_updated < now() - sqlc.arg(window_ms)::bigint * interval '1 millisecond';

-- name: FailoverCommandIssue :execrows
-- Pushes a command onto a node's queue; the same command of a resumed failover is stored once.
INSERT INTO batchclaim.failover_commands (node_id, shard, epoch, kind, primary_id, primary_address, issued_by)
VALUES (sqlc.arg(node_id)::text, sqlc.arg(shard)::text, sqlc.arg(epoch)::bigint, sqlc.arg(kind)::text,
        sqlc.arg(primary_id)::text, sqlc.arg(primary_address)::text, sqlc.arg(issued_by)::text)
ON CONFLICT (node_id, epoch, kind) DO NOTHING;

-- name: FailoverCommandNotify :exec
-- Wakes the node's listener at commit; the payload is the node id.
SELECT pg_notify('failover_commands', sqlc.arg(node_id)::text);

-- name: FailoverCommandConsume :one
-- Pops the oldest unconsumed command of a node. SKIP LOCKED: two consumers of one queue never
-- get the same command; the caller applies it in the same transaction.
UPDATE batchclaim.failover_commands c SET consumed_at = clock_timestamp()
WHERE c.id = (
    SELECT q.id FROM batchclaim.failover_commands q
    WHERE q.node_id = sqlc.arg(node_id) AND q.consumed_at IS NULL
    ORDER BY q.id LIMIT 1
    FOR UPDATE SKIP LOCKED
)
RETURNING c.id, c.shard, c.epoch, c.kind, c.primary_id, c.primary_address, c.issued_by;

-- name: FailoverNodes :many
SELECT node_id, role, primary_id, epoch, last_txn_id, last_updated,
       (last_updated > now() - sqlc.arg(window_ms)::bigint * interval '1 millisecond')::bool AS live
FROM batchclaim.failover_nodes WHERE shard = sqlc.arg(shard) ORDER BY node_id;

-- name: FailoverDecisions :many
SELECT epoch, old_primary, new_primary, decided_by, lock_epoch, decided_at, outcome, completed_at, completed_by
FROM batchclaim.failover_decisions WHERE shard = sqlc.arg(shard) ORDER BY epoch;

-- name: FailoverAuditTwoPrimaries :one
-- Pairs of primary terms of different nodes that overlap in database time. A term runs from
-- its role row until its lease ended or the node recorded its next role, whichever is first.
WITH term AS (
    SELECT r.node_id, r.at AS start_at,
           LEAST(r.lease_until, COALESCE((SELECT min(x.at) FROM batchclaim.failover_roles x WHERE x.node_id = r.node_id AND x.id > r.id), 'infinity'::timestamptz)) AS end_at
    FROM batchclaim.failover_roles r WHERE r.shard = sqlc.arg(shard) AND r.role = 'primary'
)
SELECT count(*) FROM term a JOIN term b ON a.node_id < b.node_id AND a.start_at < b.end_at AND b.start_at < a.end_at;

-- name: FailoverAuditNotMostUpToDate :one
-- Decisions whose new primary was not live, or was passed by a live node with more progress,
-- judged from the registrations the deciding transaction saw.
SELECT count(*) FROM batchclaim.failover_decisions d
LEFT JOIN batchclaim.failover_decision_nodes c ON c.shard = d.shard AND c.epoch = d.epoch AND c.node_id = d.new_primary
WHERE d.shard = sqlc.arg(shard) AND (
    c.node_id IS NULL OR c.last_updated <= d.live_after OR EXISTS (
        SELECT 1 FROM batchclaim.failover_decision_nodes o
        WHERE o.shard = d.shard AND o.epoch = d.epoch AND o.node_id NOT IN (d.new_primary, d.old_primary)
          AND o.last_updated > d.live_after AND o.last_txn_id > c.last_txn_id));

-- name: FailoverAuditLostCommands :one
-- Commands still unconsumed whose target is live now.
SELECT count(*) FROM batchclaim.failover_commands c JOIN batchclaim.failover_nodes n ON n.node_id = c.node_id
WHERE c.shard = sqlc.arg(shard) AND c.consumed_at IS NULL
  AND n.last_updated > now() - sqlc.arg(window_ms)::bigint * interval '1 millisecond';

-- name: FailoverCommandCounts :one
SELECT count(*) AS issued, count(consumed_at) AS consumed FROM batchclaim.failover_commands WHERE shard = sqlc.arg(shard);
