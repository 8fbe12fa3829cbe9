import PushWire

/// What an HTTP request of the provider API asks for, from its method and path alone.
public enum ProviderAPIRoute: Equatable, Sendable {
    /// POST /v1/messages: SEND.
    case send
    /// GET /v1/messages/{id}: STATUS.
    case status(PayloadID)
    /// DELETE /v1/messages/{id}: RECALL.
    case recall(PayloadID)

    public static let messages = "/v1/messages"

    /// The route, or the problem to answer: 404 for a path the API does not have (or an id
    /// that cannot be one), 405 with the methods it allows.
    public static func of(method: String, path: String) throws(ProviderAPIProblem) -> ProviderAPIRoute {
        if path == messages || path == messages + "/" {
            guard method == "POST" else { throw notAllowed("POST") }
            return .send
        }
        guard path.hasPrefix(messages + "/") else {
            throw ProviderAPIProblem(404, Status.notFound.name, "no such resource; the API serves \(messages)")
        }
        let text = path.dropFirst(messages.count + 1)
        guard let id = PayloadID(hex: String(text)) else {
            throw ProviderAPIProblem(404, Status.notFound.name, "not a message id: an id is 32 hexadecimal digits")
        }
        switch method {
        case "GET": return .status(id)
        case "DELETE": return .recall(id)
        default: throw notAllowed("GET, DELETE")
        }
    }

    private static func notAllowed(_ allowed: String) -> ProviderAPIProblem {
        ProviderAPIProblem(405, Status.badRequest.name, "allowed here: \(allowed)", headers: [("Allow", allowed)])
    }
}
