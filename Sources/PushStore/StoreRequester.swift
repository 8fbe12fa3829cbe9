import PushStoreLogic
import PushWire

/// Who waits for a request's answer: a protocol connection (with the request's
/// correlation id) or an HTTP exchange of the provider API.
enum StoreRequester {
    case wire(StoreServer.Peer, correlation: UInt32)
    case http(StoreHTTPCall)

    var session: StoreSession? {
        switch self {
        case .wire(let peer, _): peer.state
        case .http(let call): call.session
        }
    }

    /// Whether an answer can still reach it.
    var isOpen: Bool {
        switch self {
        case .wire(let peer, _): peer.connection.isOpen
        case .http(let call): !call.isAnswered
        }
    }

    var peerHost: String {
        switch self {
        case .wire(let peer, _): peer.peerHost
        case .http(let call): call.session.peerAddress
        }
    }
}

/// One request of the HTTP provider API as the store's request path sees it: the session
/// it runs under (a provider, with its idempotency scope), and where its answer goes.
/// `StoreHTTPAPI` turns the answer into an HTTP response. Loop-confined.
final class StoreHTTPCall {
    let session: StoreSession
    let startNs: UInt64
    private let deliver: (Message, _ createdAt: UInt64?) -> Void
    private(set) var isAnswered = false

    init(session: StoreSession, startNs: UInt64, deliver: @escaping (Message, _ createdAt: UInt64?) -> Void) {
        self.session = session
        self.startNs = startNs
        self.deliver = deliver
    }

    func answer(_ reply: Message, createdAt: UInt64?) {
        guard !isAnswered else { return }
        isAnswered = true
        deliver(reply, createdAt)
    }
}
