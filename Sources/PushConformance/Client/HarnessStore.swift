import PushClock
import PushEventLoop
import PushSecurity
import PushService
import PushWire

/// The harness's store: a faithful, small model of SPEC.md's store for one user and one
/// device (FETCH, SYNC and ACK over a table of payloads, with one valid fetch token) and
/// for one provider (STORE, SEND with idempotency keys, RECALL), whose answers a case may
/// replace request by request.
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
    /// Hold HELLO_OK back this long after HELLO.
    var helloDelayMs: Int64 = 0
    /// Checks a provider's HELLO credential (7.1); nil admits no provider.
    var providerCredential: HelloCredential?
    /// SEND idempotency keys and the id each was stored under (4.17-5).
    private(set) var sendKeys: [String: PayloadID] = [:]
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

    func admit(_ hello: Hello, peer: Peer) -> Admission<Int> {
        if hello.role == .provider {
            let admission = HarnessCredentials.admitProvider(hello, audience: .store, credential: providerCredential, serial: server.serial(peer))
            guard case .admit = admission else { return admission }
        }
        return server.admit(peer, afterMs: helloDelayMs)
    }

    func admitted(_ peer: Peer) { peers.append(peer) }

    func closed(_ peer: Peer, reason: CloseReason) { peers.removeAll { $0 === peer } }

    func serve(_ message: Message, correlation: UInt32, peer: Peer) {
        let request = HarnessRequest(message: message, correlation: correlation, connection: server.serial(peer))
        HarnessAnswer.carryOut(intercept?(request) ?? .faithful, request, server: server, peer: peer) { [unowned self] message in
            faithfulReply(message)
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
        case .store(let store):
            return .storeOK(StoreOK(id: commit(store.payload), expiresAt: Self.expiry(store.ttlSeconds)))
        case .send(let send):
            if let key = send.idempotencyKey, let earlier = sendKeys[key] {
                return .sendOK(SendOK(id: earlier, expiresAt: Self.expiry(send.ttlSeconds), replayed: true))
            }
            let id = commit(send.payload)
            if let key = send.idempotencyKey { sendKeys[key] = id }
            return .sendOK(SendOK(id: id, expiresAt: Self.expiry(send.ttlSeconds)))
        case .recall(let recall):
            guard payloads.removeValue(forKey: recall.id) != nil else { return Self.error(.notFound) }
            return .recallOK(RecallOK(id: recall.id))
        default:
            return Self.error(.badRequest)
        }
    }

    static func expiry(_ ttlSeconds: UInt32) -> UInt64 { Clocks.wallMilliseconds() + UInt64(ttlSeconds) * 1_000 }

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
