import Foundation
import Testing
import PushClient
import PushSecurity
@testable import PushStore
import PushSession
import PushTestSupport
import PushWire

/// `securepush store` as a child process with the given flags, for the hostile-peer tests.
final class HostileTarget: StoreUnderTest {
    let deployment: TemporaryDeployment
    let service: ServiceProcess

    init(_ flags: [String] = [], openFileLimit: Int? = nil) throws {
        deployment = try deploymentWithUsers()
        service = try ServiceProcess(["store", "--data-dir", deployment.directory] + flags, openFileLimit: openFileLimit)
    }

    var reachable: any ReachableService { service }
    var pid: pid_t { service.child.pid }

    /// A sample of the store's /metrics without labels, if it serves them (`--metrics`).
    func metric(_ name: String) -> Double? {
        guard let port = service.announcedMetricsPort, let text = try? HTTPGet.metrics(port: port) else { return nil }
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(name + " ") }) else { return nil }
        return Double(line.dropFirst(name.count + 1))
    }

    /// The `connection refused` log lines for `reason`, and the refusals they report.
    func refusalLog(_ reason: ConnectionRefusal) -> (lines: Int, refusals: Int) {
        var lines = 0
        var refusals = 0
        for line in service.standardErrorText().split(separator: "\n")
        where line.contains("connection refused") && line.contains("reason=\(reason.rawValue)") {
            lines += 1
            let count = line.split(separator: " ").first { $0.hasPrefix("count=") }.flatMap { Int($0.dropFirst(6)) }
            refusals += count ?? 0
        }
        return (lines, refusals)
    }
}

/// A frame header announcing a frame of `total` bytes (header included).
func frameHeader(_ type: MessageType, correlation: UInt32, total: Int) -> [UInt8] {
    var bytes: [UInt8] = []
    FrameHeader(rawType: type.rawValue, correlation: correlation, status: .ok, bodyLength: UInt32(total - FrameHeader.size)).write(into: &bytes)
    return bytes
}

func isGoaway(_ message: Message, _ status: Status, lastCorrelation: UInt32) -> Bool {
    if case .goaway(let goaway) = message { return goaway.status == status && goaway.lastCorrelation == lastCorrelation }
    return false
}

/// Hostile peers against the real store binary (issue 11, items 7 to 10): each test
/// asserts the figure it is about. Hostile traffic comes from 127.0.0.x addresses other
/// than 127.0.0.1, which good clients use.
@Suite("Hostile peers against the store binary", .ownThread)
struct HostilePeerProcessTests {
    @Test("[7] HELLO must complete within the default 5,000 ms: silent and trickling peers get GOAWAY TIMEOUT (last_correlation 0), then close")
    func handshakeDeadline() throws {
        let store = try HostileTarget()
        let hostile = HostileConnections(port: store.service.port)
        let silent = try hostile.open(1, from: "127.0.0.11").lowerBound
        let trickling = try hostile.open(1, from: "127.0.0.11").lowerBound
        // A HELLO one byte at a time, five bytes a second, never finished: bytes keep coming.
        let hello = Array(Message.hello(Hello(role: .device)).encoded(correlation: 1).dropLast())
        let closedAt = hostile.trickle(hello, on: [trickling], intervalMs: 200, timeoutMs: 15_000)
        let elapsed = try #require(closedAt[trickling], "the trickling peer was never closed")
        #expect((4_500...10_000).contains(elapsed), "closed after \(elapsed) ms; the deadline is 5000")
        for index in [silent, trickling] {
            let (messages, closed) = hostile.messagesUntilClose(index)
            #expect(closed)
            #expect(messages.count == 1 && messages.allSatisfy { isGoaway($0, .timeout, lastCorrelation: 0) }, "got \(messages)")
        }
        #expect(waitUntil { store.refusalLog(.handshakeTimeout).refusals == 2 }, "two handshake timeouts logged and counted")
        // A good client is served as ever.
        #expect(try store.provider().request(.ping) == .pong)
    }

    @Test("[8] a frame that has started must finish within --frame-timeout-ms, however slowly its bytes keep coming")
    func slowlorisInsideAFrame() throws {
        let store = try HostileTarget(["--frame-timeout-ms", "1000"])
        let hostile = HostileConnections(port: store.service.port)
        let peers = Array(try hostile.open(40, from: "127.0.0.12"))
        hostile.send(Message.hello(Hello(role: .device)).encoded(correlation: 1), to: peers)
        for index in peers {
            let reply = hostile.nextMessage(index)
            guard case .helloOK? = reply else { Issue.record("HELLO answered \(String(describing: reply))"); return }
        }
        // Admitted peers, each sending a FETCH one byte at a time, ten bytes a second.
        let fetch = Array(Message.fetch(Fetch(id: PayloadID(high: 1, low: 2), token: nil)).encoded(correlation: 2).dropLast())
        let closedAt = hostile.trickle(fetch, on: peers, intervalMs: 100, timeoutMs: 15_000)
        #expect(closedAt.count == peers.count, "\(peers.count - closedAt.count) trickling peers were never cut")
        let times = closedAt.values.sorted()
        if let first = times.first, let last = times.last {
            #expect(first >= 900 && last <= 6_000, "cut between \(first) and \(last) ms; the deadline is 1000")
        }
        for index in peers {
            let (messages, closed) = hostile.messagesUntilClose(index)
            #expect(closed && messages.contains { isGoaway($0, .timeout, lastCorrelation: 1) }, "peer \(index) got \(messages)")
        }
        #expect(waitUntil { store.refusalLog(.frameTimeout).refusals == peers.count })
    }

    @Test("[7] hostile handshakes hold their caps (64 per address, 1,024 in all) and never an admitted peer's slot; good clients are served")
    func pendingCaps() throws {
        let store = try HostileTarget(["--handshake-timeout-ms", "60000", "--metrics", "127.0.0.1:0"])
        let started = Date()
        let admitted = try store.provider()
        let hostile = HostileConnections(port: store.service.port)
        // Four addresses, 100 connections each: 64 of each wait for HELLO, 36 are closed at once.
        var byAddress: [String: Range<Int>] = [:]
        for host in 21...24 { byAddress["127.0.0.\(host)"] = try hostile.open(100, from: "127.0.0.\(host)") }
        let good = try store.provider()
        #expect(try good.request(.store(StoreRequest(user: "alice", payload: [1, 2, 3]))).type == .storeOK)
        #expect(waitUntil { byAddress.values.allSatisfy { hostile.closed(among: $0).count >= 36 } })
        for (address, range) in byAddress {
            let closed = hostile.closed(among: range)
            #expect(closed.count == 36, "\(address): \(closed.count) of 100 closed, expected 36")
            for index in closed { #expect(hostile.messagesUntilClose(index, timeoutMs: 100).messages.isEmpty, "closed with no reply") }
        }

        // Twelve more addresses fill the overall cap of 1,024; a thirteenth is turned away at once.
        var filling: [Int] = []
        for host in 31...42 { filling += try hostile.open(64, from: "127.0.0.\(host)") }
        // Counted as pending before the next ones arrive. Loops accept side by side, and a
        // connection placed on another loop at accept is counted there, in that loop's
        // turn: an open descriptor is not yet a pending handshake.
        #expect(waitUntil(timeoutSeconds: 10) { store.metric("securepush_store_pending_handshakes") == 1_024 })
        let overall = try hostile.open(10, from: "127.0.0.50")
        #expect(hostile.waitUntilClosed(overall, timeoutMs: 10_000))
        #expect(hostile.closed(among: filling).isEmpty, "the 1,024 pending handshakes are held")
        // Admitted peers keep their slots and are served.
        #expect(try admitted.request(.store(StoreRequest(user: "alice", payload: [4]))).type == .storeOK)
        #expect(try good.request(.ping) == .pong)

        // Counted, and logged one line a second per reason at most.
        #expect(waitUntil { store.refusalLog(.pendingPerAddress).refusals == 144 && store.refusalLog(.pendingHandshakes).refusals == 10 })
        let seconds = Date().timeIntervalSince(started)
        for reason in [ConnectionRefusal.pendingPerAddress, .pendingHandshakes] {
            let lines = store.refusalLog(reason).lines
            #expect(Double(lines) <= seconds + 1, "\(lines) log lines for \(reason) in \(Int(seconds)) s")
        }
        // Once the hostile handshakes go away, new clients get in again.
        hostile.closeAll()
        #expect(waitUntil { (try? store.provider().request(.ping)) == .pong })
    }
}

extension HostilePeerProcessTests {
    /// Hostile connections the memory test opens: 3,000 by default, so the suite stays
    /// fast; SECUREPUSH_HOSTILE_CONNECTIONS=15000 measures the goal's figure itself.
    static var hostileCount: Int {
        ProcessInfo.processInfo.environment["SECUREPUSH_HOSTILE_CONNECTIONS"].flatMap { Int($0) } ?? 3_000
    }

    /// The goal: 15,000 hostile connections cost the process at most 64 MB.
    static let budgetPerConnection = 64.0 * 1_000_000 / 15_000

    @Test("[9] unauthenticated peers each parking an almost complete 1 KiB frame cost the store under 64 MB per 15,000")
    func memoryBeforeAuthentication() throws {
        let count = Self.hostileCount
        // The pending caps raised so that every hostile connection is held (the default caps
        // would close all but 1,024 at once): the cost of each one, measured.
        let store = try HostileTarget(["--max-pending-handshakes", "30000", "--max-pending-per-address", "30000",
                                       "--handshake-timeout-ms", "600000", "--frame-timeout-ms", "600000"])
        let good = try store.provider()
        #expect(try good.request(.ping) == .pong)
        let descriptorsBefore = ProcessProbe.openDescriptors(pid: store.pid)
        let before = try #require(ProcessProbe.residentBytes(pid: store.pid))
        // Each sends a HELLO header announcing 1,024 bytes, then 1,000 of them: the most a
        // peer can make the store hold before HELLO_OK (1,016 bytes).
        let parked = frameHeader(.hello, correlation: 1, total: ServiceLimits.maxFrameBeforeHello)
            + [UInt8](repeating: 0x41, count: ServiceLimits.maxFrameBeforeHello - FrameHeader.size - 8)
        let hostile = HostileConnections(port: store.service.port)
        var opened = 0
        while opened < count {
            let batch = min(5_000, count - opened)
            let range = try hostile.open(batch, from: "127.0.0.\(100 + opened / 5_000)")
            hostile.send(parked, to: range)
            opened += batch
        }
        // Every connection accepted and every byte of it read by the store.
        #expect(waitUntil(timeoutSeconds: 120) {
            ProcessProbe.openDescriptors(pid: store.pid) >= descriptorsBefore + count
                && ProcessProbe.serverSockets(port: store.service.port).unread == 0
        })
        #expect(try good.request(.ping) == .pong)
        let after = try #require(ProcessProbe.residentBytes(pid: store.pid))
        #expect(hostile.closed(among: 0..<count).isEmpty, "every hostile connection is held")
        let perConnection = Double(after - before) / Double(count)
        let at15000 = perConnection * 15_000 / 1_000_000
        print("hostile-memory: \(count) connections parking \(parked.count) bytes each: RSS \(before / 1024) KiB -> \(after / 1024) KiB, "
              + "\(Int(perConnection)) bytes per connection, \(String(format: "%.1f", at15000)) MB for 15,000")
        #expect(perConnection <= Self.budgetPerConnection, "\(Int(perConnection)) bytes per hostile connection: \(at15000) MB for 15,000")
    }

    @Test("[10] out of file descriptors, new clients are refused at once instead of hanging, it is logged, and the store recovers",
          arguments: [1, 2])
    func outOfDescriptors(loops: Int) throws {
        let limit = 64
        let store = try HostileTarget(["--loops", "\(loops)", "--max-pending-per-address", "1000", "--handshake-timeout-ms", "60000"],
                                      openFileLimit: limit)
        let free = limit - ProcessProbe.openDescriptors(pid: store.pid, below: limit)
        try #require(free >= 4, "the store already uses \(limit - free) of its \(limit) descriptors")
        let hostile = HostileConnections(port: store.service.port)
        let extra = 8
        let all = try hostile.open(free + extra, from: "127.0.0.90")
        // The store holds `free` of them; it accepts the rest with its spare descriptor and
        // closes them at once. Each loop keeps a spare, and at the limit the loops' spares
        // and accepts interleave as the threads run: one loop's accept can take the slot
        // another's spare just freed and hold that connection, and full runs have also
        // seen one more closed than `extra`. So one either way per other loop.
        let slack = loops - 1
        #expect(waitUntil(timeoutSeconds: 10) { hostile.closed(among: all).count >= extra - slack })
        #expect((extra - slack...extra + slack).contains(hostile.closed(among: all).count))
        // A good client arriving now is told at once too, rather than left in the backlog.
        let client = try store.service.connect(timeoutMs: 10_000)
        let result = Result { () throws(BlockingWireClient.Failure) in
            try client.hello(Hello(role: .provider, credential: store.deployment.providerCredential(for: .store)))
        }
        switch result {
        case .success(let reply):
            // With several loops, a loop between giving up its spare and taking it back can
            // leave a descriptor free for a moment: served is then fine; left hanging is not.
            if loops == 1 { Issue.record("a client was served at EMFILE: \(reply)") }
        case .failure(let failure): #expect(failure != .timedOut, "the client was left hanging")
        }
        #expect(waitUntil { store.refusalLog(.outOfFileDescriptors).refusals >= extra - slack + (loops == 1 ? 1 : 0) },
                "refusals logged with their count")
        // Descriptors back: clients are served again.
        hostile.closeAll()
        #expect(waitUntil { (try? store.provider().request(.ping)) == .pong })
        #expect(!store.service.child.hasExited)
    }
}

@Suite("Connection settings from the config file", .ownThread)
struct ConnectionConfigTests {
    @Test("store.* keys win over the bare keys; a zero is refused at start")
    func storeKeys() throws {
        let temporary = try TemporaryDeployment()
        let path = temporary.directory + "/" + Deployment.configFile
        let text = try String(contentsOfFile: path, encoding: .utf8)
            + "store.handshake_timeout_ms = 1234\nhandshake_timeout_ms = 999\nframe_timeout_ms = 4321\n"
            + "store.max_pending_handshakes = 77\nmax_pending_per_address = 7\n"
        try Deployment.writePrivate(path, text)
        let configuration = StoreConfiguration(deployment: try Deployment.open(temporary.directory), host: "127.0.0.1", port: 0)
        #expect(configuration.limits.timeouts == SessionTimeouts(handshakeMs: 1_234, frameMs: 4_321))
        #expect(configuration.limits.maxPendingHandshakes == 77 && configuration.limits.maxPendingPerAddress == 7)
        var zero = configuration
        zero.limits.maxPendingPerAddress = 0
        #expect(throws: StoreServiceError.self) { try zero.effectiveLimits() }
    }
}
