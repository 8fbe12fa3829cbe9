import PushPostgres
import PushStoreLogic
import PushWire

/// A request's reads (`StoreReads`) as one SELECT that returns exactly one row: the user,
/// the device's enrolment, the payload, SYNC's page, the login limits and the API token,
/// each a LEFT JOIN on a unique key (or a LATERAL subquery for the page), so one statement on one snapshot
/// answers the request and it costs one pipelined query, no round trip of its own.
/// REGISTRY's page is rows of its own (`registryPage`). Nothing is cached: every store of
/// the database sees every change on its next request.
struct PostgresReadStatement {
    var sql: String
    var parameters: [PostgresValue]
    /// Where each part's columns start in the row, or nil when not asked.
    var userColumn: Int?
    var deviceColumn: Int?
    var payloadColumn: Int?
    var unreadColumn: Int?
    var limitsColumn: Int?
    var pushColumn: Int?
    var keyColumn: Int?
    var apiTokenColumn: Int?
    var apiTokensRevisionColumn: Int?
    var userDevicesColumn: Int?
    var deviceKeysColumn: Int?

    private init(sql: String, parameters: [PostgresValue], userColumn: Int?, deviceColumn: Int?, payloadColumn: Int?) {
        self.sql = sql
        self.parameters = parameters
        self.userColumn = userColumn
        self.deviceColumn = deviceColumn
        self.payloadColumn = payloadColumn
    }

    /// Whether `batch` can read these with others: a payload, and at most its user and the
    /// device (FETCH, ACK, STATUS, RECALL). SYNC, LOGIN and REGISTRY are read alone.
    static func batches(_ reads: StoreReads) -> Bool {
        reads.payload != nil && reads.unread == nil && reads.registry == nil && reads.loginLimits == nil && !reads.passwordHash
            && !reads.fresh && !reads.pushOutcome && reads.idempotency == nil && reads.apiToken == nil && !reads.apiTokensRevision
            && !reads.userDevices && !reads.deviceKeys
    }

    /// The reads of many requests (each `batches`) as one statement of a fixed shape, over
    /// arrays: one row per request, the same LEFT JOINs on unique keys as the single read
    /// (a NULL key finds nothing), numbered by `WITH ORDINALITY` in column 0 (from 1).
    /// One statement is one snapshot, so each request is still read as of one moment; the
    /// server's cost per statement (executor start-up, a round of the protocol, a lock
    /// of each table and index) is paid once for the batch.
    static func batch(_ batch: [StoreReads]) -> PostgresReadStatement {
        let sql = """
            SELECT r.n, u.id, u.created_at, NULL::text, d.user_id, d.issued_at, d.expires_at, d.key_id,
                   p.seq, p.user_id, p.key_id, CASE WHEN r.body THEN p.body END, p.created_at, p.expires_at,
                   p.read_limit, p.read_count, p.fetch_count, p.fetched_at, p.life, p.sender,
                   p.audience, EXISTS (SELECT 1 FROM audiences a WHERE a.seq = p.seq AND a.device = r.device),
                   CASE WHEN r.receipt THEN EXISTS (SELECT 1 FROM receipts rc WHERE rc.seq = p.seq AND rc.device = r.device) END,
                   p.sealed
            FROM unnest($1::text[], $2::text[], $3::bytea[], $4::bool[], $5::bool[]) WITH ORDINALITY AS r (name, device, id, body, receipt, n)
            LEFT JOIN users u ON u.name = r.name
            LEFT JOIN registrations d ON d.device_id = r.device AND d.state = \(RegistryEntry.State.enrolled.sql)
            LEFT JOIN payloads p ON p.id = r.id
            """
        let parameters: [PostgresValue] = [
            .textArray(batch.map(\.user)), .textArray(batch.map(\.device)), .bytesArray(batch.map { $0.payload?.bytes }),
            .boolArray(batch.map { $0.body }), .boolArray(batch.map { Self.readsReceipt($0) }),
        ]
        return PostgresReadStatement(sql: sql, parameters: parameters, userColumn: 1, deviceColumn: 4, payloadColumn: 8)
    }

    /// Whether the device's receipt of the payload is read too: for an ACK (the read of the
    /// sequence only, with a device), whose receipt `PayloadLife.receipt` decides from it.
    static func readsReceipt(_ reads: StoreReads) -> Bool { reads.sequenceOnly && reads.device != nil }

    /// The statement for `reads`, nil when it asks for nothing one row can hold (REGISTRY only).
    init?(_ reads: StoreReads) {
        var columns: [String] = []
        var joins: [String] = []
        var parameters: [PostgresValue] = []
        func parameter(_ value: PostgresValue) -> String {
            parameters.append(value)
            return "$\(parameters.count)"
        }
        if let name = reads.user {
            userColumn = columns.count
            columns += ["u.id", "u.created_at", reads.passwordHash ? "u.password_hash" : "NULL::text"]
            joins.append("LEFT JOIN users u ON u.name = \(parameter(.text(name)))")
        }
        var deviceParameter: String?
        if let device = reads.device {
            deviceColumn = columns.count
            columns += ["d.user_id", "d.issued_at", "d.expires_at", "d.key_id"]
            let placeholder = parameter(.text(device))
            deviceParameter = placeholder
            joins.append("LEFT JOIN registrations d ON d.device_id = \(placeholder) AND d.state = \(RegistryEntry.State.enrolled.sql)")
        }
        if let id = reads.payload {
            payloadColumn = columns.count
            columns += Self.payloadColumns(reads, device: deviceParameter)
            joins.append("LEFT JOIN payloads p ON p.id = \(parameter(.id(id)))")
            if reads.pushOutcome {
                pushColumn = columns.count
                columns += ["p.outbox", "p.written", "p.queued"]
            }
        }
        if let key = reads.idempotency {
            keyColumn = columns.count
            Self.selectIdempotencyKey(key, columns: &columns, joins: &joins, parameter: parameter)
        }
        if let id = reads.apiToken {
            apiTokenColumn = columns.count
            columns += ["t.provider", "t.secret_hash", "t.created_at", "t.revoked_at", "t.scopes"]
            joins.append("LEFT JOIN api_tokens t ON t.id = \(parameter(.text(id)))")
        }
        if reads.apiTokensRevision {
            apiTokensRevisionColumn = columns.count
            columns.append("(SELECT value FROM store_meta WHERE key = '\(APITokenRevision.key)')")
        }
        if let unread = reads.unread, reads.user != nil {
            unreadColumn = columns.count
            Self.selectUnreadPage(unread, columns: &columns, joins: &joins, parameter: parameter)
        }
        if reads.userDevices, reads.user != nil {
            userDevicesColumn = columns.count
            columns.append(Self.enrolledDevicesColumn)
        }
        if reads.deviceKeys, reads.user != nil {
            deviceKeysColumn = columns.count
            columns += Self.deviceKeysColumns
        }
        if let key = reads.loginLimits {
            limitsColumn = columns.count
            Self.selectLoginLimits(key, columns: &columns, joins: &joins, parameter: parameter)
        }
        guard !columns.isEmpty else { return nil }
        sql = "SELECT " + columns.joined(separator: ", ") + " FROM (VALUES (1)) AS one (x) " + joins.joined(separator: " ")
        self.parameters = parameters
    }

    /// The SEND that holds an idempotency key, if one does.
    private static func selectIdempotencyKey(_ key: IdempotencyKey, columns: inout [String], joins: inout [String],
                                             parameter: (PostgresValue) -> String) {
        columns += ["k.request_hash", "k.id", "k.expires_at", "k.key_expires_at"]
        joins.append("LEFT JOIN payloads k ON k.key_scope = \(parameter(.text(key.scope))) AND k.idem_key = \(parameter(.text(key.key)))")
    }

    /// The login limits of the (user, address) pair and of the address alone.
    private static func selectLoginLimits(_ key: LoginLimitKey, columns: inout [String], joins: inout [String],
                                          parameter: (PostgresValue) -> String) {
        columns += ["lp.failures", "lp.blocked_until", "lp.last_attempt", "lp.trusted_until", "lb.credit_ms", "lb.updated_ms"]
        let address = parameter(.text(key.address))
        joins.append("LEFT JOIN login_pairs lp ON lp.user_name = \(parameter(.text(key.user))) AND lp.address = \(address)")
        joins.append("LEFT JOIN login_budgets lb ON lb.address = \(address)")
    }

    /// The payload's columns; with a device, whether it is listed in the payload's audience
    /// and, for an ACK, whether it has already acknowledged it.
    private static func payloadColumns(_ reads: StoreReads, device: String?) -> [String] {
        ["p.seq", "p.user_id", "p.key_id", reads.body ? "p.body" : "NULL::bytea", "p.created_at", "p.expires_at",
         "p.read_limit", "p.read_count", "p.fetch_count", "p.fetched_at", "p.life", "p.sender", "p.audience",
         device.map { "EXISTS (SELECT 1 FROM audiences a WHERE a.seq = p.seq AND a.device = \($0))" } ?? "false",
         device.flatMap { readsReceipt(reads) ? "EXISTS (SELECT 1 FROM receipts rc WHERE rc.seq = p.seq AND rc.device = \($0))" : nil }
            ?? "NULL::bool", "p.sealed"]
    }

    /// SYNC's page: the rows SYNC lists ([4.9-1], [4.9-4]), newest first below a seq; one row
    /// past the page tells whether another follows, and only then, on a listing's first
    /// page, are the older ones counted ([4.9-5]).
    private static func selectUnreadPage(_ unread: UnreadQuery, columns: inout [String], joins: inout [String],
                                         parameter: (PostgresValue) -> String) {
        columns += ["s.ids", "s.last_seq", "s.has_more", unread.countsOlder ? "o.older" : "0::bigint"]
        let device = parameter(.text(unread.deviceID))
        let now = parameter(.uint(unread.nowMs))
        let limit = parameter(.int(unread.limit))
        func listed(below bound: String) -> String {
            """
            FROM payloads x
            WHERE x.user_id = u.id AND x.seq < \(bound) AND x.life = \(PayloadLife.live.rawValue) AND x.expires_at > \(now)
              AND (x.audience = \(PayloadAudience.user.storedKind) OR EXISTS (SELECT 1 FROM audiences a WHERE a.seq = x.seq AND a.device = \(device)))
              AND NOT EXISTS (SELECT 1 FROM receipts r WHERE r.seq = x.seq AND r.device = \(device))
            """
        }
        joins.append("""
            LEFT JOIN LATERAL (
                SELECT string_agg(q.id, ''::bytea ORDER BY q.seq DESC) FILTER (WHERE q.n <= \(limit)) AS ids,
                       min(q.seq) FILTER (WHERE q.n <= \(limit)) AS last_seq,
                       count(*) > \(limit) AS has_more
                FROM (SELECT x.seq, x.id, row_number() OVER (ORDER BY x.seq DESC) AS n
                      \(listed(below: parameter(.uint(unread.before))))
                      ORDER BY x.seq DESC LIMIT \(limit) + 1) q
            ) s ON true
            """)
        if unread.countsOlder {
            // `s.has_more` gates the scan: PostgreSQL skips it when it is false.
            joins.append("LEFT JOIN LATERAL (SELECT count(*) AS older \(listed(below: "s.last_seq")) AND s.has_more) o ON true")
        }
    }

    /// The user's enrolled devices and their tags, packed as (length, bytes) pairs of UTF-8:
    /// one column of the one row, whatever the names hold.
    private static var enrolledDevicesColumn: String {
        """
        (SELECT string_agg(int4send(octet_length(convert_to(e.device_id, 'UTF8'))) || convert_to(e.device_id, 'UTF8')
                           || int4send(octet_length(convert_to(e.tags, 'UTF8'))) || convert_to(e.tags, 'UTF8'), ''::bytea ORDER BY e.id)
         FROM registrations e WHERE e.user_id = u.id AND e.state = \(RegistryEntry.State.enrolled.sql))
        """
    }

    /// The keys of the user's enrolled registrations that have one, packed as
    /// (length, device id, suite, key id, expiry, length, key) in one column of the one row, and
    /// the user's key cursor over every registry entry kept ([4.18-1], [4.18-3]).
    private static var deviceKeysColumns: [String] {
        ["""
         (SELECT string_agg(int4send(octet_length(convert_to(k.device_id, 'UTF8'))) || convert_to(k.device_id, 'UTF8')
                            || int4send(k.key_suite) || int8send(k.key_id) || int8send(k.expires_at)
                            || int4send(octet_length(k.device_key)) || k.device_key, ''::bytea)
          FROM registrations k WHERE k.user_id = u.id AND k.state = \(RegistryEntry.State.enrolled.sql) AND k.key_suite IS NOT NULL)
         """,
         "(SELECT coalesce(max(c.change_seq), 0) FROM registrations c WHERE c.user_id = u.id)"]
    }

    /// The keys packed by `deviceKeysColumns`; a key of an unknown suite or the wrong length
    /// (no store wrote it) is left out.
    static func deviceKeys(_ packed: [UInt8]) throws(PostgresError) -> [RegisteredKey] {
        var keys: [RegisteredKey] = []
        var offset = 0
        func take(_ count: Int) throws(PostgresError) -> ArraySlice<UInt8> {
            guard count >= 0, count <= packed.count - offset else { throw PostgresError(kind: .protocolViolation, message: "bad list of keys") }
            defer { offset += count }
            return packed[offset..<offset + count]
        }
        func integer(_ count: Int) throws(PostgresError) -> UInt64 { try take(count).reduce(0) { $0 << 8 | UInt64($1) } }
        while offset < packed.count {
            let deviceID = String(decoding: try take(Int(try integer(4))), as: UTF8.self)
            let suite = Int64(try integer(4))
            let keyID = KeyID(value: try integer(8))
            let expiresAt = try integer(8)
            let bytes = Array(try take(Int(try integer(4))))
            guard let key = DeviceKeyColumns.key(suite: suite, bytes: bytes) else { continue }
            keys.append(RegisteredKey(deviceID: deviceID, key: key, keyID: keyID, expiresAt: expiresAt))
        }
        return keys
    }

    typealias Opener = (_ sealed: [UInt8], _ keyID: UInt32, _ id: PayloadID, _ userID: UInt64) throws -> [UInt8]

    /// What the row says; bodies are opened by `open` (the caller's data keys).
    func decode(_ result: PostgresResult, reads: StoreReads, open: Opener) throws -> StoreReadResult {
        guard result.rows.count == 1 else {
            throw PostgresError(kind: .protocolViolation, message: "the read returned \(result.rows.count) rows, not 1")
        }
        return try decode(result, row: 0, reads: reads, open: open)
    }

    /// What row `row` says of `reads`.
    func decode(_ result: PostgresResult, row: Int, reads: StoreReads, open: Opener) throws -> StoreReadResult {
        var found = StoreReadResult()
        if let column = userColumn, let name = reads.user, !result.isNull(row, column) {
            found.user = UserRecord(id: try result.uint(row, column), name: name,
                                    passwordHash: result.isNull(row, column + 2) ? "" : try result.text(row, column + 2),
                                    createdAt: try result.uint(row, column + 1))
        }
        if let column = deviceColumn, !result.isNull(row, column) {
            found.device = EnrolledDevice(userID: try result.uint(row, column), issuedAt: try result.uint(row, column + 1),
                                          expiresAt: try result.uint(row, column + 2),
                                          keyID: try result.optionalInt(row, column + 3).map(DeviceKeyColumns.keyID))
        }
        if let column = payloadColumn, let id = reads.payload, !result.isNull(row, column) {
            found.payload = try payload(id, result, row: row, column: column, open: open)
        }
        if let column = keyColumn, let key = reads.idempotency, !result.isNull(row, column),
           let id = PayloadID(bytes: try result.bytes(row, column + 1)) {
            found.idempotency = IdempotencyRecord(key: key, requestHash: try result.bytes(row, column), id: id,
                                                  payloadExpiresAt: try result.uint(row, column + 2), expiresAt: try result.uint(row, column + 3))
        }
        if let column = apiTokenColumn, let id = reads.apiToken, !result.isNull(row, column) {
            found.apiToken = APITokenRecord(id: id, provider: try result.text(row, column), secretHash: try result.bytes(row, column + 1),
                                            createdAt: try result.uint(row, column + 2),
                                            revokedAt: result.isNull(row, column + 3) ? nil : try result.uint(row, column + 3),
                                            scopes: APITokenScopes(names: try result.text(row, column + 4)) ?? [])
        }
        if let column = apiTokensRevisionColumn {
            // No row before the first token is issued.
            found.apiTokensRevision = result.isNull(row, column) ? 0 : try result.uint(row, column)
        }
        if let column = unreadColumn, let unread = reads.unread, found.user != nil {
            found.unread = try Self.unreadPage(unread, result, row: row, column: column)
        }
        if let column = userDevicesColumn, found.user != nil {
            found.userDevices = result.isNull(row, column) ? [] : try Self.userDevices(try result.bytes(row, column))
        }
        if let column = deviceKeysColumn, found.user != nil {
            found.deviceKeys = UserKeys(keys: result.isNull(row, column) ? [] : try Self.deviceKeys(try result.bytes(row, column)),
                                        cursor: try result.uint(row, column + 1))
        }
        if let column = limitsColumn {
            found.loginLimits = try Self.loginLimits(result, row: row, column: column)
        }
        return found
    }

    /// The payload's columns from `column` on, and its push's when asked; the body opened.
    private func payload(_ id: PayloadID, _ result: PostgresResult, row: Int, column: Int, open: Opener) throws -> StoredPayload {
        let userID = try result.uint(row, column + 1)
        var body: [UInt8] = []
        if !result.isNull(row, column + 2), !result.isNull(row, column + 3) {
            body = try open(try result.bytes(row, column + 3), UInt32(truncatingIfNeeded: try result.int64(row, column + 2)), id, userID)
        }
        var payload = StoredPayload(
            id: id, sequence: try result.uint(row, column), userID: userID, body: body,
            createdAt: try result.uint(row, column + 4), expiresAt: try result.uint(row, column + 5),
            readLimit: UInt32(clamping: try result.uint(row, column + 6)), readCount: UInt32(clamping: try result.uint(row, column + 7)),
            fetchCount: UInt32(clamping: try result.uint(row, column + 8)), fetchedAt: try result.uint(row, column + 9),
            life: PayloadLife(rawValue: try result.int64(row, column + 10)) ?? .expired,
            sender: result.isNull(row, column + 11) ? nil : try result.text(row, column + 11),
            listedAudience: try result.int64(row, column + 12) != PayloadAudience.user.storedKind,
            readerListed: try result.bool(row, column + 13),
            readerAcknowledged: result.isNull(row, column + 14) ? nil : try result.bool(row, column + 14),
            sealed: try result.bool(row, column + 15))
        if let column = pushColumn, !result.isNull(row, column) {
            payload.push = try result.int64(row, column) == OutboxState.handed.rawValue
                ? .handed(PushAck(written: UInt32(clamping: try result.uint(row, column + 1)),
                                  queued: UInt32(clamping: try result.uint(row, column + 2))))
                : .waiting
        }
        return payload
    }

    /// SYNC's page: the IDs packed one after another, the cursor, whether more follow, the older ones.
    private static func unreadPage(_ unread: UnreadQuery, _ result: PostgresResult, row: Int, column: Int) throws -> UnreadPage {
        var ids: [PayloadID] = []
        if !result.isNull(row, column) {
            let packed = try result.bytes(row, column)
            ids.reserveCapacity(packed.count / PayloadID.byteCount)
            var offset = 0
            while offset + PayloadID.byteCount <= packed.count {
                if let id = PayloadID(bytes: Array(packed[offset..<offset + PayloadID.byteCount])) { ids.append(id) }
                offset += PayloadID.byteCount
            }
        }
        let cursor = result.isNull(row, column + 1) ? unread.cursor : try result.uint(row, column + 1)
        let hasMore = result.isNull(row, column + 2) ? false : try result.bool(row, column + 2)
        let older = result.isNull(row, column + 3) ? 0 : try result.uint(row, column + 3)
        return UnreadPage(ids: ids, cursor: cursor, hasMore: hasMore, older: older)
    }

    /// The pair's limits and the address's credit; a row missing is a state not yet limited.
    private static func loginLimits(_ result: PostgresResult, row: Int, column: Int) throws -> LoginLimitState {
        var state = LoginLimitState()
        if !result.isNull(row, column) {
            state.failures = Int(clamping: try result.uint(row, column))
            state.blockedUntilMs = try result.uint(row, column + 1)
            state.lastAttemptMs = try result.uint(row, column + 2)
            state.trustedUntilMs = try result.uint(row, column + 3)
        }
        if !result.isNull(row, column + 4) {
            state.creditMs = try result.int64(row, column + 4)
            state.creditUpdatedMs = try result.uint(row, column + 5)
        }
        return state
    }

    /// The enrolled devices packed by the `userDevices` column.
    static func userDevices(_ packed: [UInt8]) throws(PostgresError) -> [UserDevice] {
        var devices: [UserDevice] = []
        var offset = 0
        func next() throws(PostgresError) -> String {
            guard offset + 4 <= packed.count else { throw PostgresError(kind: .protocolViolation, message: "bad list of devices") }
            let count = packed[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
            offset += 4
            guard count <= packed.count - offset else { throw PostgresError(kind: .protocolViolation, message: "bad list of devices") }
            defer { offset += count }
            return String(decoding: packed[offset..<offset + count], as: UTF8.self)
        }
        while offset < packed.count {
            let deviceID = try next()
            devices.append(UserDevice(deviceID: deviceID, tags: RegistryRow.tags(try next())))
        }
        return devices
    }

    // MARK: the registry

    /// At most `limit` + 1 changes after the cursor, oldest first: the extra one says
    /// whether more follow.
    static func registryPage(_ query: RegistryQuery) -> (sql: String, parameters: [PostgresValue]) {
        ("SELECT change_seq, state, credential FROM registrations WHERE change_seq > $1 ORDER BY change_seq LIMIT $2",
         [.uint(query.cursor), .int(query.limit + 1)])
    }

    /// The page, cut where another entry would take the reply past `maxBytes`, but always
    /// holding one entry when one follows ([4.16-4]), as `RegistryReads.changes` does.
    static func decodeRegistryPage(_ result: PostgresResult, query: RegistryQuery) throws(PostgresError) -> RegistryPage {
        var entries: [RegistryEntry] = []
        var next = query.cursor
        var bytes = RegistryPage.replyOverheadBytes
        var hasMore = false
        for row in result.rows.indices {
            let entry = RegistryEntry(state: RegistryEntry.State(rawValue: UInt8(truncatingIfNeeded: try result.int64(row, 1))) ?? .revoked,
                                      credential: try result.bytes(row, 2))
            if entries.count == query.limit || (!entries.isEmpty && bytes + entry.encodedCount > query.maxBytes) {
                hasMore = true
                break
            }
            bytes += entry.encodedCount
            entries.append(entry)
            next = try result.uint(row, 0)
        }
        return RegistryPage(entries: entries, cursor: next, hasMore: hasMore)
    }

    /// The registry's last change number and, after `cursor`, how many changes left an
    /// entry enrolled and how many revoked: one statement, two index probes that find
    /// nothing while the registry is unchanged.
    static func registryNotice(after cursor: UInt64) -> (sql: String, parameters: [PostgresValue]) {
        ("""
         SELECT (SELECT value FROM store_meta WHERE key = 'registry_seq'),
                (SELECT count(*) FROM registrations WHERE change_seq > $1 AND state = \(RegistryEntry.State.enrolled.sql)),
                (SELECT count(*) FROM registrations WHERE change_seq > $1 AND state <> \(RegistryEntry.State.enrolled.sql))
         """, [.uint(cursor)])
    }
}
