import PushClock
import PushEventLoop
import PushSealing
import PushSecurity
import PushSession
import PushWire

/// What one secure send produced: the payload's ID and where the push went.
public struct SendReceipt: Equatable, Sendable {
    public var id: PayloadID
    public var expiresAt: UInt64
    public var delivery: PushAck
}

/// A message sealed to a user's device keys, ready to send.
public struct SealedSecureMessage: Sendable {
    /// The message with the sealed payload (`form` `.sealed`).
    public var message: ProviderClient.SecureMessage
    /// The id the store keeps it under, derived from its seal nonce (7.6-1).
    public var id: PayloadID
    /// The devices it was sealed to, in the order KEYS listed them.
    public var devices: [String]
}

/// The app backend's sending side: SEND to the store, which commits the payload and the
/// push of its ID together and hands the push to its gateway (`sendThroughStore`), or
/// STORE the payload and then PUSH only its ID to a gateway (`send`).
/// Requests are pipelined on one connection to each service, and the connections come
/// back by themselves after a failure, to the next of the endpoint's addresses when it
/// lists several (`ServerLink`).
///
/// A request answered BUSY, RATE_LIMITED or INTERNAL was not carried out and is sent again
/// after a wait (150-250 ms, doubling), at most `retryPolicy.maxAttempts` times in all,
/// then the status is reported ([5.8-4]). A request safe to repeat (KEYS, STATUS, RECALL,
/// a SEND with an idempotency key) lost with its connection, or above a GOAWAY's
/// last_correlation, is sent again on the next connection ([5.8-5]). A STORE, a PUSH or a
/// SEND without a key lost that way fails with `.disconnected` and is not sent again, to
/// that server or another: it may have been carried out, and sending it again would store
/// a second copy the device shows too; the caller decides. Loop-confined.
public final class ProviderClient {
    public struct SecureMessage: Sendable {
        public var recipient: String
        public var payload: [UInt8]
        public var target: PushTarget
        public var ttlSeconds: UInt32 = StoreRequest.defaultTTLSeconds
        public var collapseKey: String?
        public var readOnce = false
        public var alert = true
        public var priority: UInt8 = Push.defaultPriority
        /// What `payload` is ([4.7-5]): plain text the store may read, a payload sealed to the
        /// recipient's device keys (7.6), or text the store seals on arrival ([4.19-6]).
        /// `sealed(_:)` turns a plain message into a sealed one.
        public var form: PayloadForm = .plain

        /// A message for `recipient`, pushed to all of that user's devices unless `target` says otherwise.
        public init(recipient: String, payload: [UInt8], target: PushTarget? = nil) {
            self.recipient = recipient
            self.payload = payload
            self.target = target ?? .user(recipient)
        }
    }

    private let store: ServerLink
    /// Only for `send` and `push`, the two-step way.
    private let gateway: ServerLink?
    /// With `connectWhenNeeded`: which links were started by a first request.
    private var started: Set<ObjectIdentifier> = []
    private let connectWhenNeeded: Bool
    private var stopped = false

    /// How a request answered BUSY, RATE_LIMITED or INTERNAL is retried ([5.8-4]), and how
    /// often one safe to repeat is sent again after its connection was lost ([5.8-5]).
    public struct RetryPolicy: Sendable {
        /// Sends of one request in all, the first included; 1 turns retrying off.
        public var maxAttempts: Int
        /// The first wait's nominal value (drawn between 0.75 and 1.25 times it), doubling.
        public var baseMs: Int64
        public var capMs: Int64

        public init(maxAttempts: Int = 5, baseMs: Int64 = 200, capMs: Int64 = 5_000) {
            self.maxAttempts = max(1, maxAttempts)
            self.baseMs = max(134, baseMs)  // 0.75 of it is still 100 ms
            self.capMs = capMs
        }
    }

    public var retryPolicy = RetryPolicy()
    /// KEYS_OK by user: reused for every payload sealed to her until a STORE_OK or SEND_OK
    /// brings another cursor ([4.18-5]).
    private var keyCache: [String: KeysOK] = [:]
    /// The cached keys checked and parsed for sealing, by user and cursor: a message sealed
    /// to her keys does not check them again.
    private var recipientsCache: [String: (cursor: UInt64, recipients: SealingRecipients)] = [:]
    /// A connection to "store" or "gateway" failed (it is retried unless refused).
    public var onConnectionError: ((String, ClientError) -> Void)? {
        didSet {
            store.onDown = { [weak self] error in self?.onConnectionError?("store", error) }
            gateway?.onDown = { [weak self] error in self?.onConnectionError?("gateway", error) }
        }
    }
    /// Every address of "store" or "gateway" failed in a row (with one address, each
    /// failure): what a one-shot command gives up on. The client keeps retrying.
    public var onUnreachable: ((String, [AddressFailure]) -> Void)? {
        didSet {
            store.onEveryAddressFailed = { [weak self] failures in self?.onUnreachable?("store", failures) }
            gateway?.onEveryAddressFailed = { [weak self] failures in self?.onUnreachable?("gateway", failures) }
        }
    }

    /// The store address connected to, or being tried (the one that failed, in
    /// `onConnectionError`).
    public var storeAddress: HostPort { store.currentAddress }
    /// The gateway address connected to, or being tried.
    public var gatewayAddress: HostPort? { gateway?.currentAddress }

    /// `gateway`: only for `send` and `push`; without it the client talks to the store alone.
    /// `connectWhenNeeded`: each connection is opened by the first request for it, not here.
    public init(loop: EventLoop, store: ServerLink.Endpoint, gateway: ServerLink.Endpoint? = nil, providerKey: SecretKey,
                connectWhenNeeded: Bool = false) {
        let credentials = HelloCredential.provider(providerKey)
        // A fresh credential (a new nonce) for every connection: a server accepts each once.
        func hello(_ audience: CredentialAudience) -> () -> Hello {
            { Hello(role: .provider, credential: credentials.make(for: audience, nowMs: Clocks.wallMilliseconds()), name: "securepush-provider") }
        }
        self.store = ServerLink(loop: loop, endpoint: store, hello: hello(.store))
        self.gateway = gateway.map { ServerLink(loop: loop, endpoint: $0, hello: hello(.gateway)) }
        self.connectWhenNeeded = connectWhenNeeded
        if !connectWhenNeeded {
            self.store.start()
            self.gateway?.start()
        }
    }

    public func stop() {
        stopped = true
        store.stop()
        gateway?.stop()
    }

    /// `link`, started if this is its first request.
    private func opened(_ link: ServerLink) -> ServerLink {
        if connectWhenNeeded, started.insert(ObjectIdentifier(link)).inserted { link.start() }
        return link
    }

    /// Sends `message` on `link`: again after BUSY, RATE_LIMITED or INTERNAL, after a wait,
    /// up to `retryPolicy.maxAttempts` sends ([5.8-4]); and, when `repeatable`, again on the
    /// next connection after it was lost with one ([5.8-5]), as often.
    private func ask(_ link: ServerLink, _ message: Message, repeatable: Bool, completion: @escaping ServerLink.Completion) {
        var backoff = Backoff(baseMs: retryPolicy.baseMs, capMs: retryPolicy.capMs)
        var attempts = 0
        let maxAttempts = retryPolicy.maxAttempts
        func attempt() {
            attempts += 1
            opened(link).request(message) { [weak self] result in
                guard let self, !self.stopped, attempts < maxAttempts else { return completion(result) }
                switch result {
                case .failure(.status(let status, _)) where ProviderClient.isRetryable(status):
                    link.loop.schedule(after: .milliseconds(backoff.next())) { [weak self] in
                        guard let self, !self.stopped else { return completion(.failure(.stopped)) }
                        attempt()
                    }
                case .failure(.disconnected) where repeatable:
                    // On the next turn: a full queue fails a request inside `request` itself.
                    // The link holds it until its next connection is ready.
                    link.loop.schedule(after: .zero) { [weak self] in
                        guard let self, !self.stopped else { return completion(result) }
                        attempt()
                    }
                default:
                    completion(result)
                }
            }
        }
        attempt()
    }

    /// Statuses that say the request was not carried out and may be sent again ([5.8-4]).
    static func isRetryable(_ status: Status) -> Bool {
        status == .busy || status == .rateLimited || status == .internalError
    }

    /// The deadlines of both connections (HELLO_OK, a started frame). A change applies from
    /// the next connection on; set it right after `init` to cover the first one.
    public var timeouts: SessionTimeouts {
        get { store.timeouts }
        set {
            store.timeouts = newValue
            gateway?.timeouts = newValue
        }
    }

    /// SEND: one request to the store, answered once the payload and the push of its ID
    /// are durable together; the store hands the push to its gateway (SPEC.md 4.17). With an
    /// idempotency key, a retry after a lost reply is answered with the first SEND's id
    /// instead of storing a second copy.
    public func sendThroughStore(_ message: SecureMessage, idempotencyKey: String? = nil,
                                 completion: @escaping (Result<SendOK, ClientError>) -> Void) {
        let request = SendRequest(user: message.recipient, payload: message.payload, form: message.form, ttlSeconds: message.ttlSeconds,
                                  readLimit: message.readOnce ? 1 : 0,
                                  target: message.target == .user(message.recipient) ? nil : message.target,
                                  alert: message.alert, priority: message.priority, collapseKey: message.collapseKey,
                                  idempotencyKey: idempotencyKey)
        ask(store, .send(request), repeatable: idempotencyKey != nil) { [weak self] result in
            switch result {
            case .success(.sendOK(let ok)):
                self?.noteCursor(ok.cursor, of: message.recipient)
                completion(.success(ok))
            case .success(let other): completion(.failure(.unexpectedReply(other.type)))
            case .failure(let error): completion(.failure(error))
            }
        }
    }

    /// STORE, and once the store has made it durable, PUSH its ID to the target: needs the
    /// gateway given at `init`.
    public func send(_ message: SecureMessage, completion: @escaping (Result<SendReceipt, ClientError>) -> Void) {
        guard gateway != nil else { return completion(.failure(.stopped)) }
        store(message) { [weak self] result in
            switch result {
            case .success(let stored):
                guard let self else { return completion(.failure(.stopped)) }
                let push = Push(target: message.target, id: stored.id.bytes, alert: message.alert, priority: message.priority,
                                collapseKey: message.collapseKey, ttlSeconds: message.ttlSeconds)
                self.push(push) { result in
                    completion(result.map { SendReceipt(id: stored.id, expiresAt: stored.expiresAt, delivery: $0) })
                }
            case .failure(let error):
                completion(.failure(error))
            }
        }
    }

    /// STORE alone: the payload is kept for its recipient's devices, and nothing is pushed.
    public func store(_ message: SecureMessage, completion: @escaping (Result<StoreOK, ClientError>) -> Void) {
        let request = StoreRequest(user: message.recipient, payload: message.payload, form: message.form,
                                   ttlSeconds: message.ttlSeconds, readLimit: message.readOnce ? 1 : 0)
        ask(store, .store(request), repeatable: false) { [weak self] result in
            switch result {
            case .success(.storeOK(let stored)):
                self?.noteCursor(stored.cursor, of: message.recipient)
                completion(.success(stored))
            case .success(let other): completion(.failure(.unexpectedReply(other.type)))
            case .failure(let error): completion(.failure(error))
            }
        }
    }

    /// PUSH alone, of an id stored before: needs the gateway given at `init`.
    public func push(_ push: Push, completion: @escaping (Result<PushAck, ClientError>) -> Void) {
        guard let gateway else { return completion(.failure(.stopped)) }
        ask(gateway, .push(push), repeatable: false) { result in
            switch result {
            case .success(.pushAck(let ack)): completion(.success(ack))
            case .success(let other): completion(.failure(.unexpectedReply(other.type)))
            case .failure(let error): completion(.failure(error))
            }
        }
    }

    // MARK: sealing

    /// The current device keys of `user` (KEYS, [4.18-1]), from the cache unless `refresh`
    /// or a reply since showed it stale. A store that answers UNKNOWN_TYPE is of a revision
    /// before 1.5: `.storeCannotSeal`.
    public func keys(for user: String, refresh: Bool = false, completion: @escaping (Result<KeysOK, ClientError>) -> Void) {
        if !refresh, let cached = keyCache[user] { return completion(.success(cached)) }
        ask(store, .keys(Keys(user: user)), repeatable: true) { [weak self] result in
            switch result {
            case .success(.keysOK(let keys)):
                self?.keyCache[user] = keys
                completion(.success(keys))
            case .success(let other): completion(.failure(.unexpectedReply(other.type)))
            case .failure(.status(.unknownType, _)): completion(.failure(.storeCannotSeal))
            case .failure(let error): completion(.failure(error))
            }
        }
    }

    /// `message`'s text sealed (7.6) to the recipient's current device keys, with the id the store
    /// will keep it under (7.6-1); send it with `sendThroughStore` or `send`. No device of
    /// hers has a key: `.sealing(.noDevices)`.
    public func sealed(_ message: SecureMessage, completion: @escaping (Result<SealedSecureMessage, ClientError>) -> Void) {
        keys(for: message.recipient) { result in
            switch result {
            case .success(let keys):
                do throws(SealingError) {
                    let recipients = try self.recipients(message.recipient, keys)
                    let sealed = try Sealer.seal(message.payload, to: recipients)
                    var out = message
                    out.payload = sealed.bytes
                    out.form = .sealed
                    completion(.success(SealedSecureMessage(message: out, id: sealed.id, devices: keys.keys.map(\.deviceID))))
                } catch {
                    completion(.failure(.sealing(error)))
                }
            case .failure(let error):
                completion(.failure(error))
            }
        }
    }

    private func recipients(_ user: String, _ keys: KeysOK) throws(SealingError) -> SealingRecipients {
        if let cached = recipientsCache[user], cached.cursor == keys.cursor { return cached.recipients }
        let recipients = try SealingRecipients(recipient: user, devices: keys.keys)
        recipientsCache[user] = (keys.cursor, recipients)
        return recipients
    }

    /// A STORE_OK or SEND_OK of a sealed payload carries the recipient's key cursor: another
    /// than the cached one means a device was enrolled, revoked or re-keyed since the keys
    /// were read, so they are read again before the next payload sealed to her ([4.18-5]).
    private func noteCursor(_ cursor: UInt64?, of user: String) {
        guard let cursor, let cached = keyCache[user], cached.cursor != cursor else { return }
        keyCache[user] = nil
    }

    /// The cursor of the keys cached for `user`, if any.
    public func cachedKeyCursor(of user: String) -> UInt64? { keyCache[user]?.cursor }

    /// Makes a payload gone before it is read.
    public func recall(_ id: PayloadID, completion: @escaping (Result<Void, ClientError>) -> Void) {
        ask(store, .recall(Recall(id: id)), repeatable: true) { result in
            switch result {
            case .success(.recallOK): completion(.success(()))
            case .success(let other): completion(.failure(.unexpectedReply(other.type)))
            case .failure(let error): completion(.failure(error))
            }
        }
    }

    public func status(_ id: PayloadID, completion: @escaping (Result<StatusOK, ClientError>) -> Void) {
        ask(store, .status(StatusRequest(id: id)), repeatable: true) { result in
            switch result {
            case .success(.statusOK(let status)): completion(.success(status))
            case .success(let other): completion(.failure(.unexpectedReply(other.type)))
            case .failure(let error): completion(.failure(error))
            }
        }
    }
}
