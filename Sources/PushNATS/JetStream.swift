import PushEventLoop

/// A stream's configuration as this project uses streams: file storage, old messages
/// discarded at a limit, direct get allowed, one replica per server it is on.
public struct StreamConfig: Sendable, Equatable {
    public var name: String
    public var subjects: [String]
    /// Messages kept per subject; -1 unlimited.
    public var maxMessagesPerSubject: Int
    /// How long a message is kept; zero unlimited.
    public var maxAge: Duration

    public init(name: String, subjects: [String], maxMessagesPerSubject: Int = -1, maxAge: Duration = .zero) {
        self.name = name
        self.subjects = subjects
        self.maxMessagesPerSubject = maxMessagesPerSubject
        self.maxAge = maxAge
    }

    /// The STREAM.CREATE / STREAM.UPDATE request body.
    func json() throws(NATSError) -> [UInt8] {
        let (seconds, attoseconds) = maxAge.components
        let nanoseconds = max(0, seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
        return try JetStreamJSON.encode(StreamConfigRequest(name: name, subjects: subjects, maxAge: nanoseconds,
                                                            maxMessagesPerSubject: maxMessagesPerSubject))
    }
}

/// A message read back from a stream.
public struct StoredMessage: Sendable, Equatable {
    public var sequence: UInt64
    public var subject: String
    public var data: [UInt8]
    /// When the server stored it (its `Nats-Time-Stamp`), in Unix milliseconds: set by the
    /// server, not by whoever published the message.
    public var storedAtMs: UInt64?

    public init(sequence: UInt64, subject: String, data: [UInt8], storedAtMs: UInt64? = nil) {
        self.sequence = sequence
        self.subject = subject
        self.data = data
        self.storedAtMs = storedAtMs
    }
}

/// JetStream's JSON API spoken over the connection's core requests. libnats' own js_*
/// calls are not used: they block the caller or start delivery threads. Loop-confined;
/// every completion runs on the loop, never inside the call.
public final class JetStream {
    public let connection: NATSConnection
    public let apiPrefix: String
    public let timeout: Duration

    /// "stream name already in use": CREATE found a stream of that name with another config.
    static let streamNameInUse = 10058

    public init(connection: NATSConnection, apiPrefix: String = "$JS.API", timeout: Duration = .seconds(5)) {
        self.connection = connection
        self.apiPrefix = apiPrefix
        self.timeout = timeout
    }

    /// Creates the stream, or updates it when one with that name exists with another config.
    public func ensureStream(_ config: StreamConfig, completion: @escaping (Result<Void, NATSError>) -> Void) {
        let body: [UInt8]
        do throws(NATSError) {
            try NATSNames.checkStreamName(config.name)
            guard !config.subjects.isEmpty else { throw .invalidSubject("stream \(config.name) has no subjects") }
            for subject in config.subjects { try NATSNames.checkSubject(subject, wildcards: true) }
            body = try config.json()
        } catch {
            connection.loop.schedule(after: .zero) { completion(.failure(error)) }
            return
        }
        apiRequest("\(apiPrefix).STREAM.CREATE.\(config.name)", body, as: IgnoredReply.self) { [weak self] result in
            switch result {
            case .failure(.jetStream(_, JetStream.streamNameInUse, _)):
                guard let self else { return completion(.failure(.notConnected)) }
                self.apiRequest("\(self.apiPrefix).STREAM.UPDATE.\(config.name)", body, as: IgnoredReply.self) { completion($0.map { _ in () }) }
            default:
                completion(result.map { _ in () })
            }
        }
    }

    /// The last message on `subject` (direct get, `last_by_subj`), nil when there is none.
    public func lastMessage(stream: String, subject: String, completion: @escaping (Result<StoredMessage?, NATSError>) -> Void) {
        let body: [UInt8]
        do throws(NATSError) {
            try NATSNames.checkStreamName(stream)
            try NATSNames.checkSubject(subject)
            body = try JetStreamJSON.encode(LastBySubjectRequest(subject: subject))
        } catch {
            connection.loop.schedule(after: .zero) { completion(.failure(error)) }
            return
        }
        connection.request("\(apiPrefix).DIRECT.GET.\(stream)", body, timeout: timeout) { result in
            completion(result.flatMap(JetStream.storedMessage))
        }
    }

    /// Publishes into a stream and waits for its PubAck; returns the stream sequence. With
    /// `expectedLastSubjectSequence` (0 = the subject must have no message) a mismatch fails
    /// with `.jetStream(errorCode: 10071)`, which `isWrongLastSequence` recognises.
    public func publish(
        _ subject: String, _ data: [UInt8], expectedLastSubjectSequence: UInt64? = nil,
        completion: @escaping (Result<UInt64, NATSError>) -> Void
    ) {
        var headers: [(String, String)] = []
        if let expectedLastSubjectSequence {
            headers.append(("Nats-Expected-Last-Subject-Sequence", String(expectedLastSubjectSequence)))
        }
        connection.request(subject, data, headers: headers, timeout: timeout) { result in
            completion(result.flatMap { JetStreamJSON.reply($0, as: PubAck.self).map(\.seq) })
        }
    }

    /// An API request whose reply is a JSON object: the object as `Body`, or its `error` as `.jetStream`.
    private func apiRequest<Body: Decodable>(_ subject: String, _ body: [UInt8], as reply: Body.Type,
                                             completion: @escaping (Result<Body, NATSError>) -> Void) {
        connection.request(subject, body, timeout: timeout) { result in
            completion(result.flatMap { JetStreamJSON.reply($0, as: reply) })
        }
    }

    /// A direct get's reply: the message with its sequence and subject in headers, a 404
    /// status for none, another status (408, 413…) as a failure.
    static func storedMessage(_ message: NATSMessage) -> Result<StoredMessage?, NATSError> {
        if let status = message.status {
            if status == 404 { return .success(nil) }
            return .failure(.jetStream(code: status, errorCode: 0, description: message.header("Description") ?? ""))
        }
        guard let sequenceText = message.header("Nats-Sequence"), let sequence = UInt64(sequenceText),
              let subject = message.header("Nats-Subject")
        else { return .failure(.malformedReply("direct get reply without Nats-Sequence and Nats-Subject")) }
        let storedAtMs = message.header("Nats-Time-Stamp").flatMap(NATSTimestamp.unixMilliseconds)
        return .success(StoredMessage(sequence: sequence, subject: subject, data: message.data, storedAtMs: storedAtMs))
    }
}
