import PushClock
import PushEventLoop
import PushService
import PushWire

/// A request the client sent to one of the harness's servers, as a case's intercept sees it.
struct HarnessRequest {
    var message: Message
    var correlation: UInt32
    /// The number of the connection it came on (1 for the first).
    var connection: Int
}

/// How the harness answers a request: as a faithful server would, or as the case says.
indirect enum HarnessAnswer {
    case faithful
    case reply(Message)
    /// A reply as bytes, for one no encoder would write.
    case rawReply([UInt8])
    case error(Status)
    /// This answer, after a delay.
    case later(ms: Int64, HarnessAnswer)
    /// No answer at all.
    case none
    /// GOAWAY with this status and `last_correlation` instead of an answer, then a close.
    case goaway(Status, lastCorrelation: UInt32, closeAfterMs: Int64)
}

/// The harness's store: a faithful, small model of SPEC.md's store for one user and one
/// device (FETCH, SYNC and ACK over a table of payloads, with one valid fetch token), whose
/// answers a case may replace request by request.
final class HarnessStore: ServiceHandler {
    typealias PeerState = Int
    typealias Peer = ServicePeer<HarnessStore>

    struct Payload {
        var content: [UInt8]
        var sealed = false
    }

    /// Set once the server is made (the server holds this handler).
    unowned var server: HarnessServer<HarnessStore>!
    /// Payload ids in the order committed, oldest first.
    private(set) var committed: [PayloadID] = []
    private(set) var payloads: [PayloadID: Payload] = [:]
    private(set) var acknowledged: Set<PayloadID> = []
    /// The one token the store accepts; requests with another get BAD_TOKEN.
    var validToken: [UInt8]?
    /// Consulted for every request before the faithful answer.
    var intercept: ((HarnessRequest) -> HarnessAnswer)?
    /// The admitted connections, newest last.
    private(set) var peers: [Peer] = []
    /// `SYNC_OK.cursor` values are this plus the offset of the next page: never 0, and
    /// nothing a client could construct by counting.
    static let cursorBase: UInt64 = 0x5EC0_C0DE_0000_0000

    @discardableResult
    func commit(_ content: [UInt8], sealed: Bool = false) -> PayloadID {
        let id = PayloadID.random()
        committed.append(id)
        payloads[id] = Payload(content: content, sealed: sealed)
        return id
    }

    func admit(_ hello: Hello, peer: Peer) -> Admission<Int> { .admit(server.serial(peer)) }

    func admitted(_ peer: Peer) { peers.append(peer) }

    func closed(_ peer: Peer, reason: CloseReason) { peers.removeAll { $0 === peer } }

    func serve(_ message: Message, correlation: UInt32, peer: Peer) {
        let request = HarnessRequest(message: message, correlation: correlation, connection: server.serial(peer))
        carryOut(intercept?(request) ?? .faithful, request, peer: peer)
    }

    private func carryOut(_ answer: HarnessAnswer, _ request: HarnessRequest, peer: Peer) {
        switch answer {
        case .faithful:
            server.respond(faithfulReply(request.message), correlation: request.correlation, to: peer)
        case .reply(let message):
            server.respond(message, correlation: request.correlation, to: peer)
        case .rawReply(let bytes):
            server.respondRaw(bytes, to: peer)
        case .error(let status):
            server.respond(.error(ErrorReply(status: status, message: "from the conformance harness")), correlation: request.correlation, to: peer)
        case .later(let delay, let answer):
            server.host.loop.schedule(after: .milliseconds(delay)) { [weak self, weak peer] in
                guard let self, let peer, peer.connection.isOpen else { return }
                self.carryOut(answer, request, peer: peer)
            }
        case .none:
            break
        case .goaway(let status, let last, let closeAfterMs):
            server.goaway(status, lastCorrelation: last, to: peer, closeAfterMs: closeAfterMs)
        }
    }

    /// What SPEC.md's store would answer (4.8, 4.9, 4.10), for this store's one user.
    func faithfulReply(_ message: Message) -> Message {
        switch message {
        case .fetch(let fetch):
            if let refusal = tokenRefusal(fetch.token) { return refusal }
            guard let payload = payloads[fetch.id] else { return Self.error(.notFound) }
            let now = Clocks.wallMilliseconds()
            return .fetchOK(FetchOK(id: fetch.id, payload: payload.content, sealed: payload.sealed, createdAt: now,
                                    expiresAt: now + 86_400_000))
        case .sync(let sync):
            if let refusal = tokenRefusal(sync.token) { return refusal }
            return .syncOK(page(after: sync.cursor, limit: sync.limit))
        case .ack(let ack):
            if let refusal = tokenRefusal(ack.token) { return refusal }
            guard payloads[ack.id] != nil else { return Self.error(.notFound) }
            acknowledged.insert(ack.id)
            return .ackOK(AckOK(id: ack.id))
        default:
            return Self.error(.badRequest)
        }
    }

    /// The unacknowledged ids, newest first, a page of `limit` from the page `cursor` names.
    func page(after cursor: UInt64, limit: UInt32) -> SyncOK {
        let unread = committed.reversed().filter { !acknowledged.contains($0) }
        let offset = cursor >= HarnessStore.cursorBase ? Int(min(cursor - HarnessStore.cursorBase, UInt64(unread.count))) : 0
        let size = max(1, min(Int(limit), 1_000))
        let ids = Array(unread[offset..<min(unread.count, offset + size)])
        let next = offset + ids.count
        let hasMore = next < unread.count
        return SyncOK(ids: ids, cursor: HarnessStore.cursorBase + UInt64(next), hasMore: hasMore,
                      olderCount: cursor == 0 && hasMore ? UInt32(unread.count - next) : 0)
    }

    private func tokenRefusal(_ token: [UInt8]?) -> Message? {
        guard let token else { return Self.error(.authRequired) }
        return token == validToken ? nil : Self.error(.badToken)
    }

    static func error(_ status: Status) -> Message {
        .error(ErrorReply(status: status, message: "from the conformance harness"))
    }
}
