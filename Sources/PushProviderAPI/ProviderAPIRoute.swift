import PushWire

/// What an HTTP request of the provider API asks for, from its method and path alone.
public enum ProviderAPIRoute: Equatable, Sendable {
    /// POST /v1/messages: SEND.
    case send
    /// GET /v1/messages/{id}: STATUS.
    case status(PayloadID)
    /// DELETE /v1/messages/{id}: RECALL.
    case recall(PayloadID)
    /// GET /v1/recipients/{name}/keys: KEYS ([4.18]), the name percent-decoded.
    case keys(recipient: String)

    public static let messages = "/v1/messages"
    public static let recipients = "/v1/recipients"
    static let keysSuffix = "/keys"

    /// The route, or the problem to answer: 404 for a path the API does not have (or an id
    /// that cannot be one), 405 with the methods it allows.
    public static func of(method: String, path: String) throws(ProviderAPIProblem) -> ProviderAPIRoute {
        if path == messages || path == messages + "/" {
            guard method == "POST" else { throw notAllowed("POST") }
            return .send
        }
        if path.utf8.starts(with: (recipients + "/").utf8) { return try keys(method: method, path: path) }
        guard path.hasPrefix(messages + "/") else {
            throw ProviderAPIProblem(404, Status.notFound.name, "no such resource; the API serves \(messages) and \(recipients)/{name}/keys")
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

    /// `/v1/recipients/{name}/keys`: one path segment between, percent-decoded (RFC 3986
    /// 2.1: `%2F` is a `/` in the name, `+` is itself), which must then be an identifier
    /// ([3.3-8]): 1 to 64 bytes of UTF-8 without control characters. A name that cannot be
    /// one is 400 BAD_REQUEST, never UNKNOWN_USER, as on the wire.
    private static func keys(method: String, path: String) throws(ProviderAPIProblem) -> ProviderAPIRoute {
        let bytes = Array(path.utf8)
        let start = recipients.utf8.count + 1
        let end = bytes.count - keysSuffix.utf8.count
        guard end > start, bytes[end...].elementsEqual(keysSuffix.utf8), !bytes[start..<end].contains(UInt8(ascii: "/")) else {
            throw ProviderAPIProblem(404, Status.notFound.name, "no such resource; a recipient's keys are at \(recipients)/{name}/keys")
        }
        guard method == "GET" else { throw notAllowed("GET") }
        guard let name = percentDecoded(bytes[start..<end]) else {
            throw ProviderAPIProblem(400, Status.badRequest.name, "the recipient's name in the path is not percent-encoded UTF-8")
        }
        do throws(WireError) {
            try FieldTag.user.check(name)
        } catch {
            let detail = switch error {
            case .controlCharacter: "the recipient's name contains a control character: names are UTF-8 without control characters"
            case .fieldTooLong(_, let max): "the recipient's name is longer than \(max) bytes"
            default: "the recipient's name is not UTF-8"
            }
            throw ProviderAPIProblem(400, Status.badRequest.name, detail)
        }
        return .keys(recipient: String(decoding: name, as: UTF8.self))
    }

    /// The bytes a percent-encoded path segment stands for; nil for a `%` not followed by
    /// two hexadecimal digits.
    static func percentDecoded(_ segment: ArraySlice<UInt8>) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(segment.count)
        var at = segment.startIndex
        while at < segment.endIndex {
            let byte = segment[at]
            guard byte == UInt8(ascii: "%") else {
                out.append(byte)
                at += 1
                continue
            }
            guard segment.endIndex - at >= 3, let high = hexValue(segment[at + 1]), let low = hexValue(segment[at + 2]) else { return nil }
            out.append(high << 4 | low)
            at += 3
        }
        return out
    }

    private static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    private static func notAllowed(_ allowed: String) -> ProviderAPIProblem {
        ProviderAPIProblem(405, Status.badRequest.name, "allowed here: \(allowed)", headers: [("Allow", allowed)])
    }
}
