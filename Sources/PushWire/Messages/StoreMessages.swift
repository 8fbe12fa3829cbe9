/// LOGIN: a device trades a user's password for a fetch token.
public struct Login: WireMessage {
    public static let type = MessageType.login
    public static let fieldTable: FieldTable = [.user, .password, .deviceID, .keySuite, .deviceKey]

    public var user: String
    public var password: [UInt8]
    public var deviceID: String
    /// The device's public key, registered with the login ([4.6-5]); nil leaves the
    /// registered key as it is.
    public var deviceKey: DevicePublicKey?

    public init(user: String, password: [UInt8], deviceID: String, deviceKey: DevicePublicKey? = nil) {
        self.user = user
        self.password = password
        self.deviceID = deviceID
        self.deviceKey = deviceKey
    }

    public init(fields: FieldSet) throws(WireError) {
        user = try fields.required(.user, FieldSet.string)
        password = try fields.required(.password, FieldSet.bytes)
        deviceID = try fields.required(.deviceID, FieldSet.string)
        deviceKey = try fields.devicePublicKey()
    }

    public func writeFields(to writer: inout FieldWriter) {
        writer.append(.user, user)
        writer.append(.password, password)
        writer.append(.deviceID, deviceID)
        if let deviceKey {
            writer.append(.keySuite, deviceKey.suite.rawValue)
            writer.append(.deviceKey, deviceKey.bytes)
        }
    }
}

public struct LoginOK: WireMessage {
    public static let type = MessageType.loginOK
    public static let fieldTable: FieldTable = [.token, .expiresAt, .keyID]

    public var token: [UInt8]
    public var expiresAt: UInt64
    /// The id of the key the registration has after this LOGIN ([4.6-8]); nil when it has none.
    public var keyID: KeyID?

    public init(token: [UInt8], expiresAt: UInt64, keyID: KeyID? = nil) {
        self.token = token
        self.expiresAt = expiresAt
        self.keyID = keyID
    }

    public init(fields: FieldSet) throws(WireError) {
        token = try fields.required(.token, FieldSet.bytes)
        expiresAt = try fields.required(.expiresAt, FieldSet.uint64)
        if let raw = fields.bytes(.keyID) {
            guard let keyID = KeyID(bytes: raw) else { throw .badFieldValue(.keyID) }
            self.keyID = keyID
        }
    }

    public func writeFields(to writer: inout FieldWriter) {
        writer.append(.token, token)
        writer.append(.expiresAt, expiresAt)
        if let keyID { writer.append(.keyID, keyID.bytes) }
    }
}

/// STORE: a provider hands the store a payload for one user.
public struct StoreRequest: WireMessage {
    public static let type = MessageType.store
    public static let fieldTable: FieldTable = [.user, .payload, .ttlSeconds, .readLimit, .sealedPayload, .payloadToSeal]
    public static let defaultTTLSeconds: UInt32 = 86_400

    public var user: String
    /// The content, in the form `form` says ([4.19]).
    public var payload: [UInt8]
    public var form: PayloadForm
    public var ttlSeconds: UInt32
    /// 0 means no limit.
    public var readLimit: UInt32

    public init(user: String, payload: [UInt8], form: PayloadForm = .plain,
                ttlSeconds: UInt32 = StoreRequest.defaultTTLSeconds, readLimit: UInt32 = 0) {
        self.user = user
        self.payload = payload
        self.form = form
        self.ttlSeconds = ttlSeconds
        self.readLimit = readLimit
    }

    public init(fields: FieldSet) throws(WireError) {
        user = try fields.required(.user, FieldSet.string)
        (form, payload) = try fields.payloadContent()
        ttlSeconds = fields.uint32(.ttlSeconds) ?? StoreRequest.defaultTTLSeconds
        readLimit = fields.uint32(.readLimit) ?? 0
    }

    public func writeFields(to writer: inout FieldWriter) {
        writer.append(.user, user)
        if form == .plain { writer.append(.payload, payload) }
        if ttlSeconds != StoreRequest.defaultTTLSeconds { writer.append(.ttlSeconds, ttlSeconds) }
        if readLimit != 0 { writer.append(.readLimit, readLimit) }
        if form != .plain { writer.append(form.tag, payload) }  // tags ascend ([3.4-1])
    }
}

public struct StoreOK: WireMessage {
    public static let type = MessageType.storeOK
    public static let fieldTable: FieldTable = [.expiresAt, .id, .cursor]

    public var id: PayloadID
    public var expiresAt: UInt64
    /// For a sealed payload, the recipient's key cursor as of the commit ([4.18-5]).
    public var cursor: UInt64?

    public init(id: PayloadID, expiresAt: UInt64, cursor: UInt64? = nil) {
        self.id = id
        self.expiresAt = expiresAt
        self.cursor = cursor
    }

    public init(fields: FieldSet) throws(WireError) {
        id = try fields.requiredPayloadID()
        expiresAt = try fields.required(.expiresAt, FieldSet.uint64)
        cursor = fields.uint64(.cursor)
    }

    public func writeFields(to writer: inout FieldWriter) {
        writer.append(.expiresAt, expiresAt)
        writer.append(.id, id)
        if let cursor { writer.append(.cursor, cursor) }
    }
}

/// Device requests about one payload that carry the fetch token (FETCH, ACK). A missing
/// token is not malformed: the store answers AUTH_REQUIRED ([4.8-2]), which is what sends
/// the device to its generic notification.
public protocol TokenedIDRequest: WireMessage {
    var id: PayloadID { get }
    var token: [UInt8]? { get }
    init(id: PayloadID, token: [UInt8]?)
}

/// Computed tables would be built on every decode: these are built once.
private let tokenedIDFieldTable: FieldTable = [.token, .id]
private let idOnlyFieldTable: FieldTable = [.id]

extension TokenedIDRequest {
    public static var fieldTable: FieldTable { tokenedIDFieldTable }

    public init(fields: FieldSet) throws(WireError) {
        self.init(id: try fields.requiredPayloadID(), token: fields.bytes(.token))
    }

    public func writeFields(to writer: inout FieldWriter) {
        if let token { writer.append(.token, token) }
        writer.append(.id, id)
    }
}

/// FETCH: a device reads one payload.
public struct Fetch: TokenedIDRequest {
    public static let type = MessageType.fetch
    public var id: PayloadID
    public var token: [UInt8]?

    public init(id: PayloadID, token: [UInt8]?) {
        self.id = id
        self.token = token
    }
}

public struct FetchOK: WireMessage {
    public static let type = MessageType.fetchOK
    public static let fieldTable: FieldTable = [.expiresAt, .id, .payload, .createdAt, .sealedPayload]

    public var id: PayloadID
    /// The content; when `sealed`, the device's view of a sealed payload ([4.19-4], 7.6).
    public var payload: [UInt8]
    public var sealed: Bool
    public var createdAt: UInt64
    public var expiresAt: UInt64

    public init(id: PayloadID, payload: [UInt8], sealed: Bool = false, createdAt: UInt64, expiresAt: UInt64) {
        self.id = id
        self.payload = payload
        self.sealed = sealed
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }

    public init(fields: FieldSet) throws(WireError) {
        id = try fields.requiredPayloadID()
        switch (fields.bytes(.payload), fields.bytes(.sealedPayload)) {
        case (let plain?, nil): (payload, sealed) = (plain, false)
        case (nil, let view?): (payload, sealed) = (view, true)
        case (nil, nil): throw .missingField(.payload)
        case (_?, _?): throw .exclusiveFields(.payload, .sealedPayload)
        }
        createdAt = try fields.required(.createdAt, FieldSet.uint64)
        expiresAt = try fields.required(.expiresAt, FieldSet.uint64)
    }

    public func writeFields(to writer: inout FieldWriter) {
        writer.append(.expiresAt, expiresAt)
        writer.append(.id, id)
        if !sealed { writer.append(.payload, payload) }
        writer.append(.createdAt, createdAt)
        if sealed { writer.append(.sealedPayload, payload) }
    }
}

/// SYNC: a device asks for its unread IDs, newest first, a page at a time ([4.9-1]).
public struct Sync: WireMessage {
    public static let type = MessageType.sync
    public static let fieldTable: FieldTable = [.token, .cursor, .limit]
    public static let defaultLimit: UInt32 = 100
    public static let maxLimit: UInt32 = 1000

    public var token: [UInt8]?
    public var cursor: UInt64
    public var limit: UInt32

    public init(token: [UInt8]?, cursor: UInt64 = 0, limit: UInt32 = Sync.defaultLimit) {
        self.token = token
        self.cursor = cursor
        self.limit = limit
    }

    public init(fields: FieldSet) throws(WireError) {
        token = fields.bytes(.token)
        cursor = fields.uint64(.cursor) ?? 0
        limit = fields.uint32(.limit) ?? Sync.defaultLimit
    }

    public func writeFields(to writer: inout FieldWriter) {
        if let token { writer.append(.token, token) }
        if cursor != 0 { writer.append(.cursor, cursor) }
        if limit != Sync.defaultLimit { writer.append(.limit, limit) }
    }
}

public struct SyncOK: WireMessage {
    public static let type = MessageType.syncOK
    public static let fieldTable: FieldTable = [.cursor, .ids, .hasMore, .olderCount]

    /// Newest first ([4.9-1]).
    public var ids: [PayloadID]
    /// The cursor to send in the next SYNC, for the page of older ids.
    public var cursor: UInt64
    public var hasMore: Bool
    /// In the first page of a listing: how many older unread ids it did not send ([4.9-5]);
    /// 0 (absent) in later pages and from a 1.3 store.
    public var olderCount: UInt32

    public init(ids: [PayloadID], cursor: UInt64, hasMore: Bool, olderCount: UInt32 = 0) {
        self.ids = ids
        self.cursor = cursor
        self.hasMore = hasMore
        self.olderCount = olderCount
    }

    public init(fields: FieldSet) throws(WireError) {
        let raw = try fields.required(.ids, FieldSet.bytes)
        guard raw.count % PayloadID.byteCount == 0 else { throw .badFieldValue(.ids) }
        ids = raw.withUnsafeBytes { buffer in
            stride(from: 0, to: buffer.count, by: PayloadID.byteCount).compactMap { offset in
                PayloadID(bytes: UnsafeRawBufferPointer(rebasing: buffer[offset..<offset + PayloadID.byteCount]))
            }
        }
        cursor = try fields.required(.cursor, FieldSet.uint64)
        hasMore = try fields.requiredUInt8(.hasMore, in: 0...1) == 1
        olderCount = fields.uint32(.olderCount) ?? 0
    }

    public func writeFields(to writer: inout FieldWriter) {
        writer.append(.cursor, cursor)
        var raw = [UInt8]()
        raw.reserveCapacity(ids.count * PayloadID.byteCount)
        for id in ids { id.append(to: &raw) }
        writer.append(.ids, raw)
        writer.append(.hasMore, UInt8(hasMore ? 1 : 0))
        if olderCount != 0 { writer.append(.olderCount, olderCount) }
    }
}

/// ACK: a read receipt; a payload whose read limit is reached is erased.
public struct Ack: TokenedIDRequest {
    public static let type = MessageType.ack
    public var id: PayloadID
    public var token: [UInt8]?

    public init(id: PayloadID, token: [UInt8]?) {
        self.id = id
        self.token = token
    }
}

/// The replies that carry only the ID they answer: ACK_OK, RECALL_OK.
public protocol IDOnlyMessage: WireMessage {
    var id: PayloadID { get }
    init(id: PayloadID)
}

extension IDOnlyMessage {
    public static var fieldTable: FieldTable { idOnlyFieldTable }
    public init(fields: FieldSet) throws(WireError) { self.init(id: try fields.requiredPayloadID()) }
    public func writeFields(to writer: inout FieldWriter) { writer.append(.id, id) }
}

public struct AckOK: IDOnlyMessage {
    public static let type = MessageType.ackOK
    public var id: PayloadID
    public init(id: PayloadID) { self.id = id }
}

/// RECALL: a provider deletes a payload before it is read.
public struct Recall: IDOnlyMessage {
    public static let type = MessageType.recall
    public var id: PayloadID
    public init(id: PayloadID) { self.id = id }
}

public struct RecallOK: IDOnlyMessage {
    public static let type = MessageType.recallOK
    public var id: PayloadID
    public init(id: PayloadID) { self.id = id }
}

/// STATUS: a provider asks what became of a payload.
public struct StatusRequest: IDOnlyMessage {
    public static let type = MessageType.status
    public var id: PayloadID
    public init(id: PayloadID) { self.id = id }
}

public enum PayloadState: UInt8, Sendable, CustomStringConvertible {
    case stored = 1
    case fetched = 2
    case gone = 3

    public var description: String {
        switch self {
        case .stored: "stored"
        case .fetched: "fetched"
        case .gone: "gone"
        }
    }
}

public struct StatusOK: WireMessage {
    public static let type = MessageType.statusOK
    public static let fieldTable: FieldTable = [.expiresAt, .id, .state, .fetchCount, .fetchedAt, .createdAt, .written, .queued, .pushState]

    public var id: PayloadID
    public var state: PayloadState
    public var fetchCount: UInt32
    /// Unix ms of the last fetch; 0 when never fetched.
    public var fetchedAt: UInt64
    public var createdAt: UInt64
    public var expiresAt: UInt64
    /// What became of the push of a payload stored by SEND ([4.12-2]).
    public var push: PushOutcome

    public init(id: PayloadID, state: PayloadState, fetchCount: UInt32, fetchedAt: UInt64, createdAt: UInt64, expiresAt: UInt64,
                push: PushOutcome = .none) {
        self.id = id
        self.state = state
        self.fetchCount = fetchCount
        self.fetchedAt = fetchedAt
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.push = push
    }

    public init(fields: FieldSet) throws(WireError) {
        id = try fields.requiredPayloadID()
        state = PayloadState(rawValue: try fields.requiredUInt8(.state, in: 1...3)) ?? .gone
        fetchCount = try fields.required(.fetchCount, FieldSet.uint32)
        fetchedAt = try fields.required(.fetchedAt, FieldSet.uint64)
        createdAt = try fields.required(.createdAt, FieldSet.uint64)
        expiresAt = try fields.required(.expiresAt, FieldSet.uint64)
        switch try fields.uint8(.pushState, in: 0...2) ?? 0 {
        case 1: push = .waiting
        case 2: push = .handed(PushAck(written: fields.uint32(.written) ?? 0, queued: fields.uint32(.queued) ?? 0))
        default: push = .none
        }
    }

    public func writeFields(to writer: inout FieldWriter) {
        writer.append(.expiresAt, expiresAt)
        writer.append(.id, id)
        writer.append(.state, state.rawValue)
        writer.append(.fetchCount, fetchCount)
        writer.append(.fetchedAt, fetchedAt)
        writer.append(.createdAt, createdAt)
        switch push {
        case .none: break
        case .waiting: writer.append(.pushState, UInt8(1))
        case .handed(let ack):
            writer.append(.written, ack.written)
            writer.append(.queued, ack.queued)
            writer.append(.pushState, UInt8(2))
        }
    }
}

/// What became of a payload's push, for STATUS ([4.12-2]).
public enum PushOutcome: Equatable, Sendable {
    /// Stored by STORE: the provider pushes, if anyone.
    case none
    /// Stored by SEND; no gateway has answered its PUSH yet.
    case waiting
    /// A gateway answered the PUSH with these counts.
    case handed(PushAck)
}
