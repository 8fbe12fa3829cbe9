import PushWire

/// What happened to a payload, as persisted.
public enum PayloadLife: Int64, Sendable {
    case live = 1
    case recalled = 2
    /// Its read limit was reached; the body is gone.
    case readOut = 3
    /// Past its TTL and swept; the body is gone.
    case expired = 4

    /// How long an emptied row is kept so FETCH can still say GONE rather than NOT_FOUND.
    public static let tombstoneRetentionMs: UInt64 = 7 * 24 * 3600 * 1000

    /// Whether the read receipt that brings a payload's count to `readCount` reads it out
    /// ([4.10-1]): a read limit (0: none) is reached, and the body is erased.
    public static func readsOut(readCount: Int64, readLimit: Int64) -> Bool { readLimit > 0 && readCount >= readLimit }

    /// What a read receipt from `deviceID`'s holder `userID` does to the payload `row`
    /// ([4.9-4], [4.10-1], [4.10-2]): the one place the rule is decided; every backend
    /// binds the answer. FORBIDDEN for another user's payload or a device outside its
    /// audience; nothing for a device that acknowledged it before or for a payload already
    /// gone (SYNC lists it no more, and a repeated ACK succeeds); the receipt that reaches
    /// the read limit makes the payload gone and erases its body without a receipt row of
    /// its own (nothing lists a gone payload); any other adds the receipt and counts it.
    public static func receipt(on row: ReceiptRow, from userID: UInt64) -> ReceiptWrite {
        guard row.owner == userID, row.admitsDevice else { return .refused(.forbidden) }
        guard row.life == .live, !row.acknowledged else { return .unchanged }
        let count = row.readCount + 1
        return readsOut(readCount: count, readLimit: row.readLimit) ? .readOut(readCount: count) : .counted(readCount: count)
    }

    /// The life once a sweep at `nowMs` has passed: a live payload past its TTL is
    /// `.expired` (and its body erased). FETCH treats it so before the sweep gets to it.
    public func afterSweep(expiresAt: UInt64, nowMs: UInt64) -> PayloadLife {
        self == .live && expiresAt <= nowMs ? .expired : self
    }
}

/// A payload's row as a read receipt finds it: what `PayloadLife.receipt` decides from.
public struct ReceiptRow: Sendable, Equatable {
    /// The recipient's internal id.
    public var owner: UInt64
    /// Whether its audience holds the acknowledging device ([4.9-4]).
    public var admitsDevice: Bool
    public var life: PayloadLife
    /// 0: no limit.
    public var readLimit: Int64
    public var readCount: Int64
    /// Whether the acknowledging device's receipt is recorded already.
    public var acknowledged: Bool

    public init(owner: UInt64, admitsDevice: Bool, life: PayloadLife, readLimit: Int64, readCount: Int64, acknowledged: Bool) {
        self.owner = owner
        self.admitsDevice = admitsDevice
        self.life = life
        self.readLimit = readLimit
        self.readCount = readCount
        self.acknowledged = acknowledged
    }

    /// The row as the receipt decided for it leaves it (for the next receipt of one group).
    public func after(_ write: ReceiptWrite) -> ReceiptRow {
        var row = self
        switch write {
        case .refused, .unchanged: break
        case .counted(let count):
            row.readCount = count
            row.acknowledged = true
        case .readOut(let count):
            row.readCount = count
            row.life = .readOut
            row.acknowledged = true
        }
        return row
    }
}

/// What a read receipt writes, as `PayloadLife.receipt` decided it: values a backend binds.
public enum ReceiptWrite: Sendable, Equatable {
    /// Nothing written; the ACK fails with this status.
    case refused(Status)
    /// Nothing written; ACK_OK.
    case unchanged
    /// The device's receipt row, and the payload's read count set to this.
    case counted(readCount: Int64)
    /// No receipt row: the payload's read count set to this, its life `.readOut`, its body
    /// erased, in one update.
    case readOut(readCount: Int64)
}

/// Which of its recipient's devices a payload is for ([4.9-4]): decided by StoreLogic when it
/// accepts the payload and committed with it; SYNC lists, and FETCH and ACK admit, only those.
public enum PayloadAudience: Sendable, Equatable {
    /// Every device of the recipient, whenever enrolled: a STORE, and a SEND to the user.
    case user
    /// These devices only: a SEND to one device (the device it names), or to a tag (the
    /// recipient's enrolled devices that had the tag as the SEND was accepted; maybe none).
    case devices([String])

    /// The audience of a SEND's push target, given the recipient's enrolled devices (read
    /// only for a tag target).
    public static func of(_ target: PushTarget, enrolled: [UserDevice]) -> PayloadAudience {
        switch target {
        case .user: .user
        case .device(let deviceID): .devices([deviceID])
        case .tag(let tag): .devices(enrolled.filter { $0.tags.contains(tag) }.map(\.deviceID))
        }
    }

    /// Whether a SEND to `target` needs the recipient's enrolled devices read first.
    public static func needsDevices(_ target: PushTarget) -> Bool {
        if case .tag = target { true } else { false }
    }

    /// As persisted: 0 the whole user, 1 the devices listed beside it.
    public var storedKind: Int64 {
        if case .devices = self { 1 } else { 0 }
    }

    /// The devices to list beside the payload (none for the whole user).
    public var listedDevices: [String] {
        if case .devices(let devices) = self { devices } else { [] }
    }
}

/// An enrolled device of a user, with the tags of its registration.
public struct UserDevice: Sendable, Equatable {
    public var deviceID: String
    public var tags: [String]

    public init(deviceID: String, tags: [String]) {
        self.deviceID = deviceID
        self.tags = tags
    }
}

public struct NewPayload: Sendable, Equatable {
    public var id: PayloadID
    /// The recipient's name. The writer binds the payload to the internal identity holding
    /// that name when it commits, in the same transaction: a user removed (or a name given
    /// to someone else) before then is never the recipient.
    public var user: String
    /// In clear; the writer seals it before it reaches the disk.
    public var body: [UInt8]
    public var createdAt: UInt64
    public var expiresAt: UInt64
    public var readLimit: UInt32
    /// A SEND's push, committed with the payload into the outbox ([4.17-1]); nil for STORE.
    public var push: Push?
    /// A SEND's idempotency key, recorded with the payload ([4.17-5]).
    public var idempotency: IdempotencyRecord?
    /// With `idempotency`: when the earlier use of the key that the SEND's read found was
    /// forgotten (`IdempotencyRecord.holds` no more), so the commit takes the key from that
    /// row. A row holding the key with another expiry (taken meanwhile) makes the SEND BUSY.
    public var keyTakenFromExpiry: UInt64?
    /// The provider that sent it (`ProviderIdentity.name`), recorded in the same commit:
    /// only that provider's STATUS and RECALL see it ([4.12-3]).
    public var sender: String
    /// Which of the recipient's devices it is for ([4.9-4]).
    public var audience: PayloadAudience = .user
    /// `body` is a sealed payload (7.6), its id derived from its seal nonce ([4.19-2]): the
    /// writer refuses an id already stored (CONFLICT) and answers the recipient's key cursor.
    public var sealed = false

    /// The outbox columns of its row, decided here for every backend ([4.17-1]): a SEND's
    /// push in its field encoding, waiting for a gateway; none for a STORE.
    public var outbox: (push: [UInt8], state: OutboxState)? {
        push.map { (OutboxEntry.encode($0), .waiting) }
    }

    public init(id: PayloadID, user: String, body: [UInt8], createdAt: UInt64, expiresAt: UInt64, readLimit: UInt32,
                push: Push? = nil, sender: String) {
        self.id = id
        self.user = user
        self.body = body
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.readLimit = readLimit
        self.push = push
        self.sender = sender
    }
}

public struct StoredPayload: Sendable, Equatable {
    public var id: PayloadID
    public var sequence: UInt64
    public var userID: UInt64
    /// In clear; empty once the payload is gone.
    public var body: [UInt8]
    public var createdAt: UInt64
    public var expiresAt: UInt64
    /// Read receipts (ACKs from distinct devices) allowed; 0 = unlimited.
    public var readLimit: UInt32
    public var readCount: UInt32
    public var fetchCount: UInt32
    public var fetchedAt: UInt64
    public var life: PayloadLife
    /// What became of its push; read for STATUS only (`StoreReads.pushOutcome`).
    public var push: PushOutcome = .none
    /// The provider that sent it; nil for a payload stored before senders were recorded.
    public var sender: String?
    /// Its audience is devices listed beside it (`PayloadAudience.devices`), not the whole user.
    public var listedAudience = false
    /// With `listedAudience`: whether the device the read was made for (`StoreReads.device`)
    /// is one of them.
    public var readerListed = false
    /// Whether the device the read was made for has acknowledged it; nil where the backend
    /// did not read it.
    public var readerAcknowledged: Bool?
    /// `body` is a sealed payload (7.6): FETCH hands each device its view ([4.19-4]).
    public var sealed = false

    @inlinable
    package init(id: PayloadID, sequence: UInt64, userID: UInt64, body: [UInt8], createdAt: UInt64, expiresAt: UInt64,
                 readLimit: UInt32, readCount: UInt32, fetchCount: UInt32, fetchedAt: UInt64, life: PayloadLife,
                 push: PushOutcome = .none, sender: String? = nil, listedAudience: Bool = false, readerListed: Bool = false,
                 readerAcknowledged: Bool? = nil, sealed: Bool = false) {
        self.sealed = sealed
        self.id = id
        self.sequence = sequence
        self.userID = userID
        self.body = body
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.readLimit = readLimit
        self.readCount = readCount
        self.fetchCount = fetchCount
        self.fetchedAt = fetchedAt
        self.life = life
        self.push = push
        self.sender = sender
        self.listedAudience = listedAudience
        self.readerListed = readerListed
        self.readerAcknowledged = readerAcknowledged
    }

    /// Whether the device the read was made for is of its audience ([4.9-4]).
    public var admitsReader: Bool { !listedAudience || readerListed }

    /// Whether a FETCH may still read it at `nowMs`.
    public func isReadable(nowMs: UInt64) -> Bool { life.afterSweep(expiresAt: expiresAt, nowMs: nowMs) == .live }

    /// The row a receipt from the device the read was made for decides from, when the read
    /// said whether that device acknowledged it.
    public var receiptRow: ReceiptRow? {
        readerAcknowledged.map {
            ReceiptRow(owner: userID, admitsDevice: admitsReader, life: life, readLimit: Int64(readLimit), readCount: Int64(readCount),
                       acknowledged: $0)
        }
    }

    public func state(nowMs: UInt64) -> PayloadState {
        guard isReadable(nowMs: nowMs) else { return .gone }
        return fetchCount > 0 ? .fetched : .stored
    }
}

/// A change the writer thread commits in a group.
public enum WriteOperation: Sendable {
    case store(NewPayload)
    /// A read receipt from one of the user's devices, for the payload stored as `sequence`;
    /// `fetched` carries the FETCH statistics of that payload not yet handed to the writer,
    /// so a device's FETCH and ACK cost one row update instead of two.
    /// `row`: the payload's row as the request's read found it, from a backend that reads it
    /// there (PostgreSQL); one that reads it in the committing transaction (SQLite) leaves
    /// it nil. Both decide with `PayloadLife.receipt`.
    case ack(sequence: UInt64, userID: UInt64, deviceID: String, fetched: FetchTally? = nil, row: ReceiptRow? = nil)
    case recall(sequence: UInt64)
    /// Statistics for STATUS, gathered on the loop and written in batches: the FETCH
    /// reply never waits for them ([4.8-3]).
    case recordFetches([FetchTally])
    /// A checked LOGIN's outcome as the rule decided it, for login limits kept in the
    /// database (`StoreBackend.sharesLoginLimits`): the values to write where the database
    /// still holds the ones the decision started from.
    case loginAttempt(LoginLimitChange)
    /// Gateways' answers to outbox pushes, recorded in batches: a push answered but not yet
    /// recorded is sent again after a restart, and the gateway takes the repeat as the
    /// same push ([4.13-12]), so nothing waits for these to be durable.
    case pushesHanded([HandedPush])
    /// A LOGIN's device key, replacing the key of the registration it names with a new
    /// registry change number ([4.6-5], [4.16-5]); `.failed(.badCredentials)` when that
    /// registration is no longer enrolled.
    case deviceKey(DeviceKeyChange)
    /// Tokens refused (forged fetch tokens, unknown or revoked API tokens), for the limit per
    /// address kept in the database (`StoreBackend.sharesLoginLimits`) ([8-9]): this store's
    /// window per address, merged with the database's by the rule (`FailureWindow.merged`).
    case tokenFailures([KeyedFailureWindow])
}

/// Successful FETCHes of one payload since the last batch.
public struct FetchTally: Sendable, Equatable {
    public var sequence: UInt64
    public var count: UInt32
    public var lastAtMs: UInt64

    package init(sequence: UInt64, count: UInt32, lastAtMs: UInt64) {
        self.sequence = sequence
        self.count = count
        self.lastAtMs = lastAtMs
    }
}

/// The result of one WriteOperation; `.ok` once it is durable.
public enum WriteOutcome: Sendable, Equatable {
    case ok
    /// A STORE is durable; rows are addressed by this sequence from now on. `keyCursor`: for
    /// a sealed payload, the recipient's key cursor as of the commit ([4.18-5]).
    case stored(sequence: UInt64, keyCursor: UInt64? = nil)
    case failed(Status)
}

/// A user as the users table holds it.
public struct UserRecord: Sendable, Equatable {
    /// Random, never reused: payloads and the validity of tokens bind to it.
    public var id: UInt64
    public var name: String
    public var passwordHash: String
    /// Unix ms; a fetch token issued before it was issued to an earlier holder of the name.
    public var createdAt: UInt64

    public init(id: UInt64, name: String, passwordHash: String, createdAt: UInt64) {
        self.id = id
        self.name = name
        self.passwordHash = passwordHash
        self.createdAt = createdAt
    }
}

/// One page of SYNC, newest first ([4.9-1]).
public struct UnreadPage: Sendable, Equatable {
    public var ids: [PayloadID]
    /// The seq of the oldest id listed (the next page lists older ones), or the query's.
    public var cursor: UInt64
    public var hasMore: Bool
    /// With `UnreadQuery.countsOlder`: how many unread ids are older than the page ([4.9-5]).
    public var older: UInt64

    public init(ids: [PayloadID], cursor: UInt64, hasMore: Bool, older: UInt64 = 0) {
        self.ids = ids
        self.cursor = cursor
        self.hasMore = hasMore
        self.older = older
    }
}
