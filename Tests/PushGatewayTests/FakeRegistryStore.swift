import Dispatch
import Logging
import PushClock
import PushEventLoop
import PushSecurity
import PushService
import PushSession
import PushWire

/// The registry a fake store serves: each registration's latest state and the change
/// sequence number of that state, as SPEC.md 4.16 describes. Shared by the store's runs so a
/// restart keeps it, as a database would.
final class RegistryLog: @unchecked Sendable {
    // @unchecked: every access holds `lock`.
    private let lock = DispatchSemaphore(value: 1)
    private var rows: [(sequence: UInt64, entry: RegistryEntry)] = []
    private var lastSequence: UInt64 = 0

    func record(_ state: RegistryEntry.State, _ credential: [UInt8]) {
        lock.wait()
        defer { lock.signal() }
        lastSequence += 1
        rows.removeAll { $0.entry.credential == credential }
        rows.append((lastSequence, RegistryEntry(state: state, credential: credential)))
    }

    /// The sequence number of the last change recorded: a follower whose cursor is here has
    /// applied everything recorded so far.
    var latest: UInt64 {
        lock.wait()
        defer { lock.signal() }
        return lastSequence
    }

    /// The changes after `cursor`, oldest first, at most `limit`.
    func changes(after cursor: UInt64, limit: Int) -> RegistryOK {
        lock.wait()
        defer { lock.signal() }
        let after = rows.filter { $0.sequence > cursor }
        let taken = after.prefix(limit)
        return RegistryOK(entries: taken.map(\.entry), cursor: taken.last?.sequence ?? cursor, hasMore: after.count > taken.count)
    }
}

/// A store that serves REGISTRY only, from a `RegistryLog`, with the long poll of [4.16]:
/// what the gateway's follower needs, without the real store. It checks the gateway's HELLO
/// credential as the store must ([4.2-2]).
final class FakeRegistryStore: @unchecked Sendable {
    // @unchecked: `server` is set on the loop thread during EventLoopThread's setup, which
    // the creating thread waits for, and used on the loop only after that.
    let log: RegistryLog
    let port: Int
    private let thread: EventLoopThread
    private var server: RegistryServer?

    /// - Parameter port: 0 for a free one; a port used before, for a restart.
    /// - Parameter tls: serve TLS with this context.
    init(serverKey: SecretKey, log: RegistryLog = RegistryLog(), port: Int = 0, tls: TLSContext? = nil) throws {
        self.log = log
        nonisolated(unsafe) var started: RegistryServer?
        nonisolated(unsafe) var failure: (any Error)?
        thread = try EventLoopThread(name: "fake-registry-store") { loop in
            let server = RegistryServer(loop: loop, serverKey: serverKey, log: log)
            do {
                try server.host.listen(host: "127.0.0.1", port: port, tls: tls)
                started = server
            } catch {
                failure = error
            }
        }
        if let failure {
            thread.shutdown()
            throw failure
        }
        server = started
        self.port = started?.host.port ?? 0
    }

    deinit { stop() }

    /// Records a change and answers the REGISTRY requests waiting for one.
    func record(_ state: RegistryEntry.State, _ credential: [UInt8]) {
        log.record(state, credential)
        _ = onLoop { $0.changed() }
    }

    /// REGISTRY requests served so far, and how many of them were held for a change.
    var served: (requests: Int, held: Int) {
        onLoop { ($0.requests, $0.heldCount) } ?? (0, 0)
    }

    /// Ends like a crash: the loop stops and every connection is closed, nothing answered.
    func stop() {
        thread.shutdown()
        server = nil
    }

    private func onLoop<T>(_ body: @escaping (RegistryServer) -> T) -> T? {
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var result: T?
        nonisolated(unsafe) let work = body
        guard let server = self.server.map(LoopBound.init) else { return nil }
        guard thread.handle.execute({
            result = work(server.value)
            done.signal()
        }) else { return nil }
        guard done.wait(timeout: .now() + 10) == .success else { return nil }
        return result
    }
}

/// A loop-confined object carried to its loop in a closure.
private struct LoopBound<Value>: @unchecked Sendable {
    let value: Value
}

/// The loop side of `FakeRegistryStore`.
final class RegistryServer: ServiceHandler {
    typealias PeerState = Void
    private(set) var host: ServiceHost<RegistryServer>!
    private let credentials: HelloCredential
    private let replays = CredentialReplayGuard()
    private let log: RegistryLog
    private let loop: EventLoop
    private var held: [ObjectIdentifier: (peer: ServicePeer<RegistryServer>, correlation: UInt32, request: RegistryRequest, timer: LoopTimer)] = [:]
    private(set) var requests = 0
    private(set) var heldCount = 0

    init(loop: EventLoop, serverKey: SecretKey, log: RegistryLog) {
        self.loop = loop
        self.log = log
        credentials = HelloCredential.gateway(serverKey)
        host = ServiceHost(loop: loop, limits: ServiceLimits(name: "fake-store", served: [.registry]),
                           logger: Logger(label: "fake-store", factory: { _ in SwiftLogNoOpLogHandler() }), handler: self)
    }

    func admit(_ hello: Hello, peer: ServicePeer<RegistryServer>) -> Admission<Void> {
        guard hello.role == .gateway else { return .refuse(.forbidden, "this fake serves gateways only") }
        switch credentials.check(hello, for: .store, nowMs: Clocks.wallMilliseconds(), replays: replays) {
        case .admit: return .admit(())
        case .refuse(let status, let reply, let reason): return .refuse(status, reply, logDetail: reason)
        }
    }

    func serve(_ message: Message, correlation: UInt32, peer: ServicePeer<RegistryServer>) {
        guard case .registry(let request) = message else { return }
        requests += 1
        let reply = log.changes(after: request.cursor, limit: Int(request.limit))
        guard reply.entries.isEmpty, request.waitMs > 0 else {
            host.respond(.registryOK(reply), correlation: correlation, to: peer)
            return
        }
        heldCount += 1
        let key = ObjectIdentifier(peer)
        let timer = loop.schedule(after: .milliseconds(Int64(min(request.waitMs, RegistryRequest.maxWaitMs)))) { [weak self] in
            self?.answer(key)
        }
        held[key] = (peer, correlation, request, timer)
    }

    /// A change: every held request gets it now.
    func changed() {
        for key in Array(held.keys) { answer(key) }
    }

    private func answer(_ key: ObjectIdentifier) {
        guard let waiting = held.removeValue(forKey: key) else { return }
        waiting.timer.cancel()
        let reply = log.changes(after: waiting.request.cursor, limit: Int(waiting.request.limit))
        host.respond(.registryOK(reply), correlation: waiting.correlation, to: waiting.peer)
    }

    func closed(_ peer: ServicePeer<RegistryServer>, reason: CloseReason) {
        held.removeValue(forKey: ObjectIdentifier(peer))?.timer.cancel()
    }
}
