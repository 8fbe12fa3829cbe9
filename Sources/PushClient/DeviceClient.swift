import PushClock
import PushEventLoop
import PushSealing
import PushSecurity
import PushSession
import PushWire

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

/// A failure the device cannot get past by retrying: which service, where, and why.
public struct PermanentFailure: Error, Equatable, Sendable, CustomStringConvertible {
    /// "gateway" or "store".
    public var service: String
    public var address: HostPort
    public var error: ClientError

    public init(service: String, address: HostPort, error: ClientError) {
        self.service = service
        self.address = address
        self.error = error
    }

    public var description: String { "the \(service) at \(address): \(error)" }
}

public enum DeviceEvent: Equatable, Sendable {
    /// A PUSH arrived: what travelled on the push path (the ID and the frame's size).
    case pushReceived(id: [UInt8], frameBytes: Int)
    case gatewayConnected
    case storeConnected
    /// A connection went down, or a connect failed, for a reason that may pass: the
    /// device retries with backoff. Reported for every failed attempt.
    case disconnected(from: String, ClientError)
    /// A failure retrying cannot cure (`ClientError.isPermanent`): a registration the
    /// gateway refuses (BAD_CREDENTIALS: bad, expired, not enrolled or revoked) or revokes
    /// while connected (GOAWAY REVOKED), a certificate that does not verify, TLS on one
    /// side only. The device has stopped; nothing else is reported after this.
    case stopped(PermanentFailure)
    /// The gateway dropped pushes; the device SYNCs with the store.
    case missed(UInt32)
    /// A SYNC listed the newest unread IDs and this many older ones it did not list
    /// ([4.9-5]): they are not shown now, and are listed by later SYNCs once the newer
    /// ones are acknowledged.
    case olderNotListed(UInt32)
    case loggedIn(expiresAt: UInt64)
    /// The store refused the token (expired, rejected or absent); log in again.
    case tokenRejected(Status)
    /// A kept ID can never be shown (not found, gone, or not this user's).
    case dropped(PayloadID, Status)
    /// A shown ID could not be written to the state directory: a restart with it may
    /// show that payload again.
    case shownNotSaved(ShownIDFile.Failure)
    /// A sealed payload this device cannot read: the store holds no stanza for its key
    /// (`reason` nil: NOT_SEALED_FOR_DEVICE, it was sealed before this key was registered),
    /// or the view did not open (`reason` says which check of 7.6-5 failed). The generic
    /// prompt was shown for it, once, and it is not acknowledged ([4.14-10]).
    case sealedNotOpened(PayloadID, reason: SealingError?)
    /// The device's key file could not be read: sealed payloads show the generic prompt.
    case deviceKeyUnusable(DeviceKeyFile.Failure)
}

/// The device side of secure push: pushes from the gateway carry only IDs; the
/// device fetches each payload from the store with its fetch token, acknowledges it, and
/// hands the app a notification. Without a usable token it shows the generic prompt,
/// keeps the ID, and fetches after the next login.
///
/// The store is the source of truth: the device SYNCs with it after every store connect,
/// after every gateway connect (a gateway that crashed lost its queue and the pushes in
/// flight) and on MISSED, so a lost push only delays a message. Every ID is shown at most
/// once for the life of the object, however often pushes and SYNC name it, and, with a
/// `ShownIDFile`, for the life of its state directory. A backlog is
/// fetched `fetchWindow` FETCHes at a time. Loop-confined.
///
/// The store endpoint may list several stores over one database: the store link moves to
/// the next one when its store fails (`ServerLink`), and the HELLO_OK there brings a SYNC
/// like any store connect. What was shown is remembered by this object, not by a
/// connection, so a FETCH or a SYNC repeated on another store never shows an ID again,
/// and a FETCH whose reply was lost with its store is asked again of the next one.
///
/// The gateway endpoint may list several gateways (the nodes of a cluster): the gateway
/// link moves to the next when its gateway is refused, drops, or drains (GOAWAY
/// SHUTTING_DOWN), and the HELLO_OK there brings a SYNC, which finds what the lost node
/// held. GOAWAY REPLACED does not move it: another connection with this device id is the
/// newer one, and moving would only replace that one in turn.
///
/// Connections that fail for a reason that may pass (refused, lost, a server shutting
/// down) are retried with backoff and reported as `.disconnected`. A failure retrying
/// cannot cure (`ClientError.isPermanent`: a registration the gateway refuses or revokes,
/// a certificate that does not verify, TLS on one side only, another connection taking
/// over this device id) stops the device and is reported once, as `.stopped`.
public final class DeviceClient {
    public static let genericText = "New notification - log in to view"
    /// IDs remembered as shown, so a redelivered push or a SYNC that lists an ID again
    /// (its ACK not yet durable) does not show it twice. Bounded: about 5 MB at most.
    public static let rememberedIDs = 100_000
    /// FETCHes in flight at once.
    public static let fetchWindow = 32
    /// IDs a SYNC asks for: the newest this many unread are shown at once; older ones are
    /// counted, not listed ([4.9-5]).
    static let syncPageSize: UInt32 = 500
    /// The first wait before asking again after the store answered with a failure that is
    /// not about the token or the payload (BUSY, RATE_LIMITED, INTERNAL): at least 100 ms with
    /// its jitter ([5.8-4]), doubling up to `retryCapMs` while the failures go on.
    static let retryBaseMs: Int64 = 200
    static let retryCapMs: Int64 = 5_000

    public let deviceID: String
    public var onNotification: ((DeviceNotification) -> Void)?
    public var onEvent: ((DeviceEvent) -> Void)?

    private let loop: EventLoop
    private let gateway: ServerLink
    private let store: ServerLink
    private let tokenStore: TokenStore?
    private let shownFile: ShownIDFile?
    private let genericFile: ShownIDFile?
    private let keyFile: DeviceKeyFile?
    /// The user of the registration: sealed payloads are bound to it (7.6-3, 7.6-4).
    private let user: String?
    private var deviceKey: DeviceKeyPair?
    private var keyVersion = 0
    /// Shown ids that must not be acknowledged: sealed payloads this device could not read
    /// ([4.14-10]). A SYNC lists them again; they are neither shown nor acknowledged.
    private var unacknowledged: Set<PayloadID> = []
    private var token: TokenStore.Saved?
    private var tokenVersion = 0
    private var shown = ShownIDs(capacity: DeviceClient.rememberedIDs)
    /// IDs shown as the generic notification, never shown that way again ([4.14-11]).
    private var genericShown = ShownIDs(capacity: DeviceClient.rememberedIDs)
    /// Kept IDs to fetch, oldest first; `waitingSet` mirrors it.
    private var waiting = IDQueue()
    private var fetching: Set<PayloadID> = []
    /// Kept IDs whose FETCH failed for a reason a retry may cure; back to `waiting` at the retry.
    private var deferred: [PayloadID] = []
    private var acking: Set<PayloadID> = []
    /// Shown IDs whose ACK is to be sent again: lost with a connection (on the next one,
    /// [5.8-5]) or answered BUSY and the like (at the retry, [5.8-4]).
    private var ackAgain = IDQueue()
    /// The wait before the next retry of what the store answered BUSY and the like.
    private var retryBackoff = Backoff(baseMs: DeviceClient.retryBaseMs, capMs: DeviceClient.retryCapMs)
    private var syncing = false
    /// A SYNC was asked for while one was running: run another once it ends, so what was
    /// stored before the request is listed.
    private var syncAgain = false
    private var retryTimer: LoopTimer?
    private var watcher: LoopTimer?
    private var stopped = false

    /// - Parameters:
    ///   - registration: the credential `securepush device enroll` issued.
    ///   - tokenStore: where the fetch token lives; nil keeps it in memory only.
    ///   - shownFile: where the ids shown are remembered across restarts; nil, in memory only.
    ///   - genericFile: where the ids shown as the generic notification are remembered across
    ///     restarts (and fetched after them once there is a token); nil, in memory only.
    ///   - keyFile: the device's key for sealed payloads (7.5-6), read again when another
    ///     process writes it; `login` makes one when there is none. Nil: no key, and every
    ///     sealed payload shows the generic prompt.
    public init(loop: EventLoop, gateway: ServerLink.Endpoint, store: ServerLink.Endpoint, registration: [UInt8],
                deviceID: String, tokenStore: TokenStore?, shownFile: ShownIDFile? = nil, keyFile: DeviceKeyFile? = nil,
                genericFile: ShownIDFile? = nil) {
        self.loop = loop
        self.deviceID = deviceID
        self.tokenStore = tokenStore
        self.shownFile = shownFile
        self.genericFile = genericFile
        self.keyFile = keyFile
        self.user = Registration.readUnverified(registration)?.user
        for entry in shownFile?.loadEntries() ?? [] {
            shown.insert(entry.id)
            if !entry.acknowledged { unacknowledged.insert(entry.id) }
        }
        // Shown as the generic prompt before a restart and not with content since: not
        // prompted for again, and fetched once there is a token ([4.14-13]).
        for id in genericFile?.load() ?? [] where !shown.contains(id) {
            genericShown.insert(id)
            waiting.append(id)
        }
        self.gateway = ServerLink(loop: loop, endpoint: gateway) { Hello(role: .device, credential: registration, name: "securepush-device") }
        let issuedAt = Registration.readUnverified(registration)?.issuedAt
        self.gateway.mayPass = { error in DeviceClient.mayBeUnheardEnrolment(error, issuedAt: issuedAt, nowMs: Clocks.wallMilliseconds()) }
        self.deviceKey = try? keyFile?.load()
        self.keyVersion = keyFile?.version ?? 0
        let suite = deviceKey?.suite
        self.store = ServerLink(loop: loop, endpoint: store) { DeviceLogin.hello(keySuite: suite) }
        self.token = tokenStore?.load()
        self.tokenVersion = tokenStore?.version ?? 0
    }

    /// IDs received but not yet shown with their content.
    public var keptIDs: [PayloadID] { Array(waiting.ids) + Array(fetching) + deferred }
    public var hasToken: Bool { token != nil }
    /// The store address connected to, or being tried: one of the store endpoint's addresses.
    public var storeAddress: HostPort { store.currentAddress }
    /// The gateway address connected to, or being tried.
    public var gatewayAddress: HostPort { gateway.currentAddress }

    public func start() {
        gateway.onReady = { [weak self] in
            guard let self else { return }
            self.onEvent?(.gatewayConnected)
            // Pushes the last gateway connection lost (a crash loses its queue) are in the store.
            self.synchronize()
        }
        gateway.onServerMessage = { [weak self] message, correlation in self?.fromGateway(message, correlation: correlation) }
        gateway.onDown = { [weak self] error in self?.linkDown("gateway", error) }
        store.onReady = { [weak self] in
            guard let self else { return }
            self.onEvent?(.storeConnected)
            self.acknowledgeAgain()
            self.synchronize()
        }
        store.onDown = { [weak self] error in self?.linkDown("store", error) }
        gateway.start()
        store.start()
        if tokenStore != nil {
            // Another process (`securepush device login`) may write the token file.
            watcher = loop.schedule(after: .milliseconds(300), repeating: true) { [weak self] in self?.checkTokenFile() }
        }
    }

    /// How long after its enrolment a registration the gateway calls "not enrolled" is
    /// tried again: the store tells a following gateway of a change within a second
    /// ([4.16-8]), and the gateway's own round trip and clock skew take some more.
    public static let enrolmentPropagationMs: UInt64 = 5_000

    /// A gateway refuses a registration it has not heard of as not enrolled, for good, a
    /// moment after `securepush device enroll` made it as much as after a revocation. Our
    /// gateway says so (`Registration.notEnrolledReply`); while the registration is younger
    /// than `enrolmentPropagationMs`, that refusal is retried rather than final.
    static func mayBeUnheardEnrolment(_ error: ClientError, issuedAt: UInt64?, nowMs: UInt64) -> Bool {
        guard case .refused(.badCredentials, Registration.notEnrolledReply?) = error, let issuedAt else { return false }
        return nowMs < issuedAt &+ enrolmentPropagationMs
    }

    /// A link went down: retried as it is, or, for a permanent failure, the end of the device.
    private func linkDown(_ service: String, _ error: ClientError) {
        guard !stopped else { return }
        let link = service == "gateway" ? gateway : store
        guard link.stopsFor(error) else {
            onEvent?(.disconnected(from: service, error))
            return
        }
        let address = service == "gateway" ? gateway.currentAddress : store.currentAddress
        stop()
        onEvent?(.stopped(PermanentFailure(service: service, address: address, error: error)))
    }

    public func stop() {
        stopped = true
        watcher?.cancel()
        retryTimer?.cancel()
        retryTimer = nil
        gateway.stop()
        store.stop()
    }

    // MARK: login

    /// LOGIN with the device's public key (4.6-5), made first when the key file has none
    /// and saved once LOGIN_OK names it;
    /// on success the token is saved and every kept ID is fetched. A LOGIN_OK naming
    /// another key fails with `.keyIDMismatch` and its token is not kept (4.6-8).
    public func login(user: String, password: [UInt8], completion: @escaping (Result<UInt64, ClientError>) -> Void) {
        var made = false
        if let keyFile {
            do {
                (deviceKey, made) = try keyFile.keyForLogin()
                keyVersion = keyFile.version
            } catch {
                onEvent?(.deviceKeyUnusable(error))
            }
        }
        let key = deviceKey
        store.request(.login(DeviceLogin.request(user: user, password: password, deviceID: deviceID, key: key))) { [weak self] result in
            guard let self else { return }
            switch result {
            case .success(.loginOK(let ok)):
                do throws(ClientError) {
                    _ = try DeviceLogin.check(ok, deviceID: self.deviceID, key: key)
                } catch {
                    return completion(.failure(error))
                }
                if made, let key, let keyFile = self.keyFile {
                    // Saved once the store has registered it, as `device login` does.
                    do throws(DeviceKeyFile.Failure) {
                        try keyFile.save(key)
                        self.keyVersion = keyFile.version
                    } catch {
                        self.onEvent?(.deviceKeyUnusable(error))
                    }
                }
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

    /// A new token: the next successful login ([4.14-13]): every kept id is fetched with it,
    /// those shown as the generic prompt among them, and ACKs waiting for a token are sent.
    private func adopt(_ saved: TokenStore.Saved) {
        token = saved
        onEvent?(.loggedIn(expiresAt: saved.expiresAt))
        acknowledgeAgain()
        synchronize()
    }

    /// Reads the key file again if another process wrote it since (`device login --new-key`):
    /// the new key opens what is sealed from then on. True if it was read again.
    @discardableResult
    private func reloadKeyIfChanged() -> Bool {
        guard let keyFile, keyFile.version != keyVersion else { return false }
        keyVersion = keyFile.version
        do {
            deviceKey = try keyFile.load()
        } catch {
            deviceKey = nil
            onEvent?(.deviceKeyUnusable(error))
        }
        return true
    }

    private func checkTokenFile() {
        reloadKeyIfChanged()
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
            if let id { keep(id) }
            gateway.reply(.deliveryAck(DeliveryAck(id: push.id)), correlation: correlation)
            fetchKept()
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

    /// Keeps an ID for fetching unless it was shown or is already kept.
    private func keep(_ id: PayloadID) {
        guard !shown.contains(id), !fetching.contains(id), !waiting.contains(id), !deferred.contains(id) else { return }
        waiting.append(id)
    }

    /// Fetches kept IDs while fewer than `fetchWindow` are in flight; without a usable
    /// token shows the generic prompt for each instead, once.
    private func fetchKept() {
        guard !stopped else { return }
        guard let token = usableToken() else {
            for id in waiting.ids { showGeneric(id) }
            for id in deferred { showGeneric(id) }
            return
        }
        // Not ready: the store's next HELLO_OK brings a SYNC and this call again.
        guard store.isReady else { return }
        while fetching.count < DeviceClient.fetchWindow, let id = waiting.popFirst() {
            fetch(id, token: token)
        }
    }

    private func fetch(_ id: PayloadID, token: [UInt8]) {
        fetching.insert(id)
        store.request(.fetch(Fetch(id: id, token: token))) { [weak self] result in
            guard let self else { return }
            self.fetching.remove(id)
            guard !self.stopped else { return }
            switch result {
            case .success(.fetchOK(let fetched)) where fetched.sealed:
                self.succeeded()
                var opened = self.open(fetched.payload, id: id)
                // `device login --new-key` in another process may have registered a key this
                // object has not read yet (the file is checked every 300 ms): read it now
                // rather than show this payload as unreadable for good.
                if case .failure = opened, self.reloadKeyIfChanged() { opened = self.open(fetched.payload, id: id) }
                switch opened {
                case .success(let text):
                    self.markShown(id)
                    self.onNotification?(DeviceNotification(id: id, content: .payload(text)))
                    self.acknowledge(id, token: token)
                case .failure(let error):
                    self.notOpened(id, reason: error)
                }
            case .success(.fetchOK(let fetched)):
                self.succeeded()
                self.markShown(id)
                self.onNotification?(DeviceNotification(id: id, content: .payload(fetched.payload)))
                self.acknowledge(id, token: token)
            case .failure(.status(.notSealedForDevice, _)):
                self.notOpened(id, reason: nil)
            case .failure(.status(let status, _)) where DeviceClient.isTokenRefusal(status):
                self.waiting.append(id)
                self.tokenRefused(token, status)
            case .failure(.status(let status, _)) where status == .notFound || status == .gone || status == .forbidden:
                self.onEvent?(.dropped(id, status))
            case .failure(.disconnected), .failure(.stopped):
                // Lost with its connection (dropped, or above a GOAWAY's last_correlation):
                // fetched again on the next one, whatever its SYNC lists ([5.8-5]).
                self.waiting.append(id)
            default:
                // BUSY, RATE_LIMITED, INTERNAL and the like: not carried out, asked again
                // after a wait; never the generic prompt for it ([5.8-4]).
                self.deferred.append(id)
                self.retryLater()
            }
            self.fetchKept()
        }
    }

    /// The text of a sealed device view, after every check of 7.6-5.
    private func open(_ view: [UInt8], id: PayloadID) -> Result<[UInt8], SealingError> {
        guard let deviceKey, let user else { return .failure(.notForThisKey) }
        return Result { () throws(SealingError) in
            try Opener.open(view, fetchedID: id, user: user, deviceID: deviceID, key: deviceKey)
        }
    }

    /// A sealed payload this device cannot read ([4.14-10]): the generic prompt once, the id
    /// remembered as shown (not shown again after a restart either), and no ACK, which would
    /// count this device as a reader of a payload it never read.
    private func notOpened(_ id: PayloadID, reason: SealingError?) {
        unacknowledged.insert(id)
        let alreadyPrompted = genericShown.contains(id)
        markShown(id, acknowledged: false)
        // Why, before the prompt itself: whoever watches the prompt finds the reason said.
        onEvent?(.sealedNotOpened(id, reason: reason))
        if !alreadyPrompted { onNotification?(DeviceNotification(id: id, content: .generic)) }
    }

    private static func isTokenRefusal(_ status: Status) -> Bool {
        status == .authRequired || status == .badToken || status == .tokenExpired
    }

    /// The store refused `refused`: forget it if it is still ours, and say so once.
    private func tokenRefused(_ refused: [UInt8], _ status: Status) {
        guard token?.token == refused else { return }
        token = nil
        onEvent?(.tokenRejected(status))
    }

    /// ACK of a shown id. One lost with its connection is sent again on the next ([5.8-5]),
    /// one answered BUSY and the like after the retry wait ([5.8-4]); one refused for its
    /// token waits for the next login, whose SYNC lists the id again.
    private func acknowledge(_ id: PayloadID, token: [UInt8]) {
        guard acking.insert(id).inserted else { return }
        store.request(.ack(Ack(id: id, token: token))) { [weak self] result in
            guard let self else { return }
            self.acking.remove(id)
            guard !self.stopped else { return }
            switch result {
            case .success:
                self.succeeded()
            case .failure(.status(let status, _)) where DeviceClient.isTokenRefusal(status):
                self.tokenRefused(token, status)
            case .failure(.status(let status, _)) where status == .notFound || status == .gone || status == .forbidden:
                break
            case .failure(.disconnected):
                // The store's next HELLO_OK sends it (not now: this may run inside `request`).
                self.ackAgain.append(id)
            case .failure(.stopped):
                break
            default:
                self.ackAgain.append(id)
                self.retryLater()
            }
        }
    }

    /// Sends the ACKs waiting in `ackAgain`, when the store is connected and the token usable.
    private func acknowledgeAgain() {
        guard !stopped, store.isReady, let token = usableToken() else { return }
        while let id = ackAgain.popFirst() { acknowledge(id, token: token) }
    }

    /// The generic prompt for `id`, at most once, recorded before it is shown ([4.14-11]).
    private func showGeneric(_ id: PayloadID) {
        guard genericShown.insert(id) else { return }
        if let genericFile {
            do {
                try genericFile.append(id) { genericShown.oldestFirst }
            } catch {
                onEvent?(.shownNotSaved(error))
            }
        }
        onNotification?(DeviceNotification(id: id, content: .generic))
    }

    /// A request to the store was carried out: the retry wait starts over, unless a retry
    /// is still waiting.
    private func succeeded() {
        if retryTimer == nil, deferred.isEmpty { retryBackoff.reset() }
    }

    private func markShown(_ id: PayloadID, acknowledged: Bool = true) {
        guard shown.insert(id), let shownFile else { return }
        do {
            try shownFile.append(id, acknowledged: acknowledged) {
                shown.oldestFirst.map { ShownIDFile.Entry(id: $0, acknowledged: !unacknowledged.contains($0)) }
            }
        } catch {
            onEvent?(.shownNotSaved(error))
        }
    }

    private func retryLater() {
        guard retryTimer == nil, !stopped else { return }
        retryTimer = loop.schedule(after: .milliseconds(retryBackoff.next())) { [weak self] in
            guard let self else { return }
            self.retryTimer = nil
            for id in self.deferred { self.waiting.append(id) }
            self.deferred = []
            self.acknowledgeAgain()
            if self.syncAgain, !self.syncing { self.synchronize() }
            self.fetchKept()
        }
    }

    // MARK: sync

    /// Asks the store for its newest unread IDs ([4.15-2]), one page, and fetches what is
    /// new; the store counts the older ones it left out, which the device reports rather
    /// than pulls ([4.9-5]). From a 1.3 store (no count, oldest first) it pages on to the
    /// end, as 1.3 devices do. A request while a SYNC runs starts another one after it.
    private func synchronize() {
        guard !stopped, let token = usableToken(), store.isReady else { return fetchKept() }
        guard !syncing else {
            syncAgain = true
            return
        }
        syncing = true
        syncAgain = false
        syncPage(after: 0, token: token)
        fetchKept()
    }

    private func syncPage(after cursor: UInt64, token: [UInt8]) {
        store.request(.sync(Sync(token: token, cursor: cursor, limit: DeviceClient.syncPageSize))) { [weak self] result in
            guard let self, !self.stopped else { return }
            switch result {
            case .success(.syncOK(let page)):
                self.succeeded()
                // Newest first: kept oldest first, so a page is shown in the order it was sent.
                for id in page.ids.reversed() {
                    if self.unacknowledged.contains(id) {
                        // A sealed payload this device cannot read: never acknowledged ([4.14-10]).
                        continue
                    } else if self.shown.contains(id) {
                        // Shown before but the ACK was not durable: acknowledge again, do not show again.
                        self.acknowledge(id, token: token)
                    } else {
                        self.keep(id)
                    }
                }
                self.fetchKept()
                if page.olderCount > 0 {
                    self.onEvent?(.olderNotListed(page.olderCount))
                } else if page.hasMore, page.cursor != cursor {
                    // No count with more to list: a 1.3 store, which lists oldest first.
                    return self.syncPage(after: page.cursor, token: token)
                }
            case .failure(.status(let status, _)) where DeviceClient.isTokenRefusal(status):
                self.tokenRefused(token, status)
                self.fetchKept()
            case .failure(.disconnected):
                // The store's next HELLO_OK starts a SYNC again.
                break
            default:
                self.syncAgain = true
                self.retryLater()
                self.syncing = false
                return
            }
            self.syncing = false
            if self.syncAgain { self.synchronize() }
        }
    }
}

/// IDs in arrival order with constant-time membership; a backlog holds thousands.
struct IDQueue {
    private var items: [PayloadID] = []
    private var head = 0
    private var members: Set<PayloadID> = []

    var isEmpty: Bool { head == items.count }
    var ids: ArraySlice<PayloadID> { items[head...] }

    func contains(_ id: PayloadID) -> Bool { members.contains(id) }

    mutating func append(_ id: PayloadID) {
        guard members.insert(id).inserted else { return }
        items.append(id)
    }

    mutating func popFirst() -> PayloadID? {
        guard head < items.count else { return nil }
        let id = items[head]
        head += 1
        members.remove(id)
        if head == items.count {
            items.removeAll(keepingCapacity: items.count < 4096)
            head = 0
        } else if head >= 4096, head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
        return id
    }
}

/// The most recent `capacity` IDs shown; the oldest is forgotten first.
struct ShownIDs {
    let capacity: Int
    private var members: Set<PayloadID> = []
    private var ring: [PayloadID] = []
    private var oldest = 0

    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    func contains(_ id: PayloadID) -> Bool { members.contains(id) }

    /// True if `id` was not remembered yet.
    @discardableResult
    mutating func insert(_ id: PayloadID) -> Bool {
        guard members.insert(id).inserted else { return false }
        if ring.count < capacity {
            ring.append(id)
        } else {
            members.remove(ring[oldest])
            ring[oldest] = id
            oldest = (oldest + 1) % capacity
        }
        return true
    }

    var oldestFirst: [PayloadID] { Array(ring[oldest...] + ring[..<oldest]) }
}
