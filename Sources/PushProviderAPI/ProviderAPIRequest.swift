import PushWire

/// The protocol request an HTTP request of the provider API stands for, from its route,
/// its headers and its body: what `StoreHTTPAPI` hands to the store's request path, and
/// what fuzz/HTTPRequestPath.swift drives with arbitrary bytes.
public enum ProviderAPIRequest {
    /// `header(name)`: every value the request has of that header (case-insensitive), in
    /// arrival order.
    public static func message(for route: ProviderAPIRoute, header: (String) -> [String], body: [UInt8])
        throws(ProviderAPIProblem) -> Message {
        switch route {
        case .status(let id): return .status(StatusRequest(id: id))
        case .recall(let id): return .recall(Recall(id: id))
        case .send:
            let type = header("Content-Type").first ?? ""
            guard type.split(separator: ";").first.map(trimmed)?.lowercased() == "application/json" else {
                throw ProviderAPIProblem(415, Status.badRequest.name, "the body must be application/json",
                                         headers: [("Accept", "application/json")])
            }
            let key = try idempotencyKey(header("Idempotency-Key"))
            return .send(try MessagePost.decode(body).sendRequest(idempotencyKey: key))
        }
    }

    /// The SEND's idempotency key: none without the header. An empty one, or two, are
    /// refused rather than read as none or as one of them: the client meant its retries to
    /// be safe, and they would not be.
    static func idempotencyKey(_ values: [String]) throws(ProviderAPIProblem) -> String? {
        guard let key = values.first else { return nil }
        guard values.count == 1 else {
            throw ProviderAPIProblem(400, Status.badRequest.name, "Idempotency-Key is given more than once; give one key")
        }
        guard !key.isEmpty else {
            throw ProviderAPIProblem(400, Status.badRequest.name, "Idempotency-Key is empty; give a key, or no header for none")
        }
        return key
    }

    private static func trimmed(_ text: Substring) -> Substring {
        var text = text
        while text.first == " " || text.first == "\t" { text.removeFirst() }
        while text.last == " " || text.last == "\t" { text.removeLast() }
        return text
    }
}
