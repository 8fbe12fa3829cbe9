import FoundationEssentials
import PushWire

/// A whole response of the HTTP provider API.
struct ProviderAPIResponse: Equatable {
    var status: Int
    var headers: [(String, String)]
    var body: [UInt8]

    static func == (lhs: ProviderAPIResponse, rhs: ProviderAPIResponse) -> Bool {
        lhs.status == rhs.status && lhs.body == rhs.body && lhs.headers.map { "\($0.0): \($0.1)" } == rhs.headers.map { "\($0.0): \($0.1)" }
    }

    static func problem(_ problem: ProviderAPIProblem) -> ProviderAPIResponse {
        ProviderAPIResponse(status: problem.httpStatus, headers: [("Content-Type", "application/problem+json")] + problem.headers,
                            body: problem.body)
    }

    static func json(_ status: Int, _ value: some Encodable, headers: [(String, String)] = []) -> ProviderAPIResponse {
        let body = (try? ProviderAPIJSON.encoder.encode(value)).map(Array.init) ?? []
        return ProviderAPIResponse(status: status, headers: [("Content-Type", "application/json")] + headers, body: body)
    }

    /// The answer to the store's reply to a request of `route`. `createdAt`: the new
    /// payload's creation time, known when the reply follows a commit.
    static func answering(_ reply: Message, to route: ProviderAPIRoute, keyed: Bool, createdAt: UInt64?) -> ProviderAPIResponse {
        switch reply {
        case .sendOK(let sent):
            var headers = [("Location", "/v1/messages/\(sent.id.hex)")]
            if sent.replayed { headers.append(("Idempotent-Replayed", "true")) }
            let body = SentMessage(id: sent.id.hex, createdAt: createdAt.map(ProviderAPIJSON.time),
                                   expiresAt: ProviderAPIJSON.time(sent.expiresAt), replayed: sent.replayed)
            return ProviderAPIResponse(status: 201, headers: [("Content-Type", "application/json")] + headers, body: body.json)
        case .statusOK(let status):
            return .json(200, MessageStatus(status))
        case .recallOK:
            return ProviderAPIResponse(status: 204, headers: [], body: [])
        case .error(let error):
            var problem = ProviderAPIProblem(error, keyedSend: keyed && route == .send)
            if case .recall = route, error.status == .gone { problem.detail = "already recalled or expired" }
            return .problem(problem)
        default:
            return .problem(ProviderAPIProblem(500, Status.internalError.name, "unexpected reply \(reply.type)"))
        }
    }
}

/// The body of `201 Created`.
struct SentMessage: Encodable {
    /// The document, written directly: every value is hex digits, a time or a boolean, none
    /// needs escaping, and this answer is the API's hot path (JSONEncoder's general
    /// machinery cost more than the rest of building the response). Member order and
    /// spelling are JSONEncoder's with sorted keys; a test holds the two equal.
    var json: [UInt8] {
        var text = "{"
        if let createdAt { text += "\"created_at\":\"\(createdAt)\"," }
        text += "\"expires_at\":\"\(expiresAt)\",\"id\":\"\(id)\",\"replayed\":\(replayed)}"
        return Array(text.utf8)
    }

    var id: String
    /// Absent when the answer replays an earlier request's ([4.17-5]).
    var createdAt: String?
    var expiresAt: String
    var replayed: Bool

    enum CodingKeys: String, CodingKey {
        case id, replayed
        case createdAt = "created_at"
        case expiresAt = "expires_at"
    }
}

/// The body of `GET /v1/messages/{id}`: STATUS_OK ([4.12]).
struct MessageStatus: Encodable {
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

    init(_ status: StatusOK) {
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
