import PushWire

/// What a request needs read before `StoreLogic` can decide it. The logic names the keys
/// once the checks that need no reads have passed (a token's signature, the rate
/// limits); the backend reads them all as of one moment: in one read transaction on
/// SQLite, in one statement on PostgreSQL. Keeping the reads out of the logic is what
/// lets a backend answer them later, from another process, without the logic knowing.
public struct StoreReads: Sendable, Equatable {
    /// The current holder of this name.
    public var user: String?
    /// Read the holder's password hash too (LOGIN only).
    public var passwordHash = false
    /// Read the user and the device as they are now, past any cache (LOGIN only).
    public var fresh = false
    /// The enrolled registration of this device id.
    public var device: String?
    /// The payload with this ID.
    public var payload: PayloadID?
    /// Read and open its body too (FETCH only).
    public var body = false
    /// Of the payload only its sequence is needed (ACK: the writer checks the row again in
    /// the transaction that changes it; RECALL reads the row, whose sender decides). A backend that keeps the ID-to-sequence
    /// map in memory answers `StoreReadResult.sequence` from it without reading the row;
    /// another may answer `payload` as usual.
    public var sequenceOnly = false
    /// SYNC's page of ids unread by a device, for the holder of `user`.
    public var unread: UnreadQuery?
    /// REGISTRY's page of changes.
    public var registry: RegistryQuery?
    /// The login limits shared by every store of the database, for (user, address).
    /// A backend serving one store alone answers nil: the store's own memory is exact.
    public var loginLimits: LoginLimitKey?
    /// With `payload`: what became of its push (STATUS only, [4.12-2]).
    public var pushOutcome = false
    /// The earlier SEND with this idempotency key ([4.17-5]).
    public var idempotency: IdempotencyKey?
    /// The provider API token with this id (`APIToken.parse`), revoked or not.
    public var apiToken: String?
    /// The API tokens' change cursor, which every issue and revocation advances in its own
    /// transaction: a store that caches tokens asks it with every request that presents
    /// one, and reads a token's row only when it moved (`APITokenCache`).
    public var apiTokensRevision = false
    /// The devices enrolled for the holder of `user`, with their tags (a SEND to a tag, [4.9-4]).
    public var userDevices = false
    /// The device keys of the holder of `user` and its key cursor (KEYS, [4.18]).
    public var deviceKeys = false

    public init(user: String? = nil, passwordHash: Bool = false, fresh: Bool = false, device: String? = nil, payload: PayloadID? = nil,
                body: Bool = false, sequenceOnly: Bool = false, unread: UnreadQuery? = nil, registry: RegistryQuery? = nil,
                loginLimits: LoginLimitKey? = nil, pushOutcome: Bool = false, idempotency: IdempotencyKey? = nil, apiToken: String? = nil,
                apiTokensRevision: Bool = false, userDevices: Bool = false, deviceKeys: Bool = false) {
        self.deviceKeys = deviceKeys
        self.apiToken = apiToken
        self.apiTokensRevision = apiTokensRevision
        self.userDevices = userDevices
        self.pushOutcome = pushOutcome
        self.idempotency = idempotency
        self.user = user
        self.passwordHash = passwordHash
        self.fresh = fresh
        self.device = device
        self.payload = payload
        self.body = body
        self.sequenceOnly = sequenceOnly
        self.unread = unread
        self.registry = registry
        self.loginLimits = loginLimits
    }
}

/// SYNC's listing ([4.9-1]): ids for the user, of an audience that admits `deviceID`, that
/// it has not acknowledged, newest first, with seq below `before`.
public struct UnreadQuery: Sendable, Equatable {
    public var deviceID: String
    /// The request's cursor: 0 starts a listing, otherwise the seq of the oldest id of the
    /// page before ([4.9-2]).
    public var cursor: UInt64
    public var limit: Int
    public var nowMs: UInt64

    public init(deviceID: String, cursor: UInt64, limit: Int, nowMs: UInt64) {
        self.deviceID = deviceID
        self.cursor = cursor
        self.limit = limit
        self.nowMs = nowMs
    }

    /// The exclusive upper bound on seq: a listing starts above every seq (which are
    /// positive 63-bit numbers, as both databases store them).
    public var before: UInt64 { cursor == 0 || cursor > UInt64(Int64.max) ? UInt64(Int64.max) : cursor }

    /// Only the first page of a listing counts the older ids it leaves out ([4.9-5]): the
    /// count walks them all, once per listing rather than once per page.
    public var countsOlder: Bool { cursor == 0 }
}

/// REGISTRY's listing: at most `limit` changes after `cursor`, fitting `maxBytes`.
public struct RegistryQuery: Sendable, Equatable {
    public var cursor: UInt64
    public var limit: Int
    public var maxBytes: Int

    public init(cursor: UInt64, limit: Int, maxBytes: Int) {
        self.cursor = cursor
        self.limit = limit
        self.maxBytes = maxBytes
    }
}

/// The (user, address) pair the login limits count under; `address` already reduced to
/// its limiting key (`LoginThrottle.addressKey`).
public struct LoginLimitKey: Sendable, Hashable {
    public var user: String
    public var address: String

    /// The user by its exact name ([3.3-8]).
    public static func == (lhs: LoginLimitKey, rhs: LoginLimitKey) -> Bool {
        lhs.user.isExactly(rhs.user) && lhs.address == rhs.address
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(ExactName(user))
        hasher.combine(address)
    }
}

/// What `StoreReads` found: nil where nothing was asked or nothing exists.
public struct StoreReadResult: Sendable, Equatable {
    /// Its `passwordHash` is empty unless it was asked for.
    public var user: UserRecord?
    public var device: EnrolledDevice?
    public var payload: StoredPayload?
    /// The payload's sequence, when `StoreReads.sequenceOnly` was answered from memory.
    public var sequence: UInt64?
    /// Empty when the user does not exist.
    public var unread: UnreadPage?
    public var registry: RegistryPage?
    public var loginLimits: LoginLimitState?
    /// The earlier SEND with the key asked for, if any (expired or not).
    public var idempotency: IdempotencyRecord?
    /// The API token asked for, revoked ones included (`revokedAt` set); nil if unknown.
    public var apiToken: APITokenRecord?
    /// The API tokens' change cursor, when asked (0 before any token was issued).
    public var apiTokensRevision: UInt64?
    /// The devices enrolled for the user asked for, when asked (`StoreReads.userDevices`).
    public var userDevices: [UserDevice]?
    /// The keys of the user asked for, when asked (`StoreReads.deviceKeys`) and the user exists.
    public var deviceKeys: UserKeys?

    /// The sequence of the payload asked for, however it was answered.
    public var payloadSequence: UInt64? { payload?.sequence ?? sequence }

    @inlinable
    public init(user: UserRecord? = nil, device: EnrolledDevice? = nil, payload: StoredPayload? = nil, sequence: UInt64? = nil,
                unread: UnreadPage? = nil, registry: RegistryPage? = nil, loginLimits: LoginLimitState? = nil,
                idempotency: IdempotencyRecord? = nil, apiToken: APITokenRecord? = nil, apiTokensRevision: UInt64? = nil,
                userDevices: [UserDevice]? = nil, deviceKeys: UserKeys? = nil) {
        self.deviceKeys = deviceKeys
        self.userDevices = userDevices
        self.apiTokensRevision = apiTokensRevision
        self.idempotency = idempotency
        self.apiToken = apiToken
        self.user = user
        self.device = device
        self.payload = payload
        self.sequence = sequence
        self.unread = unread
        self.registry = registry
        self.loginLimits = loginLimits
    }
}

/// A persistence failure, for the log; the peer sees INTERNAL_ERROR.
public struct StoreBackendError: Error, Sendable, CustomStringConvertible {
    public var description: String

    public init(_ description: String) { self.description = description }
    public init(_ error: any Error) { description = "\(error)" }
}

/// The store's persistence as its event loop sees it. SQLite: a reader on the loop and a
/// group-commit writer thread. PostgreSQL: connections on the loop. Everything it calls
/// back, it calls on the loop; `StoreLogic` knows none of this.
public protocol StoreBackend: AnyObject {
    /// Reads what `reads` names as of one moment. A backend may call back before returning.
    func read(_ reads: StoreReads, completion: @escaping (Result<StoreReadResult, StoreBackendError>) -> Void)
    /// The same read answered at once, or nil from a backend that answers later: the
    /// server takes this path first, sparing a request the closure `read` needs.
    func readNow(_ reads: StoreReads) -> Result<StoreReadResult, StoreBackendError>?
    /// Queues a write to be made durable together with whatever else is queued (group
    /// commit). Its outcome comes back through `onCommitted` with `ticket`; ticket 0
    /// wants no outcome.
    func submit(_ operation: WriteOperation, ticket: UInt64)
    /// Called on the loop with every group committed (or, with nil outcomes, failed).
    var onCommitted: ((_ tickets: [UInt64], _ outcomes: [WriteOutcome]?) -> Void)? { get set }
    /// A STORE is durable as `sequence` and its ID about to be told to the provider.
    func stored(_ id: PayloadID, sequence: UInt64)
    /// The registry's changes after `cursor`, or nil if there are none.
    func registryNotice(after cursor: UInt64, completion: @escaping (Result<RegistryNotice?, StoreBackendError>) -> Void)
    /// Outbox pushes no gateway has answered, after `cursor` in sequence order, whose
    /// payload is still live: at most `limit` ([4.17-4]). Completion on the loop.
    func waitingPushes(after cursor: UInt64, limit: Int, completion: @escaping (Result<[OutboxEntry], StoreBackendError>) -> Void)
    /// The registry's last change number, at start.
    var registrySequenceAtStart: UInt64 { get }
    /// Whether the login limits live in the database, shared with other stores.
    var sharesLoginLimits: Bool { get }
    /// Commits what is queued and stops; nothing is delivered afterwards.
    func stop()
    /// A graceful stop: waits (on the loop) until what is queued is committed, then stops
    /// and runs `done`. A backend that commits on a thread of its own may run `done` at once:
    /// its `stop` commits what that thread holds.
    func finish(then done: @escaping () -> Void)
    /// What went wrong while stopping, for the log.
    var lastStopProblem: String? { get }
    /// Why writes cannot be made durable right now (a connection down or still connecting),
    /// for readiness; nil when nothing is known to be wrong.
    var problem: String? { get }
    /// When writes were last seen to work (monotonic ms), so that a commit failure before it
    /// is over; nil when only a quiet period ends a failure.
    var writesWorkSinceMs: Int64? { get }
    /// The database, for the log (no password).
    var location: String { get }
    /// The kind of database, for the log: "sqlite" or "postgresql".
    var kind: String { get }
    /// With limits kept in the database (`sharesLoginLimits`): the addresses that have had
    /// `limit` tokens refused, by any store, in the window that started at `windowStart`
    /// and has not ended by `nowMs` ([8-9]).
    func limitedTokenAddresses(limit: Int, windowMs: UInt64, nowMs: UInt64,
                               completion: @escaping (Result<[LimitedAddress], StoreBackendError>) -> Void)
}

/// An address over the BAD_TOKEN limit, from the database every store shares.
public struct LimitedAddress: Sendable, Equatable {
    public var address: String
    public var windowStart: UInt64

    package init(address: String, windowStart: UInt64) {
        self.address = address
        self.windowStart = windowStart
    }
}

extension StoreBackend {
    public func readNow(_ reads: StoreReads) -> Result<StoreReadResult, StoreBackendError>? { nil }

    /// A store alone on its database keeps the limit in its own memory.
    public func limitedTokenAddresses(limit: Int, windowMs: UInt64, nowMs: UInt64,
                                      completion: @escaping (Result<[LimitedAddress], StoreBackendError>) -> Void) {
        completion(.success([]))
    }
}
