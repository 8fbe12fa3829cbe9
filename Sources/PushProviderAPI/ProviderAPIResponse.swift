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
    public static func answering(_ reply: Message, to route: ProviderAPIRoute, createdAt: UInt64?) -> ProviderAPIResponse {
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
        case .error(let error):
            var problem = ProviderAPIProblem(error)
            if case .recall = route, error.status == .gone { problem.detail = "already recalled or expired" }
            return .problem(problem)
        default:
            return .problem(ProviderAPIProblem(500, Status.internalError.name, "unexpected reply \(reply.type)"))
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

    public init(id: String, createdAt: String?, expiresAt: String, replayed: Bool) {
        self.id = id
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.replayed = replayed
    }

    enum CodingKeys: String, CodingKey {
        case id, replayed
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
