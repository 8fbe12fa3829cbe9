import PushEventLoop
import PushWire
import PushSession

/// What the app shows: the payload, or the generic prompt when it may not be read yet.
public struct DeviceNotification: Equatable, Sendable {
    public enum Content: Equatable, Sendable {
        case payload([UInt8])
        /// No usable fetch token: show that something arrived, not what ([4.14-4]).
        case generic
    }

    public var id: PayloadID
    public var content: Content

    public var text: String {
        switch content {
        case .payload(let bytes): String(decoding: bytes, as: UTF8.self)
        case .generic: DeviceClient.genericText
        }
    }
}

public enum DeviceEvent: Equatable, Sendable {
    /// A PUSH arrived: what travelled on the push path (the ID and the frame's size).
    case pushReceived(id: [UInt8], frameBytes: Int)
    case gatewayConnected
    case storeConnected
    case disconnected(from: String, ClientError)
    /// The gateway dropped pushes; the device SYNCs with the store.
    case missed(UInt32)
    case loggedIn(expiresAt: UInt64)
    /// The store refused the token (expired, rejected or absent); log in again.
    case tokenRejected(Status)
    /// A kept ID can never be shown (not found, gone, or not this user's).
    case dropped(PayloadID, Status)
}

/// The device side of secure push: pushes from the gateway carry only IDs; the
/// device fetches each payload from the store with its fetch token, acknowledges it, and
/// hands the app a notification. Without a usable token it shows the generic prompt,
/// keeps the ID, and fetches after the next login. It SYNCs with the store on every
/// connect and on MISSED, so a lost push only delays a message. Loop-confined.
public final class DeviceClient {
    public static let genericText = "New notification - log in to view"
    /// IDs remembered as shown, so a redelivered push is not shown twice.
    public static let rememberedIDs = 10_000

    public let deviceID: String
    public var onNotification: ((DeviceNotification) -> Void)?
    public var onEvent: ((DeviceEvent) -> Void)?

    private let loop: EventLoop
    private let gateway: ServerLink
    private let store: ServerLink
    private let tokenStore: TokenStore?
    private var token: TokenStore.Saved?
    private var tokenVersion = 0
    private var shown: Set<PayloadID> = []
    private var shownOrder: [PayloadID] = []
    private var genericShown: Set<PayloadID> = []
    private var pending: [PayloadID] = []
    private var fetching: Set<PayloadID> = []
    private var syncing = false
    private var watcher: LoopTimer?

    /// - Parameters:
    ///   - registration: the credential `securepush device enroll` issued.
    ///   - tokenStore: where the fetch token lives; nil keeps it in memory only.
    public init(loop: EventLoop, gateway: ServerLink.Endpoint, store: ServerLink.Endpoint, registration: [UInt8],
                deviceID: String, tokenStore: TokenStore?) {
        self.loop = loop
        self.deviceID = deviceID
        self.tokenStore = tokenStore
        self.gateway = ServerLink(loop: loop, endpoint: gateway) { Hello(role: .device, credential: registration, name: "securepush-device") }
        self.store = ServerLink(loop: loop, endpoint: store) { Hello(role: .device, name: "securepush-device") }
        self.token = tokenStore?.load()
        self.tokenVersion = tokenStore?.version ?? 0
    }

    /// IDs received but not yet shown with their content.
    public var keptIDs: [PayloadID] { pending }
    public var hasToken: Bool { token != nil }

    public func start() {
        gateway.onReady = { [weak self] in self?.onEvent?(.gatewayConnected) }
        gateway.onServerMessage = { [weak self] message, correlation in self?.fromGateway(message, correlation: correlation) }
        gateway.onDown = { [weak self] error in self?.onEvent?(.disconnected(from: "gateway", error)) }
        store.onReady = { [weak self] in
            guard let self else { return }
            self.onEvent?(.storeConnected)
            self.synchronize()
        }
        store.onDown = { [weak self] error in self?.onEvent?(.disconnected(from: "store", error)) }
        store.giveUpWhenRefused = false
        gateway.start()
        store.start()
        if tokenStore != nil {
            // Another process (`securepush device login`) may write the token file.
            watcher = loop.schedule(after: .milliseconds(300), repeating: true) { [weak self] in self?.checkTokenFile() }
        }
    }

    public func stop() {
        watcher?.cancel()
        gateway.stop()
        store.stop()
    }

    // MARK: login

    /// LOGIN; on success the token is saved and every kept ID is fetched.
    public func login(user: String, password: [UInt8], completion: @escaping (Result<UInt64, ClientError>) -> Void) {
        store.request(.login(Login(user: user, password: password, deviceID: deviceID))) { [weak self] result in
            guard let self else { return }
            switch result {
            case .success(.loginOK(let ok)):
                self.adopt(TokenStore.Saved(token: ok.token, expiresAt: ok.expiresAt))
                try? self.tokenStore?.save(TokenStore.Saved(token: ok.token, expiresAt: ok.expiresAt))
                self.tokenVersion = self.tokenStore?.version ?? 0
                completion(.success(ok.expiresAt))
            case .success(let other):
                completion(.failure(.unexpectedReply(other.type)))
            case .failure(let error):
                completion(.failure(error))
            }
        }
    }

    public func logout() {
        token = nil
        tokenStore?.remove()
        tokenVersion = tokenStore?.version ?? 0
    }

    private func adopt(_ saved: TokenStore.Saved) {
        token = saved
        onEvent?(.loggedIn(expiresAt: saved.expiresAt))
        for id in pending { process(id) }
        synchronize()
    }

    private func checkTokenFile() {
        guard let tokenStore, tokenStore.version != tokenVersion else { return }
        tokenVersion = tokenStore.version
        if let saved = tokenStore.load(), saved != token {
            adopt(saved)
        } else if tokenStore.load() == nil {
            token = nil
        }
    }

    // MARK: pushes

    private func fromGateway(_ message: Message, correlation: UInt32) {
        switch message {
        case .push(let push):
            onEvent?(.pushReceived(id: push.id, frameBytes: message.encoded(correlation: correlation).count))
            // Record first, then confirm: DELIVERY_ACK means "kept for fetching" ([4.14-2]).
            let id = PayloadID(bytes: push.id)
            if let id, !shown.contains(id), !pending.contains(id) { pending.append(id) }
            gateway.reply(.deliveryAck(DeliveryAck(id: push.id)), correlation: correlation)
            if let id { process(id) }
        case .missed(let missed):
            onEvent?(.missed(missed.missedCount))
            synchronize()
        default:
            break
        }
    }

    private func usableToken() -> [UInt8]? {
        guard let token, token.expiresAt > Clocks.wallMilliseconds() else { return nil }
        return token.token
    }

    /// Shows a kept ID: fetched with the token, or the generic prompt without one.
    private func process(_ id: PayloadID) {
        guard !shown.contains(id), !fetching.contains(id) else { return }
        guard let token = usableToken() else {
            showGeneric(id)
            return
        }
        fetching.insert(id)
        store.request(.fetch(Fetch(id: id, token: token))) { [weak self] result in
            guard let self else { return }
            self.fetching.remove(id)
            switch result {
            case .success(.fetchOK(let fetched)):
                self.markShown(id)
                self.onNotification?(DeviceNotification(id: id, content: .payload(fetched.payload)))
                self.store.request(.ack(Ack(id: id, token: token))) { _ in }
            case .failure(.status(let status, _)) where status == .authRequired || status == .badToken || status == .tokenExpired:
                if self.token?.token == token { self.token = nil }
                self.onEvent?(.tokenRejected(status))
                self.showGeneric(id)
            case .failure(.status(let status, _)) where status == .notFound || status == .gone || status == .forbidden:
                self.pending.removeAll { $0 == id }
                self.onEvent?(.dropped(id, status))
            default:
                break  // connection trouble: the ID stays kept and is retried on reconnect
            }
        }
    }

    private func showGeneric(_ id: PayloadID) {
        guard genericShown.insert(id).inserted else { return }
        onNotification?(DeviceNotification(id: id, content: .generic))
    }

    private func markShown(_ id: PayloadID) {
        pending.removeAll { $0 == id }
        genericShown.remove(id)
        guard shown.insert(id).inserted else { return }
        shownOrder.append(id)
        if shownOrder.count > DeviceClient.rememberedIDs {
            shown.remove(shownOrder.removeFirst())
        }
    }

    // MARK: sync

    /// Asks the store for every unread ID ([4.15-2]) and shows what is new.
    private func synchronize(cursor: UInt64 = 0) {
        guard let token = usableToken(), store.isReady else {
            for id in pending { process(id) }
            return
        }
        guard cursor != 0 || !syncing else { return }
        syncing = true
        store.request(.sync(Sync(token: token, cursor: cursor, limit: 500))) { [weak self] result in
            guard let self else { return }
            switch result {
            case .success(.syncOK(let page)):
                for id in page.ids {
                    if self.shown.contains(id) {
                        // Shown before but the ACK was lost: acknowledge again, do not show again.
                        self.store.request(.ack(Ack(id: id, token: token))) { _ in }
                    } else {
                        if !self.pending.contains(id) { self.pending.append(id) }
                        self.process(id)
                    }
                }
                if page.hasMore {
                    self.synchronize(cursor: page.cursor)
                } else {
                    self.syncing = false
                }
            case .failure(.status(let status, _)) where status == .authRequired || status == .badToken || status == .tokenExpired:
                self.syncing = false
                if self.token?.token == token { self.token = nil }
                self.onEvent?(.tokenRejected(status))
            default:
                self.syncing = false
            }
        }
        for id in pending { process(id) }
    }
}
