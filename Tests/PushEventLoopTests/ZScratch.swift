import PushEventLoop
import PushWire
import Testing
import Glibc

extension EventLoopSuite {
    @Test(.enabled(if: getenv("PUSHLOOP_MEM") != nil)) func zmemory() throws {
        try withEventLoop { loop in
            let n = 6000
            var accepted = 0
            var serverSide: [Connection] = []
            serverSide.reserveCapacity(n)
            var clients: [Connection] = []
            clients.reserveCapacity(n)
            let listener = try Listener(loop: loop, host: "127.0.0.1", port: 0) { c in
                accepted += 1
                serverSide.append(c)
            }
            let before = residentBytes()
            let m0 = Int(mallinfo2().uordblks)
            for i in 0..<n {
                Connection.connect(loop: loop, host: "127.0.0.1", port: listener.port) { r in
                    if case .success(let c) = r { clients.append(c) }
                }
                if i % 500 == 499 { for _ in 0..<5 { loop.runOnce() } }
            }
            while accepted < n || clients.count < n { loop.runOnce(blocking: true) }
            let m1 = Int(mallinfo2().uordblks)
            let after = residentBytes()
            print("connections: \(clients.count) / \(serverSide.count); RSS delta per connection \((after - before) / (2 * n)) bytes; malloc in use per connection \((m1 - m0) / (2 * n)) bytes")
            for c in clients { c.write(makeFrame(correlation: 1, body: [1,2,3])) }
            for _ in 0..<50 { loop.runOnce() }
            let m2 = Int(mallinfo2().uordblks)
            print("after one frame each: RSS delta per connection \((residentBytes() - before) / (2 * n)); malloc in use per connection \((m2 - m0) / (2 * n))")
            for c in clients { c.close() }
            for _ in 0..<20 { loop.runOnce() }
        }
    }
}
