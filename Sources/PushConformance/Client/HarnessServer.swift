import Logging
import PushClock
import PushEventLoop
import PushService
import PushSession
import PushWire

/// One of the harness's two servers: a `ServiceHost` (so the connection rules are the
/// ones every securepush server follows) behind a listener of its own on 127.0.0.1, with
/// every frame, framing error and close of the client recorded in the case's `WireLog`.
/// A case may make it misbehave: close connections at once, or write raw bytes.
final class HarnessServer<Handler: ServiceHandler> {
    enum AcceptMode {
        /// Serve the connection.
        case serve
        /// Close every new connection at once, before a byte is read: a server that is
        /// going down (the client sees a connect that ends at once).
        case closeAtOnce
    }

    let service: HarnessService
    let host: ServiceHost<Handler>
    private let listener: Listener
    private let log: WireLog
    var acceptMode = AcceptMode.serve
    private var serials: [ObjectIdentifier: Int] = [:]
    /// Connections whose frames are logged and then dropped: the server neither answers
    /// nor acts on anything (not even PING), as a hung server.
    private var muted: Set<ObjectIdentifier> = []
    private var accepted = 0

    var port: Int { listener.port }
    var address: String { "127.0.0.1:\(listener.port)" }

    init(loop: EventLoop, service: HarnessService, limits: ServiceLimits, handler: Handler, log: WireLog) throws(CaseStop) {
        self.service = service
        self.log = log
        let logger = Logger(label: "securepush.conformance.client-harness") { _ in SwiftLogNoOpLogHandler() }
        let host = ServiceHost(loop: loop, limits: limits, logger: logger, handler: handler)
        self.host = host
        var accept: ((Connection) -> Void)?
        do {
            listener = try Listener(loop: loop, host: "127.0.0.1", port: 0) { connection in accept?(connection) }
        } catch {
            throw .fail("the harness cannot listen on 127.0.0.1: \(error)")
        }
        accept = { [unowned self] connection in self.accept(connection) }
        host.frameObserver = { [unowned self] peer, observation in self.observe(peer, observation) }
    }

    func close() {
        listener.close()
    }

    private func accept(_ connection: Connection) {
        accepted += 1
        serials[ObjectIdentifier(connection)] = accepted
        log.record(service, accepted, .opened)
        switch acceptMode {
        case .serve:
            host.accept(connection)
        case .closeAtOnce:
            connection.close()
            log.record(service, accepted, .closed(.local))
        }
    }

    /// The number of the connection a peer is on (1 for the first accepted).
    func serial(_ peer: ServicePeer<Handler>) -> Int {
        serials[ObjectIdentifier(peer.connection)] ?? 0
    }

    /// From now on the server reads `peer`'s frames and does nothing with them.
    func mute(_ peer: ServicePeer<Handler>) {
        muted.insert(ObjectIdentifier(peer.connection))
    }

    private func observe(_ peer: ServicePeer<Handler>, _ observation: FrameObservation) -> Bool {
        let serial = serial(peer)
        switch observation {
        case .frame(let header, let body):
            let message = body.withUnsafeBytes { try? Message.decode(header: header, body: $0) }
            log.record(service, serial, .received(header, body: body, message))
            return !muted.contains(ObjectIdentifier(peer.connection))
        case .framingError(let error):
            log.record(service, serial, .unframed(error))
        case .closed(let reason):
            log.record(service, serial, .closed(reason))
            serials[ObjectIdentifier(peer.connection)] = nil
            muted.remove(ObjectIdentifier(peer.connection))
        }
        return true
    }

    /// Admits `peer` at once, or `delayMs` later (HELLO_OK held back).
    func admit(_ peer: ServicePeer<Handler>, afterMs delayMs: Int64) -> Admission<Handler.PeerState> where Handler.PeerState == Int {
        let serial = serial(peer)
        guard delayMs > 0 else { return .admit(serial) }
        host.loop.schedule(after: .milliseconds(delayMs)) { [weak self, weak peer] in
            guard let self, let peer else { return }
            self.host.decide(peer, .admit(serial))
        }
        return .wait
    }

    // MARK: what the harness sends

    /// A frame the server starts (PUSH, MISSED, PING), recorded.
    func send(_ message: Message, correlation: UInt32, to peer: ServicePeer<Handler>) {
        host.send(message, correlation: correlation, to: peer)
        log.record(service, serial(peer), .sent(message.type, correlation: correlation))
    }

    /// A reply to a request of the client's, recorded.
    func respond(_ message: Message, correlation: UInt32, to peer: ServicePeer<Handler>) {
        host.respond(message, correlation: correlation, to: peer)
        log.record(service, serial(peer), .sent(message.type, correlation: correlation))
    }

    /// A reply as bytes: it frees the request's in-flight slot as `respond` does.
    func respondRaw(_ bytes: [UInt8], to peer: ServicePeer<Handler>) {
        peer.session.answered(now: Clocks.monotonicMilliseconds())
        sendRaw(bytes, to: peer)
    }

    /// Bytes as they are: a frame cut short, a header no server may send.
    func sendRaw(_ bytes: [UInt8], to peer: ServicePeer<Handler>) {
        host.sendEncoded(bytes, to: peer)
        log.record(service, serial(peer), .sent(nil, correlation: 0))
    }

    /// GOAWAY with the status and `last_correlation` the case chooses, then a close after
    /// `closeAfterMs` (the replies up to `lastCorrelation` are the case's to send meanwhile).
    func goaway(_ status: Status, lastCorrelation: UInt32, to peer: ServicePeer<Handler>, closeAfterMs: Int64) {
        var frame: [UInt8] = []
        Message.goaway(Goaway(status: status, lastCorrelation: lastCorrelation, message: "from the conformance harness"))
            .encode(correlation: 0, into: &frame)
        sendRaw(frame, to: peer)
        let connection = peer.connection
        if closeAfterMs <= 0 {
            connection.closeAfterFlush(timeout: .seconds(1))
        } else {
            _ = host.loop.schedule(after: .milliseconds(closeAfterMs)) { connection.closeAfterFlush(timeout: .seconds(1)) }
        }
    }
}
