import FoundationEssentials
import PushClock
import PushWire

/// A whole response of the HTTP provider API.
public struct ProviderAPIResponse: Equatable, Sendable {
    public var status: Int
    public var headers: [(String, String)]
    public var body: [UInt8]

    public init(status: Int, headers: [(String, String)], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public static func == (lhs: ProviderAPIResponse, rhs: ProviderAPIResponse) -> Bool {
        lhs.status == rhs.status && lhs.body == rhs.body && lhs.headers.map { "\($0.0): \($0.1)" } == rhs.headers.map { "\($0.0): \($0.1)" }
    }

    public static func problem(_ problem: ProviderAPIProblem) -> ProviderAPIResponse {
        ProviderAPIResponse(status: problem.httpStatus, headers: [("Content-Type", "application/problem+json")] + problem.headers,
                            body: problem.body)
    }

    public static func json(_ status: Int, _ value: some Encodable, headers: [(String, String)] = []) -> ProviderAPIResponse {
        let body = (try? ProviderAPIJSON.encoder.encode(value)).map(Array.init) ?? []
        return ProviderAPIResponse(status: status, headers: [("Content-Type", "application/json")] + headers, body: body)
    }

    /// The answer to the store's reply to a request of `route`. `createdAt`: the payload's
    /// creation time, which a SEND_OK comes with from the store (a replayed one too).
    /// `ifNoneMatch`: the request's `If-None-Match` values, read only for a KEYS_OK.
    public static func answering(_ reply: Message, to route: ProviderAPIRoute, createdAt: UInt64?,
                                 ifNoneMatch: @autoclosure () -> [String] = []) -> ProviderAPIResponse {
        switch reply {
        case .sendOK(let sent):
            var location: [UInt8] = []
            location.reserveCapacity(ProviderAPIRoute.messages.utf8.count + 33)
            location.append(contentsOf: ProviderAPIRoute.messages.utf8)
            location.append(UInt8(ascii: "/"))
            sent.id.appendHex(to: &location)
            var headers = [("Content-Type", "application/json"), ("Location", String(decoding: location, as: UTF8.self))]
            if sent.replayed { headers.append(("Idempotent-Replayed", "true")) }
            return ProviderAPIResponse(status: 201, headers: headers, body: SentMessage.json(sent, createdAt: createdAt))
        case .statusOK(let status):
            return .json(200, MessageStatus(status))
        case .recallOK:
            return ProviderAPIResponse(status: 204, headers: [], body: [])
        case .keysOK(let keys):
            guard case .keys(let recipient) = route else { break }
            let etag = RecipientKeys.entityTag(keys.cursor)
            if EntityTags.match(ifNoneMatch(), etag) { return ProviderAPIResponse(status: 304, headers: [("ETag", etag)], body: []) }
            return .json(200, RecipientKeys(recipient: recipient, keys), headers: [("ETag", etag)])
        case .error(let error):
            var problem = ProviderAPIProblem(error)
            if case .recall = route, error.status == .gone { problem.detail = "already recalled or expired" }
            // The resource is the recipient's keys: a recipient that does not exist is not found.
            if case .keys = route, error.status == .unknownUser { problem.httpStatus = 404 }
            return .problem(problem)
        default:
            break
        }
        return .problem(ProviderAPIProblem(500, Status.internalError.name, "unexpected reply \(reply.type)"))
    }
}

/// The body of `GET /v1/recipients/{name}/keys`: KEYS_OK ([4.18-1]), its cursor ([4.18-3])
/// also the response's entity tag.
///
/// ```json
/// {"cursor": 42, "keys": [{"device": "phone", "key_id": "9f86d081884c7d65", "public_key": "<base64>",
///  "suite": "x25519"}], "recipient": "alice"}
/// ```
public struct RecipientKeys: Encodable, Sendable {
    var recipient: String
    var cursor: UInt64
    var keys: [DeviceKey]

    struct DeviceKey: Encodable, Sendable {
        var device: String
        /// `KeySuite`'s name: x25519 or xwing.
        var suite: String
        /// 16 hexadecimal digits.
        var keyID: String
        /// Standard base64.
        var publicKey: String

        enum CodingKeys: String, CodingKey {
            case device, suite
            case keyID = "key_id"
            case publicKey = "public_key"
        }
    }

    public init(recipient: String, _ reply: KeysOK) {
        self.recipient = recipient
        cursor = reply.cursor
        keys = reply.keys.map { entry in
            DeviceKey(device: entry.deviceID, suite: entry.key.suite.description, keyID: entry.keyID.description,
                      publicKey: Data(entry.key.bytes).base64EncodedString())
        }
    }

    /// The strong entity tag of the keys as of `cursor`: equal cursors, equal keys ([4.18-3]).
    public static func entityTag(_ cursor: UInt64) -> String { "\"\(cursor)\"" }
}

/// `If-None-Match` (RFC 9110 13.1.2): `*`, or a list of entity tags compared weakly (`W/`
/// ignored).
enum EntityTags {
    /// Whether any of the header's values names `etag` or is `*`. A value that stops being
    /// a list of entity tags matches nothing from there on.
    static func match(_ values: [String], _ etag: String) -> Bool {
        values.contains { value in
            let text = Array(value.utf8)
            var at = 0
            func skipSeparators() {
                while at < text.count, text[at] == UInt8(ascii: ",") || text[at] == 0x20 || text[at] == 0x09 { at += 1 }
            }
            skipSeparators()
            if at < text.count, text[at] == UInt8(ascii: "*") {
                at += 1
                skipSeparators()
                return at == text.count
            }
            while at < text.count {
                if text[at...].starts(with: "W/".utf8) { at += 2 }
                guard at < text.count, text[at] == UInt8(ascii: "\""),
                      let close = text[(at + 1)...].firstIndex(of: UInt8(ascii: "\"")) else { return false }
                if text[at...close].elementsEqual(etag.utf8) { return true }
                at = close + 1
                guard at == text.count || text[at] == UInt8(ascii: ",") || text[at] == 0x20 || text[at] == 0x09 else { return false }
                skipSeparators()
            }
            return false
        }
    }
}

/// The body of `201 Created`.
public struct SentMessage: Encodable, Sendable {
    /// The document, written directly: every value is hex digits, a time or a boolean, none
    /// needs escaping, and this answer is the API's hot path (JSONEncoder's general
    /// machinery cost more than the rest of building the response). Member order and
    /// spelling are JSONEncoder's with sorted keys; a test holds the two equal.
    public var json: [UInt8] {
        var text = "{"
        if let createdAt { text += "\"created_at\":\"\(createdAt)\"," }
        if let cursor { text += "\"cursor\":\(cursor)," }
        text += "\"expires_at\":\"\(expiresAt)\",\"id\":\"\(id)\",\"replayed\":\(replayed)}"
        return Array(text.utf8)
    }

    /// `SentMessage(sent, createdAt:).json`, written straight from the reply's values
    /// into one buffer (no String on the way): the same bytes, a test holds them equal.
    public static func json(_ sent: SendOK, createdAt: UInt64?) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(128)
        out.append(UInt8(ascii: "{"))
        if let createdAt {
            out.append(contentsOf: #""created_at":""#.utf8)
            UTCTime.appendISO8601(milliseconds: createdAt, fractional: true, to: &out)
            out.append(contentsOf: #"","#.utf8)
        }
        if let cursor = sent.cursor {
            out.append(contentsOf: #""cursor":"#.utf8)
            out.append(contentsOf: String(cursor).utf8)
            out.append(UInt8(ascii: ","))
        }
        out.append(contentsOf: #""expires_at":""#.utf8)
        UTCTime.appendISO8601(milliseconds: sent.expiresAt, fractional: true, to: &out)
        out.append(contentsOf: #"","id":""#.utf8)
        sent.id.appendHex(to: &out)
        out.append(contentsOf: sent.replayed ? #"","replayed":true}"#.utf8 : #"","replayed":false}"#.utf8)
        return out
    }

    public var id: String
    /// The payload's creation time, a replay's too ([4.17-5]: it gets the first answer).
    /// Absent only where the store could not say (never from this build's store).
    public var createdAt: String?
    public var expiresAt: String
    public var replayed: Bool
    /// For a sealed payload, the recipient's key cursor as of the commit ([4.18-5]).
    public var cursor: UInt64?

    public init(id: String, createdAt: String?, expiresAt: String, replayed: Bool, cursor: UInt64? = nil) {
        self.id = id
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.replayed = replayed
        self.cursor = cursor
    }

    enum CodingKeys: String, CodingKey {
        case id, replayed, cursor
        case createdAt = "created_at"
        case expiresAt = "expires_at"
    }
}

/// The body of `GET /v1/messages/{id}`: STATUS_OK ([4.12]).
public struct MessageStatus: Encodable, Sendable {
    var id: String
    /// stored, fetched or gone.
    var state: String
    var fetchCount: UInt32
    var fetchedAt: String?
    var createdAt: String
    var expiresAt: String
    var push: PushStatus

    struct PushStatus: Encodable {
        /// none (stored without a push), waiting (no gateway has acknowledged it yet) or handed.
        var state: String
        var written: UInt32?
        var queued: UInt32?
    }

    public init(_ status: StatusOK) {
        id = status.id.hex
        state = status.state.description
        fetchCount = status.fetchCount
        fetchedAt = status.fetchedAt == 0 ? nil : ProviderAPIJSON.time(status.fetchedAt)
        createdAt = ProviderAPIJSON.time(status.createdAt)
        expiresAt = ProviderAPIJSON.time(status.expiresAt)
        switch status.push {
        case .none: push = PushStatus(state: "none")
        case .waiting: push = PushStatus(state: "waiting")
        case .handed(let ack): push = PushStatus(state: "handed", written: ack.written, queued: ack.queued)
        }
    }

    enum CodingKeys: String, CodingKey {
        case id, state, push
        case fetchCount = "fetch_count"
        case fetchedAt = "fetched_at"
        case createdAt = "created_at"
        case expiresAt = "expires_at"
    }
}
