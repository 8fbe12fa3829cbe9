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
        case .keys(let recipient): return .keys(Keys(user: recipient))
        case .send:
            guard isJSON(header("Content-Type").first ?? "") else {
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

    /// Whether a Content-Type names JSON: `application/json` in any case, spaces or tabs
    /// around it, parameters after a `;` ignored. Read in place: this is every request's.
    static func isJSON(_ type: String) -> Bool {
        var type = type
        return type.withUTF8 { bytes in
            var start = 0
            var end = bytes.firstIndex(of: UInt8(ascii: ";")) ?? bytes.count
            while start < end, bytes[start] == 0x20 || bytes[start] == 0x09 { start += 1 }
            while end > start, bytes[end - 1] == 0x20 || bytes[end - 1] == 0x09 { end -= 1 }
            let expected: StaticString = "application/json"
            guard end - start == expected.utf8CodeUnitCount else { return false }
            for offset in 0..<(end - start) {
                let byte = bytes[start + offset]
                let lower = byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
                guard lower == expected.utf8Start[offset] else { return false }
            }
            return true
        }
    }
}
