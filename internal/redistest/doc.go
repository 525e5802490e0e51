// Package redistest provides real Redis servers for latchkey's integration
// tests and demo command.
//
// Lock semantics depend on exact server behaviour (Lua script atomicity,
// PEXPIRE precision, sharded pub/sub routing), so tests run against a real
// redis-server rather than a fake. Because CI machines and laptops differ in
// what they offer, [Start] degrades gracefully:
//
//  1. REDIS_ADDR, when the caller already runs a Redis (it must be on loopback,
//     since tests flush and abuse the server and must never touch a shared one);
//  2. a Docker container, when the integration module's dockerredis has set
//     [Docker] ("redis:7", or an image built from the host's redis-server),
//     unless LATCHKEY_NO_DOCKER=1 or no engine answers;
//  3. a redis-server child process (needs `apt-get install redis-server`).
//
// [StartCluster] always uses child processes: Redis Cluster nodes announce
// their own addresses to clients, and inside a container they would announce
// ports that the host cannot reach.
//
// # Replicas, failover, slot migration and Sentinel
//
// For fault tests that change who is master, [StartClusterWithReplicas]
// (or [StartClusterWith]) starts a Cluster whose masters have replicas,
// and [StartSentinel] a master with replicas watched by Sentinels (run as
// `redis-server sentinel.conf --sentinel`, so no package beyond
// redis-server is needed). They are too slow to share through a TestMain,
// and tests change them, so each test starts its own. Their helpers return
// only once every node agrees on the new state:
//
//   - [Cluster.FailoverForce], [Cluster.FailoverGraceful]: CLUSTER FAILOVER
//     [FORCE] on a replica, about 1 s;
//   - [Cluster.KillMaster]: kill -9 of a master until a replica is
//     promoted, about 7 s with [DefaultNodeTimeout] (2 s), and
//     [Cluster.Restart] to bring the node back as a replica;
//   - [Cluster.MigrateSlot], or [Cluster.BeginMigration] then
//     [Migration.MoveKeys] and [Migration.Finish] to act while the slot is
//     MIGRATING: milliseconds for a few keys;
//   - [SentinelSetup.Failover] (SENTINEL FAILOVER), about 1 s, and
//     [SentinelSetup.KillMaster], about 2-3 s with [SentinelDownAfter]
//     (1 s). Sentinel turns a failed-over old master into a replica only
//     about 9 s later ([SentinelSetup.Settle] waits for it), and starts no
//     failover of its own (after a kill) within 10 s (2 × failover-timeout)
//     of the last one, so a KillMaster soon after a Failover takes longer.
//
// Start-up takes about 2.5 s for either (3 masters + 3 replicas; 1 master,
// 2 replicas, 3 Sentinels), measured on a 2-core machine.
//
// Everything listens on 127.0.0.1 only, because test servers have no password
// and run with protected mode off.
//
// Typical use from a TestMain:
//
//	func TestMain(m *testing.M) {
//		srv, err := redistest.Start(context.Background())
//		if err != nil {
//			log.Fatal(err)
//		}
//		addr = srv.Addr
//		code := m.Run()
//		srv.Close()
//		os.Exit(code)
//	}
//
// Callers that check for goroutine leaks with go.uber.org/goleak must pass
// [GoleakIgnores] to it.
package redistest
