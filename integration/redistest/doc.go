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
//  2. a Docker container ("redis:7", or the locally built [LocalImage] when no
//     registry is reachable), unless LATCHKEY_NO_DOCKER=1 or no engine answers;
//  3. a redis-server child process (needs `apt-get install redis-server`).
//
// [StartCluster] always uses child processes: Redis Cluster nodes announce
// their own addresses to clients, and inside a container they would announce
// ports that the host cannot reach.
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
