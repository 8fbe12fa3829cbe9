/// SEND: what STORE and then a PUSH of the new id carry, in one request ([4.17]). The store
/// commits the payload and the intent to push it together, then hands the push to a
/// gateway itself.
public struct SendRequest: WireMessage {
    public static let type = MessageType.send
    public static let fieldTable: FieldTable = [
        .user, .payload, .ttlSeconds, .readLimit, .targetKind, .target, .alert, .priority, .collapseKey,
        .pushTTLSeconds, .idempotencyKey, .sealedPayload, .payloadToSeal,
    ]

    public var user: String
    /// The content, in the form `form` says ([4.19]).
    public var payload: [UInt8]
    public var form: PayloadForm
    public var ttlSeconds: UInt32
    /// 0 means no limit.
    public var readLimit: UInt32
    /// Whom the push is for; nil means the recipient ([4.17-2]).
    public var target: PushTarget?
    public var alert: Bool
    public var priority: UInt8
    public var collapseKey: String?
    /// How long the push may wait for an offline device; nil means `ttlSeconds`.
    public var pushTTLSeconds: UInt32?
    /// Makes a retry safe ([4.17-5]).
    public var idempotencyKey: String?

    public init(user: String, payload: [UInt8], form: PayloadForm = .plain, ttlSeconds: UInt32 = StoreRequest.defaultTTLSeconds,
                readLimit: UInt32 = 0, target: PushTarget? = nil, alert: Bool = false, priority: UInt8 = Push.defaultPriority,
                collapseKey: String? = nil, pushTTLSeconds: UInt32? = nil, idempotencyKey: String? = nil) {
        self.user = user
        self.payload = payload
        self.form = form
        self.ttlSeconds = ttlSeconds
        self.readLimit = readLimit
        self.target = target
        self.alert = alert
        self.priority = priority
        self.collapseKey = collapseKey
        self.pushTTLSeconds = pushTTLSeconds
        self.idempotencyKey = idempotencyKey
    }

    public init(fields: FieldSet) throws(WireError) {
        user = try fields.required(.user, FieldSet.string)
        (form, payload) = try fields.payloadContent()
        ttlSeconds = fields.uint32(.ttlSeconds) ?? StoreRequest.defaultTTLSeconds
        readLimit = fields.uint32(.readLimit) ?? 0
        target = try fields.pushTarget()
        alert = try fields.uint8(.alert, in: 0...1) == 1
        priority = try fields.uint8(.priority, in: 0...Push.maxPriority) ?? Push.defaultPriority
        collapseKey = fields.string(.collapseKey)
        pushTTLSeconds = fields.uint32(.pushTTLSeconds)
        idempotencyKey = fields.string(.idempotencyKey)
    }

    public func writeFields(to writer: inout FieldWriter) {
        writer.append(.user, user)
        if form == .plain { writer.append(.payload, payload) }
        if ttlSeconds != StoreRequest.defaultTTLSeconds { writer.append(.ttlSeconds, ttlSeconds) }
        if readLimit != 0 { writer.append(.readLimit, readLimit) }
        if form != .plain { writer.append(form.tag, payload) }  // tags ascend ([3.4-1])
        if let target {
            writer.append(.targetKind, target.kind)
            writer.append(.target, target.name)
        }
        if alert { writer.append(.alert, UInt8(1)) }
        if priority != Push.defaultPriority { writer.append(.priority, priority) }
        if let collapseKey { writer.append(.collapseKey, collapseKey) }
        if let pushTTLSeconds { writer.append(.pushTTLSeconds, pushTTLSeconds) }
        if let idempotencyKey { writer.append(.idempotencyKey, idempotencyKey) }
    }

    /// The checks the wire's decoder makes of a SEND's fields ([3.3-2], [3.3-3], [3.3-4], [3.3-8]),
    /// made of the value itself: a SEND built from another form than a frame (the HTTP
    /// API's JSON) meets exactly the limits a SEND frame does, without being encoded into
    /// fields and decoded again. The rules are `FieldTag.check`'s, the ones the scan of a
    /// frame applies; the integers are in range by their types, save the priority.
    public func validate() throws(WireError) {
        try FieldTag.user.check(user)
        try form.tag.check(payload)
        if let target { try FieldTag.target.check(target.name) }
        guard priority <= Push.maxPriority else { throw .badFieldValue(.priority) }
        if let collapseKey { try FieldTag.collapseKey.check(collapseKey) }
        if let idempotencyKey { try FieldTag.idempotencyKey.check(idempotencyKey) }
    }

    /// The STORE part of the request.
    public var storeRequest: StoreRequest {
        StoreRequest(user: user, payload: payload, form: form, ttlSeconds: ttlSeconds, readLimit: readLimit)
    }
}

/// SEND_OK: the new payload's id and expiry, once the payload and its push are durable.
public struct SendOK: WireMessage {
    public static let type = MessageType.sendOK
    public static let fieldTable: FieldTable = [.expiresAt, .id, .replayed, .cursor]

    public var id: PayloadID
    public var expiresAt: UInt64
    /// The answer of an earlier SEND with the same idempotency key ([4.17-5]).
    public var replayed: Bool
    /// For a sealed payload, the recipient's key cursor as of the commit ([4.18-5]).
    public var cursor: UInt64?

    public init(id: PayloadID, expiresAt: UInt64, replayed: Bool = false, cursor: UInt64? = nil) {
        self.id = id
        self.expiresAt = expiresAt
        self.replayed = replayed
        self.cursor = cursor
    }

    public init(fields: FieldSet) throws(WireError) {
        id = try fields.requiredPayloadID()
        expiresAt = try fields.required(.expiresAt, FieldSet.uint64)
        replayed = try fields.uint8(.replayed, in: 0...1) == 1
        cursor = fields.uint64(.cursor)
    }

    public func writeFields(to writer: inout FieldWriter) {
        writer.append(.expiresAt, expiresAt)
        writer.append(.id, id)
        if let cursor { writer.append(.cursor, cursor) }
        if replayed { writer.append(.replayed, UInt8(1)) }
    }
}
