import PushClient
import PushWire

/// Sends every malformed vector on its own connection to a running service, after a
/// HELLO made by `hello`, and returns the vectors whose outcome differed from the one
/// the vector documents, with why. `bystander` must keep answering PING meanwhile.
public func malformedVectorFailures(service: some ReachableService, hello: (Int) -> Hello, bystander: BlockingWireClient) -> [String] {
    var failures: [String] = []
    let malformed = VectorFiles.all.filter {
        switch $0.expectation {
        case .fatal, .requestError, .rejected: true
        default: false
        }
    }
    if malformed.count < 20 { failures.append("only \(malformed.count) malformed vectors found") }
    for vector in malformed {
        do {
            if let problem = try check(vector, service: service, hello: hello(vector.maxFrame)) {
                failures.append("\(vector.name): \(problem)")
            }
        } catch {
            failures.append("\(vector.name): \(error)")
        }
        if (try? bystander.request(.ping)) != .pong { failures.append("\(vector.name): the bystander stopped being served") }
    }
    return failures
}

private func check(_ vector: TestVector, service: some ReachableService, hello: Hello) throws -> String? {
    let client = try service.connect()
    guard case .helloOK = try client.hello(hello) else { return "HELLO refused" }
    try client.sendRaw(vector.bytes)
    let type = MessageType(rawValue: vector.bytes[2])
    switch vector.expectation {
    case .fatal(let status):
        let reply = try client.receive()
        guard case .goaway(let goaway) = reply.message, goaway.status == status else { return "expected GOAWAY \(status), got \(reply.message)" }
        return client.waitForClose() ? nil : "the connection stayed open"
    case .rejected where type == .goaway:
        // [5.6-3] a malformed GOAWAY still ends the connection.
        return client.waitForClose() ? nil : "a malformed GOAWAY left the connection open"
    case .rejected:
        // [5.6-3] no ERROR about a reply or a one-way message.
        if let extra = try? client.receive(timeoutMs: 200) { return "answered a reply with \(extra.message)" }
        return try client.request(.ping) == .pong ? nil : "the connection stopped answering"
    case .requestError where type?.isRequest == false:
        return "request_error on a reply or one-way message [9-6]"
    case .requestError(let status):
        let reply = try client.receive()
        guard case .error(let error) = reply.message, error.status == status else { return "expected ERROR \(status), got \(reply.message)" }
        let header = try vector.bytes.withUnsafeBytes { try FrameHeader.parse($0, maxFrame: FrameLimits.ceiling) }
        guard reply.header.correlation == header.correlation else { return "ERROR did not echo the correlation id" }
        return try client.request(.ping) == .pong ? nil : "the connection did not stay open"
    default:
        return nil
    }
}
