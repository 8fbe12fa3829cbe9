import FoundationEssentials

/// JetStream's JSON API bodies as Codable values, read and written with FoundationEssentials'
/// JSONDecoder and JSONEncoder: the project's one JSON reader (the HTTP API's too).
enum JetStreamJSON {
    private static let decoder = JSONDecoder()
    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        // Deterministic bytes (tests compare them), and subjects' '/' left as it is.
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    static func encode(_ body: some Encodable) throws(NATSError) -> [UInt8] {
        do {
            return Array(try encoder.encode(body))
        } catch {
            throw .malformedReply("cannot write the JSON request: \(error)")
        }
    }

    /// An API reply: its `error` member as `.jetStream`, else the reply as `Body`. Anything
    /// else (not JSON, not an object, a member missing or of the wrong type) is `.malformedReply`.
    static func reply<Body: Decodable>(_ message: NATSMessage, as body: Body.Type) -> Result<Body, NATSError> {
        if let status = message.status {
            return .failure(.malformedReply("status \(status) \(message.header("Description") ?? "")"))
        }
        do {
            return try decoder.decode(APIReply<Body>.self, from: Data(message.data)).result
        } catch let error as DecodingError {
            return .failure(.malformedReply("JSON: \(summary(error))"))
        } catch {
            return .failure(.malformedReply("JSON: \(error)"))
        }
    }

    /// The decoder's error in one line: what was wrong and where.
    static func summary(_ error: DecodingError) -> String {
        func path(_ context: DecodingError.Context) -> String {
            context.codingPath.isEmpty ? "the reply" : context.codingPath.map(\.stringValue).joined(separator: ".")
        }
        switch error {
        case .keyNotFound(let key, let context): return "\(path(context)) has no \(key.stringValue)"
        case .typeMismatch(_, let context), .valueNotFound(_, let context): return "\(path(context)): \(context.debugDescription)"
        case .dataCorrupted(let context): return context.debugDescription
        @unknown default: return "\(error)"
        }
    }
}

/// A JetStream API reply: either an `error` object or the body asked for. Decoding it
/// requires a JSON object.
private struct APIReply<Body: Decodable>: Decodable {
    let result: Result<Body, NATSError>

    private enum Key: String, CodingKey { case error }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Key.self)
        if container.contains(.error) {
            let error = try container.decode(APIError.self, forKey: .error)
            result = .failure(.jetStream(code: error.code, errorCode: error.errorCode ?? 0, description: error.description ?? ""))
        } else {
            result = .success(try Body(from: decoder))
        }
    }
}

/// `{"code": 400, "err_code": 10058, "description": "..."}`: the code is required; an
/// err_code or description that is missing or not of its type reads as 0 or "".
private struct APIError: Decodable {
    let code: Int
    let errorCode: Int?
    let description: String?

    private enum CodingKeys: String, CodingKey {
        case code, description
        case errorCode = "err_code"
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        code = try container.decode(Int.self, forKey: .code)
        errorCode = try? container.decodeIfPresent(Int.self, forKey: .errorCode)
        description = try? container.decodeIfPresent(String.self, forKey: .description)
    }
}

/// A reply whose members this project does not read (stream info after CREATE/UPDATE).
struct IgnoredReply: Decodable {
    init(from decoder: any Decoder) throws {}
}

/// A publish's acknowledgement: the stream and the message's sequence in it.
struct PubAck: Decodable {
    let stream: String
    let seq: UInt64
}

/// The body of STREAM.CREATE and STREAM.UPDATE for a `StreamConfig`.
struct StreamConfigRequest: Encodable {
    let name: String
    let subjects: [String]
    let retention = "limits"
    let maxConsumers = -1
    let maxMessages = -1
    let maxBytes = -1
    /// Nanoseconds.
    let maxAge: Int64
    let maxMessagesPerSubject: Int
    let maxMessageSize = -1
    let storage = "file"
    let discard = "old"
    let replicas = 1
    let allowDirect = true

    private enum CodingKeys: String, CodingKey {
        case name, subjects, retention, storage, discard
        case maxConsumers = "max_consumers", maxMessages = "max_msgs", maxBytes = "max_bytes", maxAge = "max_age"
        case maxMessagesPerSubject = "max_msgs_per_subject", maxMessageSize = "max_msg_size"
        case replicas = "num_replicas", allowDirect = "allow_direct"
    }
}

/// The body of DIRECT.GET for the last message on a subject.
struct LastBySubjectRequest: Encodable {
    let subject: String

    private enum CodingKeys: String, CodingKey { case subject = "last_by_subj" }
}
